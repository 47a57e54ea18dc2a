//! [`DriverFamily`]: which struct layouts the running NVIDIA driver takes, chosen at run time
//! from its version string, and family-neutral builders for the structs whose layout differs
//! between families (open-gpu-kernel-modules headers per tag): NVOS46, the FERMI_VASPACE_A and
//! channel allocation parameters, GPFIFO_SCHEDULE, GET_CLASSLIST_V2, the root-client parameters,
//! GET_BUILD_VERSION_V2, and the UVM_FREE / UVM_UNREGISTER_CHANNEL parameters.
//!
//! Families (sizes checked with a C probe against the headers of NVIDIA/open-gpu-kernel-modules
//! at tags 570.86.16, 575.64.05, 580.142, 590.48.01 and 595.45.04; every escape number, control
//! id and UVM request number rawgrad uses is the same in all five):
//!
//! | family | RM layouts | GPFIFO_SCHEDULE | UVM_FREE | UVM_UNREGISTER_CHANNEL |
//! | --- | --- | --- | --- | --- |
//! | 570 | `v570` (NVOS46 56, vaspace 48, CLASSLIST_V2 404) | 2 | 24 | 28 |
//! | 575 | `v570` | 3 (`v580`'s) | 24 | 28 |
//! | 580 | `v580` (NVOS46 64, vaspace 56, CLASSLIST_V2 804) | 3 | 24 | 28 |
//! | 590, 595 | `v580` | 3 | 16 (`v590`) | 12 (`v590`) |
//!
//! Detection: `NV_ESC_CHECK_VERSION_STR` in QUERY mode on the control fd (stateless, the same
//! 72-byte struct in every family), falling back to `/proc/driver/nvidia/version`. A version
//! outside the known families is refused with an error naming it, the supported families and the
//! `NV_DRIVER_FAMILY=` override (which picks a family's layouts whatever the version says),
//! because guessing layouts makes RM read garbage (allocations), refuse with 0x3A (controls) or
//! UVM read a status where the caller wrote a length (UVM_FREE in 590).
//!
//! Not guaranteed: a family covers one major version (570.x, ..., 595.x); minor releases are
//! assumed to keep the layouts, which held for the tags measured.

use crate::driver::api::{arg_bytes, arg_from_bytes, Driver, Fd, IoctlArg};
use crate::helpers::getenv_str;
use crate::sys::nv::common::NV_STATUS;
use crate::sys::nv::{v570, v580, v590};
use crate::{bail, Error, Result};

/// A supported NVIDIA driver family (one major version; its RM and UVM struct layouts).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum DriverFamily {
    /// 570.x (layouts of 570.86.16).
    V570,
    /// 575.x (575.64.05): the 570 layouts with the 3-byte GPFIFO_SCHEDULE.
    V575,
    /// 580.x (layouts of 580.142): NVOS46 64, vaspace 56, GPFIFO_SCHEDULE 3, CLASSLIST_V2 804.
    V580,
    /// 590.x (590.48.01): the 580 layouts with the 16-byte UVM_FREE and 12-byte
    /// UVM_UNREGISTER_CHANNEL.
    V590,
    /// 595.x (595.45.04): the same layouts as 590.
    V595,
}

/// Which generated module a family's RM structs come from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum RmLayout {
    V570,
    V580,
}

/// The sizes (bytes, x86-64) of the structs that differ between families.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FamilySizes {
    pub nvos46: usize,
    pub vaspace_params: usize,
    pub gpfifo_schedule_params: usize,
    pub classlist_v2_params: usize,
    pub channel_alloc_params: usize,
    pub root_client_params: usize,
    pub build_version_v2_params: usize,
    pub uvm_free_params: usize,
    pub uvm_unregister_channel_params: usize,
}

/// FERMI_VASPACE_A allocation parameters, family-neutral (`pasid` exists from 580 on).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct VaSpaceParams {
    pub index: u32,
    pub flags: u32,
    pub va_size: u64,
    pub va_start_internal: u64,
    pub va_limit_internal: u64,
    pub big_page_size: u32,
    pub va_base: u64,
    pub pasid: u32,
}

