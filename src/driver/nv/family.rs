//! [`DriverFamily`]: which struct layouts the running NVIDIA driver takes, chosen at run time
//! from its version string, and family-neutral builders for the structs whose layout differs
//! between families (memo 1.4): NVOS46, the FERMI_VASPACE_A and channel allocation parameters,
//! GPFIFO_SCHEDULE, GET_CLASSLIST_V2, the root-client parameters and GET_BUILD_VERSION_V2.
//!
//! Detection: `NV_ESC_CHECK_VERSION_STR` in QUERY mode on the control fd (stateless, the same
//! 72-byte struct in every family), falling back to `/proc/driver/nvidia/version`. A version
//! outside the known families is refused with an error naming it and the supported families,
//! because guessing layouts makes RM read garbage (allocations) or refuse with 0x3A (controls).
//!
//! Not guaranteed: a family covers one major version (570.x, 580.x); minor releases are assumed
//! to keep the layouts, which held for the tags the memo measured.

use crate::driver::api::{arg_bytes, arg_from_bytes, Driver, Fd, IoctlArg};
use crate::sys::nv::{v570, v580};
use crate::{bail, Error, Result};

/// A supported NVIDIA driver family (one major version; its RM struct layouts).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum DriverFamily {
    /// 570.x (layouts of 570.86.16).
    V570,
    /// 580.x (layouts of 580.142): NVOS46 64, vaspace 56, GPFIFO_SCHEDULE 3, CLASSLIST_V2 804.
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

impl DriverFamily {
    /// Every supported family, oldest first.
    pub const ALL: [DriverFamily; 2] = [DriverFamily::V570, DriverFamily::V580];

    /// The major version: 570, 580.
    pub fn major(self) -> u32 {
        match self {
            DriverFamily::V570 => 570,
            DriverFamily::V580 => 580,
        }
    }

    /// `"570"`, `"580"`.
    pub fn name(self) -> String {
        self.major().to_string()
    }

    /// The family of a driver version string (`580.142`, `570.86.16`); an unknown family is an
    /// error naming the version and the supported families.
    pub fn from_version(version: &str) -> Result<DriverFamily> {
        let v = version.trim();
        let major = v.split('.').next().and_then(|m| m.parse::<u32>().ok());
        let supported: Vec<String> = Self::ALL
            .iter()
            .map(|f| format!("{}.x", f.major()))
            .collect();
        let Some(major) = major else {
            bail!(
                Device,
                "NVIDIA driver version {v:?} is not a version number (supported families: {})",
                supported.join(", ")
            );
        };
        match Self::ALL.iter().find(|f| f.major() == major) {
            Some(f) => Ok(*f),
            None => bail!(
                Device,
                "NVIDIA driver {v} is not supported: rawgrad knows the RM struct layouts of driver families {} only",
                supported.join(", ")
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
    /// else `/proc/driver/nvidia/version`.
    pub fn detect(drv: &dyn Driver, ctl: Fd) -> Result<(DriverFamily, String)> {
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
        Ok((Self::from_version(&version)?, version))
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
                }
            };
        }
        match self {
            DriverFamily::V570 => sizes!(v570),
            DriverFamily::V580 => sizes!(v580),
        }
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
        match self {
            DriverFamily::V570 if p.pasid != 0 => bail!(
                InvalidArgument,
                "FERMI_VASPACE_A: pasid {:#x} needs the 580 layout (driver family 570 has no pasid)",
                p.pasid
            ),
            DriverFamily::V570 => Ok(build!(v570)),
            DriverFamily::V580 => Ok(build!(v580, pasid: p.pasid)),
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
        match self {
            DriverFamily::V570 => build!(v570),
            DriverFamily::V580 => build!(v580),
        }
    }

    /// GPFIFO_SCHEDULE parameters (2 bytes before 580, 3 from 580: `bSkipEnable` appended).
    pub fn gpfifo_schedule_params(self, enable: bool, skip_submit: bool) -> Vec<u8> {
        match self {
            DriverFamily::V570 => to_vec(&v570::NVA06C_CTRL_GPFIFO_SCHEDULE_PARAMS {
                bEnable: enable.into(),
                bSkipSubmit: skip_submit.into(),
            }),
            DriverFamily::V580 => to_vec(&v580::NVA06C_CTRL_GPFIFO_SCHEDULE_PARAMS {
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
        match self {
            DriverFamily::V570 if p.flags2 != 0 || p.kind_override != 0 => bail!(
                InvalidArgument,
                "NVOS46: flags2/kindOverride need the 580 layout (driver family 570 lacks them)"
            ),
            DriverFamily::V570 => Ok(build!(v570)),
            DriverFamily::V580 => Ok(build!(v580, flags2: p.flags2, kindOverride: p.kind_override)),
        }
    }

    /// `(dmaOffset, status)` of an NVOS46 in this family's layout.
    pub fn nvos46_result(self, bytes: &[u8]) -> Result<(u64, u32)> {
        let bad = || Error::Internal(format!("NVOS46: {} bytes", bytes.len()));
        match self {
            DriverFamily::V570 => arg_from_bytes::<v570::NVOS46_PARAMETERS>(bytes)
                .map(|p| (p.dmaOffset, p.status))
                .ok_or_else(bad),
            DriverFamily::V580 => arg_from_bytes::<v580::NVOS46_PARAMETERS>(bytes)
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
        match self {
            DriverFamily::V570 => build!(v570),
            DriverFamily::V580 => build!(v580),
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
        Ok(match self {
            DriverFamily::V570 => decode!(v570),
            DriverFamily::V580 => decode!(v580),
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
        Ok(match self {
            DriverFamily::V570 => decode!(v570),
            DriverFamily::V580 => decode!(v580),
        })
    }
}

impl std::fmt::Display for DriverFamily {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}.x", self.major())
    }
}
