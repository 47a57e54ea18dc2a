//! The emulated RM's own size tables, written as literal numbers from a C probe
//! (`sizeof`/`offsetof`) against the headers of
//! NVIDIA/open-gpu-kernel-modules at each family's tag, independent of the generated structs the
//! client side uses: if a header in `headers/nv/` were wrong, client and emulator would disagree
//! and the bring-up tests would fail instead of agreeing on the mistake.
//!
//! - escape argument sizes (stable 550..595, except NVOS46);
//! - per driver family ([`RmAbi`], 550 / 570 / 575 / 580 / 590 / 595): the sizes that changed
//!   (575 took 580's 3-byte GPFIFO_SCHEDULE; 590 shrank UVM_FREE to 16 bytes and
//!   UVM_UNREGISTER_CHANNEL to 12: kernel-open/nvidia-uvm/uvm_ioctl.h of 590.48.01);
//! - RM_ALLOC parameter sizes per class (what RM copies, whatever `paramsSize` says);
//! - RM_CONTROL parameter sizes per command (what `paramsSize` must equal);
//! - UVM parameter sizes per family.
//!
//! Not guaranteed: 550 is emulated for its sizes only (to test that clients refuse it); its
//! fields are decoded with the 570 layouts, which extend 550's.

use crate::sys::nv::common::*;
use crate::{bail, Result};

pub(crate) const SZ_NVOS00: usize = 16;
pub(crate) const SZ_NVOS02_WITH_FD: usize = 56;
pub(crate) const SZ_NVOS21: usize = 32;
pub(crate) const SZ_NVOS54: usize = 32;
pub(crate) const SZ_NVOS33_WITH_FD: usize = 56;
pub(crate) const SZ_NVOS34: usize = 32;
pub(crate) const SZ_CARD_INFO: usize = 72;
pub(crate) const SZ_REGISTER_FD: usize = 4;
pub(crate) const SZ_RM_API_VERSION: usize = 72;
pub(crate) const SZ_OS_EVENT: usize = 16;
pub(crate) const SZ_XFER: usize = 16;
pub(crate) const SZ_WAIT_OPEN_COMPLETE: usize = 8;

/// The layouts of one emulated driver family.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct RmAbi {
    pub(crate) major: u32,
    /// The version `MOCKGPU_NV_DRIVER=<major>` stands for (the tag the sizes come from).
    pub(crate) version: &'static str,
    pub(crate) nvos46: usize,
    pub(crate) vaspace: usize,
    pub(crate) gpfifo_schedule: usize,
    pub(crate) classlist_v2: usize,
    pub(crate) channel: usize,
    pub(crate) root_client: usize,
    pub(crate) build_version_v2: usize,
    pub(crate) uvm_free: usize,
    pub(crate) uvm_unregister_channel: usize,
}

/// 570.86.16's layouts.
const ABI_570: RmAbi = RmAbi {
    major: 570,
    version: "570.86.16",
    nvos46: 56,
    vaspace: 48,
    gpfifo_schedule: 2,
    classlist_v2: 404,
    channel: 368,
    root_client: 120,
    build_version_v2: 1032,
    uvm_free: 24,
    uvm_unregister_channel: 28,
};

/// 580.142's layouts.
const ABI_580: RmAbi = RmAbi {
    major: 580,
    version: "580.142",
    nvos46: 64,
    vaspace: 56,
    gpfifo_schedule: 3,
    classlist_v2: 804,
    ..ABI_570
};

/// 590.48.01's layouts (595.45.04 has the same).
const ABI_590: RmAbi = RmAbi {
    major: 590,
    version: "590.48.01",
    uvm_free: 16,
    uvm_unregister_channel: 12,
    ..ABI_580
};

/// 550.54.15, 570.86.16, 575.64.05, 580.142, 590.48.01, 595.45.04 [sizes].
pub(crate) const RM_ABIS: [RmAbi; 6] = [
    RmAbi {
        major: 550,
        version: "550.54.15",
        classlist_v2: 700,
        channel: 360,
        root_client: 108,
        build_version_v2: 776,
        ..ABI_570
    },
    ABI_570,
    RmAbi {
        major: 575,
        version: "575.64.05",
        gpfifo_schedule: 3,
        ..ABI_570
    },
    ABI_580,
    ABI_590,
    RmAbi {
        major: 595,
        version: "595.45.04",
        ..ABI_590
    },
];