/// Channel (GPFIFO class) allocation parameters, family-neutral: the fields a client sets
/// (subdevice 0's USERD only); everything else is zero.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ChannelParams {
    /// Error notifier memory (`hObjectError`).
    pub h_object_error: u32,
    /// Memory holding the ring (`hObjectBuffer`).
    pub h_object_buffer: u32,
    /// GPU VA of the ring (`gpFifoOffset`).
    pub gp_fifo_offset: u64,
    pub gp_fifo_entries: u32,
    pub flags: u32,
    pub h_context_share: u32,
    pub h_va_space: u32,
    /// USERD memory of subdevice 0 (`hUserdMemory[0]`).
    pub h_userd_memory: u32,
    /// Byte offset of USERD in that memory (`userdOffset[0]`).
    pub userd_offset: u64,
    pub engine_type: u32,
    pub tpc_config_id: u32,
}

/// NV_ESC_RM_MAP_MEMORY_DMA parameters, family-neutral (`flags2`/`kind_override` exist from 580).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct MapMemoryDmaParams {
    pub h_client: u32,
    pub h_device: u32,
    /// The NV01_MEMORY_VIRTUAL (or vaspace) object to map into.
    pub h_dma: u32,
    pub h_memory: u32,
    pub offset: u64,
    pub length: u64,
    pub flags: u32,
    pub flags2: u32,
    pub kind_override: u32,
    /// In: the fixed GPU VA (with DMA_OFFSET_FIXED); out: where it was mapped.
    pub dma_offset: u64,
}

/// What NV0000_CTRL_CMD_SYSTEM_GET_BUILD_VERSION_V2 returns.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct BuildVersion {
    pub driver_version: String,
    pub version: String,
    pub driver_branch: String,
    pub title: String,
    pub changelist: u32,
    pub official_changelist: u32,
}

/// A NUL-terminated C string in a byte array.
pub(crate) fn c_str(bytes: &[u8]) -> String {
    let end = bytes.iter().position(|&b| b == 0).unwrap_or(bytes.len());
    String::from_utf8_lossy(&bytes[..end]).into_owned()
}

fn c_chars(chars: &[std::ffi::c_char]) -> String {
    let bytes: Vec<u8> = chars.iter().map(|&c| c as u8).collect();
    c_str(&bytes)
}

/// The bytes of a generated struct.
fn to_vec<T: IoctlArg>(v: &T) -> Vec<u8> {
    arg_bytes(v).to_vec()
}

/// The override knob: `NV_DRIVER_FAMILY=595` takes that family's layouts whatever the version.
pub const FAMILY_KNOB: &str = "NV_DRIVER_FAMILY";

impl DriverFamily {
    /// Every supported family, oldest first.
    pub const ALL: [DriverFamily; 5] = [
        DriverFamily::V570,
        DriverFamily::V575,
        DriverFamily::V580,
        DriverFamily::V590,
        DriverFamily::V595,
    ];

    /// The newest supported family (what the override suggests for a newer driver).
    pub const NEWEST: DriverFamily = DriverFamily::V595;

    /// The major version: 570, 575, 580, 590, 595.
    pub fn major(self) -> u32 {
        match self {
            DriverFamily::V570 => 570,
            DriverFamily::V575 => 575,
            DriverFamily::V580 => 580,
            DriverFamily::V590 => 590,
            DriverFamily::V595 => 595,
        }
    }

    /// `"570"`, ..., `"595"`.
    pub fn name(self) -> String {
        self.major().to_string()
    }

    /// The generated module of the RM structs (570 and 575 share 570's; 580+ 580's).
    fn rm(self) -> RmLayout {
        match self {
            DriverFamily::V570 | DriverFamily::V575 => RmLayout::V570,
            _ => RmLayout::V580,
        }
    }

    /// Whether UVM_FREE / UVM_UNREGISTER_CHANNEL take 590's shrunken layouts (`v590`).
    fn uvm_v590(self) -> bool {
        self >= DriverFamily::V590
    }

    fn supported() -> String {
        let v: Vec<String> = Self::ALL
            .iter()
            .map(|f| format!("{}.x", f.major()))
            .collect();
        v.join(", ")
    }

    /// The family named `name` (`595`, or a version whose major names one: `595.45.04`).
    pub fn from_name(name: &str) -> Option<DriverFamily> {
        let major = name.trim().split('.').next()?.parse::<u32>().ok()?;
        Self::ALL.iter().copied().find(|f| f.major() == major)
    }

    /// The family of a driver version string (`580.142`, `570.86.16`); an unknown family is an
    /// error naming the version, the supported families and the `NV_DRIVER_FAMILY` override.
    pub fn from_version(version: &str) -> Result<DriverFamily> {
        let v = version.trim();
        let major = v.split('.').next().and_then(|m| m.parse::<u32>().ok());
        let Some(major) = major else {
            bail!(
                Device,
                "NVIDIA driver version {v:?} is not a version number (supported families: {})",
                Self::supported()
            );
        };
        match Self::ALL.iter().find(|f| f.major() == major) {
            Some(f) => Ok(*f),
            None => {
                let newer = if major > Self::NEWEST.major() {
                    format!(
                        "; {FAMILY_KNOB}={} tries the newest known layouts on this newer driver (a wrong guess shows as RM refusing controls with NV_ERR_INVALID_PARAM_STRUCT)",
                        Self::NEWEST.major()
                    )
                } else {
                    format!("; {FAMILY_KNOB}=<family> forces one")
                };
                bail!(
                    Device,
                    "NVIDIA driver {v} is not supported: rawgrad knows the RM/UVM struct layouts of driver families {} only{newer}",
                    Self::supported()
                )
            }
        }
    }

    /// The `NV_DRIVER_FAMILY` override, if set (an unknown value is an error naming the choices).
    pub fn from_knob() -> Result<Option<DriverFamily>> {
        let Some(v) = getenv_str(FAMILY_KNOB).filter(|v| !v.trim().is_empty()) else {
            return Ok(None);
        };
        match Self::from_name(&v) {
            Some(f) => Ok(Some(f)),
            None => bail!(
                InvalidArgument,
                "{FAMILY_KNOB}={v:?}: not a known driver family (choose one of {})",
                Self::supported()
            ),
        }
    }