/// The family of an emulated driver version (`580.142`, or just the family: `595`).
pub(crate) fn rm_abi(version: &str) -> Result<&'static RmAbi> {
    let major = version
        .split('.')
        .next()
        .and_then(|m| m.parse::<u32>().ok());
    match RM_ABIS.iter().find(|a| Some(a.major) == major) {
        Some(a) => Ok(a),
        None => {
            let known: Vec<String> = RM_ABIS.iter().map(|a| a.major.to_string()).collect();
            bail!(
                InvalidArgument,
                "MOCKGPU_NV_DRIVER={version:?}: the emulated driver families are {}",
                known.join(", ")
            )
        }
    }
}

/// The version string the emulated driver reports for `MOCKGPU_NV_DRIVER=version`: a bare family
/// (`595`) stands for its measured tag.
pub(crate) fn full_version(version: &str, abi: &RmAbi) -> String {
    if version.contains('.') {
        version.to_string()
    } else {
        abi.version.to_string()
    }
}

impl RmAbi {
    /// Entries of GET_CLASSLIST_V2's fixed array.
    pub(crate) fn classlist_v2_max(&self) -> usize {
        (self.classlist_v2 - 4) / 4
    }

    /// Bytes RM copies from `pAllocParms` for `class` (0: the class takes no parameters).
    pub(crate) fn alloc_params_size(&self, class: u32) -> usize {
        match class {
            NV01_ROOT | NV01_ROOT_NON_PRIV | NV01_ROOT_CLIENT => self.root_client,
            NV01_DEVICE_0 => 56,
            NV20_SUBDEVICE_0 => 4,
            NV01_MEMORY_LOCAL_USER | NV01_MEMORY_SYSTEM => 128,
            NV01_MEMORY_VIRTUAL => 24,
            FERMI_VASPACE_A => self.vaspace,
            KEPLER_CHANNEL_GROUP_A => 20,
            FERMI_CONTEXT_SHARE_A => 12,
            VOLTA_CHANNEL_GPFIFO_A
            | TURING_CHANNEL_GPFIFO_A
            | AMPERE_CHANNEL_GPFIFO_A
            | HOPPER_CHANNEL_GPFIFO_A
            | BLACKWELL_CHANNEL_GPFIFO_A
            | BLACKWELL_CHANNEL_GPFIFO_B => self.channel,
            _ => 0,
        }
    }

    /// The exact `paramsSize` of control `cmd` (`None`: not a control this RM exports).
    pub(crate) fn control_params_size(&self, cmd: u32) -> Option<usize> {
        Some(match cmd {
            NV0000_CTRL_CMD_SYSTEM_GET_BUILD_VERSION_V2 => self.build_version_v2,
            NV0000_CTRL_CMD_GPU_GET_ID_INFO_V2 => 32,
            NV0080_CTRL_CMD_GPU_GET_CLASSLIST => 16,
            NV0080_CTRL_CMD_GPU_GET_CLASSLIST_V2 => self.classlist_v2,
            NV2080_CTRL_CMD_GPU_GET_GID_INFO => 268,
            NV2080_CTRL_CMD_GR_GET_INFO => 32,
            NV2080_CTRL_CMD_PERF_BOOST => 8,
            NV2080_CTRL_CMD_FB_FLUSH_GPU_CACHE => 4024,
            NVA06C_CTRL_CMD_GPFIFO_SCHEDULE | NVA06F_CTRL_CMD_GPFIFO_SCHEDULE => {
                self.gpfifo_schedule
            }
            NVC36F_CTRL_CMD_GPFIFO_GET_WORK_SUBMIT_TOKEN => 4,
            _ => return None,
        })
    }

    /// The parameter size of UVM request `request` (`None`: not emulated).
    pub(crate) fn uvm_params_size(&self, request: u64) -> Option<usize> {
        Some(match u32::try_from(request).ok()? {
            UVM_INITIALIZE => 16,
            UVM_MM_INITIALIZE => 8,
            UVM_REGISTER_GPU => 40,
            UVM_REGISTER_GPU_VASPACE => 32,
            UVM_REGISTER_CHANNEL => 56,
            UVM_UNREGISTER_CHANNEL => self.uvm_unregister_channel,
            UVM_CREATE_EXTERNAL_RANGE => 24,
            UVM_MAP_EXTERNAL_ALLOCATION => 9264,
            UVM_FREE => self.uvm_free,
            UVM_ENABLE_PEER_ACCESS => 36,
            _ => return None,
        })
    }
}