    /// The version in `/proc/driver/nvidia/version` text (`NVRM version: NVIDIA UNIX Open Kernel
    /// Module for x86_64  580.142  Release Build ...`).
    pub fn parse_proc_version(text: &str) -> Option<String> {
        let line = text.lines().find(|l| l.starts_with("NVRM version:"))?;
        line.split_whitespace()
            .find(|w| {
                w.contains('.')
                    && w.split('.')
                        .all(|p| !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit()))
            })
            .map(str::to_string)
    }

    /// The running driver's version and family: CHECK_VERSION_STR (QUERY) on the control fd,
    /// else `/proc/driver/nvidia/version`; the family is `NV_DRIVER_FAMILY`'s when that is set.
    pub fn detect(drv: &dyn Driver, ctl: Fd) -> Result<(DriverFamily, String)> {
        let forced = Self::from_knob()?;
        let version = match super::ctl::check_version_str(drv, ctl) {
            Ok(v) if !v.is_empty() => v,
            query => {
                let text = drv.read_file("/proc/driver/nvidia/version").map_err(|e| {
                    Error::Device(format!(
                        "cannot tell the NVIDIA driver version: CHECK_VERSION_STR gave {query:?} and {e}"
                    ))
                })?;
                Self::parse_proc_version(&text).ok_or_else(|| {
                    Error::Device(format!(
                        "cannot tell the NVIDIA driver version: no version in /proc/driver/nvidia/version ({:?})",
                        text.lines().next().unwrap_or("")
                    ))
                })?
            }
        };
        match forced {
            Some(f) => Ok((f, version)),
            None => Ok((Self::from_version(&version)?, version)),
        }
    }

    /// The sizes of this family's family-dependent structs.
    pub fn sizes(self) -> FamilySizes {
        use std::mem::size_of;
        macro_rules! sizes {
            ($m:ident) => {
                FamilySizes {
                    nvos46: size_of::<$m::NVOS46_PARAMETERS>(),
                    vaspace_params: size_of::<$m::NV_VASPACE_ALLOCATION_PARAMETERS>(),
                    gpfifo_schedule_params: size_of::<$m::NVA06C_CTRL_GPFIFO_SCHEDULE_PARAMS>(),
                    classlist_v2_params: size_of::<$m::NV0080_CTRL_GPU_GET_CLASSLIST_V2_PARAMS>(),
                    channel_alloc_params: size_of::<$m::NV_CHANNEL_ALLOC_PARAMS>(),
                    root_client_params: size_of::<$m::NV0000_ALLOC_PARAMETERS>(),
                    build_version_v2_params: size_of::<
                        $m::NV0000_CTRL_SYSTEM_GET_BUILD_VERSION_V2_PARAMS,
                    >(),
                    uvm_free_params: size_of::<$m::UVM_FREE_PARAMS>(),
                    uvm_unregister_channel_params: size_of::<$m::UVM_UNREGISTER_CHANNEL_PARAMS>(),
                }
            };
        }
        let mut s = match self.rm() {
            RmLayout::V570 => sizes!(v570),
            RmLayout::V580 => sizes!(v580),
        };
        s.gpfifo_schedule_params = self.gpfifo_schedule_params(false, false).len();
        if self.uvm_v590() {
            s.uvm_free_params = size_of::<v590::UVM_FREE_PARAMS>();
            s.uvm_unregister_channel_params = size_of::<v590::UVM_UNREGISTER_CHANNEL_PARAMS>();
        }
        s
    }

    /// FERMI_VASPACE_A parameters in this family's layout.
    pub fn vaspace_params(self, p: &VaSpaceParams) -> Result<Vec<u8>> {
        macro_rules! build {
            ($m:ident $(, $extra:ident: $v:expr)?) => {
                to_vec(&$m::NV_VASPACE_ALLOCATION_PARAMETERS {
                    index: p.index,
                    flags: p.flags,
                    vaSize: p.va_size,
                    vaStartInternal: p.va_start_internal,
                    vaLimitInternal: p.va_limit_internal,
                    bigPageSize: p.big_page_size,
                    vaBase: p.va_base,
                    $($extra: $v,)?
                    ..Default::default()
                })
            };
        }
        match self.rm() {
            RmLayout::V570 if p.pasid != 0 => bail!(
                InvalidArgument,
                "FERMI_VASPACE_A: pasid {:#x} needs the 580 layout (driver family {self} has no pasid)",
                p.pasid
            ),
            RmLayout::V570 => Ok(build!(v570)),
            RmLayout::V580 => Ok(build!(v580, pasid: p.pasid)),
        }
    }

    /// Channel allocation parameters in this family's layout.
    pub fn channel_params(self, p: &ChannelParams) -> Vec<u8> {
        macro_rules! build {
            ($m:ident) => {{
                let mut c = $m::NV_CHANNEL_ALLOC_PARAMS {
                    hObjectError: p.h_object_error,
                    hObjectBuffer: p.h_object_buffer,
                    gpFifoOffset: p.gp_fifo_offset,
                    gpFifoEntries: p.gp_fifo_entries,
                    flags: p.flags,
                    hContextShare: p.h_context_share,
                    hVASpace: p.h_va_space,
                    engineType: p.engine_type,
                    tpcConfigID: p.tpc_config_id,
                    ..Default::default()
                };
                c.hUserdMemory[0] = p.h_userd_memory;
                c.userdOffset[0] = p.userd_offset;
                to_vec(&c)
            }};
        }
        match self.rm() {
            RmLayout::V570 => build!(v570),
            RmLayout::V580 => build!(v580),
        }
    }

    /// GPFIFO_SCHEDULE parameters (2 bytes in 570, 3 from 575 on: `bSkipEnable` appended).
    pub fn gpfifo_schedule_params(self, enable: bool, skip_submit: bool) -> Vec<u8> {
        match self {
            DriverFamily::V570 => to_vec(&v570::NVA06C_CTRL_GPFIFO_SCHEDULE_PARAMS {
                bEnable: enable.into(),
                bSkipSubmit: skip_submit.into(),
            }),
            _ => to_vec(&v580::NVA06C_CTRL_GPFIFO_SCHEDULE_PARAMS {
                bEnable: enable.into(),
                bSkipSubmit: skip_submit.into(),
                bSkipEnable: 0,
            }),
        }
    }

    /// NVOS46 in this family's layout (580 adds `flags2` and `kindOverride` before `dmaOffset`).
    pub fn nvos46(self, p: &MapMemoryDmaParams) -> Result<Vec<u8>> {
        macro_rules! build {
            ($m:ident $(, $f:ident: $v:expr)*) => {
                to_vec(&$m::NVOS46_PARAMETERS {
                    hClient: p.h_client,
                    hDevice: p.h_device,
                    hDma: p.h_dma,
                    hMemory: p.h_memory,
                    offset: p.offset,
                    length: p.length,
                    flags: p.flags,
                    dmaOffset: p.dma_offset,
                    $($f: $v,)*
                    ..Default::default()
                })
            };
        }
        match self.rm() {
            RmLayout::V570 if p.flags2 != 0 || p.kind_override != 0 => bail!(
                InvalidArgument,
                "NVOS46: flags2/kindOverride need the 580 layout (driver family {self} lacks them)"
            ),
            RmLayout::V570 => Ok(build!(v570)),
            RmLayout::V580 => Ok(build!(v580, flags2: p.flags2, kindOverride: p.kind_override)),
        }
    }

    /// `(dmaOffset, status)` of an NVOS46 in this family's layout.
    pub fn nvos46_result(self, bytes: &[u8]) -> Result<(u64, u32)> {
        let bad = || Error::Internal(format!("NVOS46: {} bytes", bytes.len()));
        match self.rm() {
            RmLayout::V570 => arg_from_bytes::<v570::NVOS46_PARAMETERS>(bytes)
                .map(|p| (p.dmaOffset, p.status))
                .ok_or_else(bad),
            RmLayout::V580 => arg_from_bytes::<v580::NVOS46_PARAMETERS>(bytes)
                .map(|p| (p.dmaOffset, p.status))
                .ok_or_else(bad),
        }
    }

    /// NV01_ROOT_CLIENT parameters (`hClient` 0 lets RM choose the handle).
    pub fn root_client_params(self, h_client: u32, process_id: u32, name: &str) -> Vec<u8> {
        macro_rules! build {
            ($m:ident) => {{
                let mut p = $m::NV0000_ALLOC_PARAMETERS {
                    hClient: h_client,
                    processID: process_id,
                    ..Default::default()
                };
                let n = name.len().min(p.szProcessName.len() - 1);
                for (d, s) in p.szProcessName.iter_mut().zip(&name.as_bytes()[..n]) {
                    *d = *s as std::ffi::c_char;
                }
                to_vec(&p)
            }};
        }
        match self.rm() {
            RmLayout::V570 => build!(v570),
            RmLayout::V580 => build!(v580),
        }
    }

    /// Decode NV0000_CTRL_CMD_SYSTEM_GET_BUILD_VERSION_V2's result.
    pub fn build_version(self, bytes: &[u8]) -> Result<BuildVersion> {
        macro_rules! decode {
            ($m:ident) => {{
                let p = arg_from_bytes::<$m::NV0000_CTRL_SYSTEM_GET_BUILD_VERSION_V2_PARAMS>(bytes)
                    .ok_or_else(|| {
                        Error::Internal(format!("BUILD_VERSION_V2: {} bytes", bytes.len()))
                    })?;
                BuildVersion {
                    driver_version: c_chars(&p.driverVersionBuffer),
                    version: c_chars(&p.versionBuffer),
                    driver_branch: c_chars(&p.driverBranch),
                    title: c_chars(&p.titleBuffer),
                    changelist: p.changelistNumber,
                    official_changelist: p.officialChangelistNumber,
                }
            }};
        }
        Ok(match self.rm() {
            RmLayout::V570 => decode!(v570),
            RmLayout::V580 => decode!(v580),
        })
    }

    /// Decode GET_CLASSLIST_V2's result: the first `numClasses` entries of the fixed array.
    pub fn classlist_v2(self, bytes: &[u8]) -> Result<Vec<u32>> {
        macro_rules! decode {
            ($m:ident) => {{
                let p = arg_from_bytes::<$m::NV0080_CTRL_GPU_GET_CLASSLIST_V2_PARAMS>(bytes)
                    .ok_or_else(|| {
                        Error::Internal(format!("CLASSLIST_V2: {} bytes", bytes.len()))
                    })?;
                let n = (p.numClasses as usize).min(p.classList.len());
                p.classList[..n].to_vec()
            }};
        }
        Ok(match self.rm() {
            RmLayout::V570 => decode!(v570),
            RmLayout::V580 => decode!(v580),
        })
    }
}

/// A family-dependent UVM parameter struct as bytes, and where its `rmStatus` sits.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct UvmBytes {
    pub bytes: Vec<u8>,
    pub status_offset: usize,
}

impl UvmBytes {
    fn of<T: IoctlArg>(v: &T, status_offset: usize) -> UvmBytes {
        UvmBytes {
            bytes: to_vec(v),
            status_offset,
        }
    }

    /// The `rmStatus` the driver wrote.
    pub fn rm_status(&self) -> NV_STATUS {
        let o = self.status_offset;
        self.bytes
            .get(o..o + 4)
            .map_or(u32::MAX, |b| u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
    }
}

impl DriverFamily {
    /// UVM_FREE of the range at `base` (`length` its whole size; 590+ takes the base alone:
    /// uvm_ioctl.h `{base, length, rmStatus}` up to 580.142, `{base, rmStatus}` from 590.48.01).
    pub fn uvm_free_params(self, base: u64, length: u64) -> UvmBytes {
        use std::mem::offset_of;
        if self.uvm_v590() {
            let p = v590::UVM_FREE_PARAMS {
                base,
                ..Default::default()
            };
            return UvmBytes::of(&p, offset_of!(v590::UVM_FREE_PARAMS, rmStatus));
        }
        let p = v580::UVM_FREE_PARAMS {
            base,
            length,
            ..Default::default()
        };
        UvmBytes::of(&p, offset_of!(v580::UVM_FREE_PARAMS, rmStatus))
    }

    /// UVM_UNREGISTER_CHANNEL of `h_channel` (uvm_ioctl.h: `{gpuUuid, hClient, hChannel,
    /// rmStatus}` up to 580.142, `{hClient, hChannel, rmStatus}` from 590.48.01).
    pub fn uvm_unregister_channel_params(
        self,
        uuid: [u8; 16],
        h_client: u32,
        h_channel: u32,
    ) -> UvmBytes {
        use std::mem::offset_of;
        if self.uvm_v590() {
            let p = v590::UVM_UNREGISTER_CHANNEL_PARAMS {
                hClient: h_client,
                hChannel: h_channel,
                rmStatus: 0,
            };
            return UvmBytes::of(
                &p,
                offset_of!(v590::UVM_UNREGISTER_CHANNEL_PARAMS, rmStatus),
            );
        }
        let p = v580::UVM_UNREGISTER_CHANNEL_PARAMS {
            gpuUuid: v580::NvProcessorUuid { uuid },
            hClient: h_client,
            hChannel: h_channel,
            rmStatus: 0,
        };
        UvmBytes::of(
            &p,
            offset_of!(v580::UVM_UNREGISTER_CHANNEL_PARAMS, rmStatus),
        )
    }
}

impl std::fmt::Display for DriverFamily {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}.x", self.major())
    }
}
