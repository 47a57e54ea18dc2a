//! `NV_STATUS` codes by name, so a refusal reads `NV_ERR_INVALID_PARAM_STRUCT (0x3a)` and not a
//! bare number, and the [`Error::NvStatus`] errors that carry them.
//!
//! The table lists every code of the generated `sys::nv::common` (the RM's error and warning
//! codes up to 0x8A, the UVM ones included).
//!
//! Not guaranteed: codes newer drivers add print as `unknown NV_STATUS`.

use crate::sys::nv::common::*;
use crate::Error;

macro_rules! status_table {
    ($($name:ident,)*) => {
        /// Every known status code with its name.
        pub const NV_STATUS_NAMES: &[(u32, &str)] = &[$(($name, stringify!($name))),*];
    };
}

status_table! {
    NV_OK,
    NV_ERR_GENERIC,
    NV_ERR_BROKEN_FB,
    NV_ERR_BUFFER_TOO_SMALL,
    NV_ERR_BUSY_RETRY,
    NV_ERR_CALLBACK_NOT_SCHEDULED,
    NV_ERR_CARD_NOT_PRESENT,
    NV_ERR_CYCLE_DETECTED,
    NV_ERR_DMA_IN_USE,
    NV_ERR_DMA_MEM_NOT_LOCKED,
    NV_ERR_DMA_MEM_NOT_UNLOCKED,
    NV_ERR_DUAL_LINK_INUSE,
    NV_ERR_ECC_ERROR,
    NV_ERR_FIFO_BAD_ACCESS,
    NV_ERR_FREQ_NOT_SUPPORTED,
    NV_ERR_GPU_DMA_NOT_INITIALIZED,
    NV_ERR_GPU_IS_LOST,
    NV_ERR_GPU_IN_FULLCHIP_RESET,
    NV_ERR_GPU_NOT_FULL_POWER,
    NV_ERR_GPU_UUID_NOT_FOUND,
    NV_ERR_HOT_SWITCH,
    NV_ERR_I2C_ERROR,
    NV_ERR_I2C_SPEED_TOO_HIGH,
    NV_ERR_ILLEGAL_ACTION,
    NV_ERR_IN_USE,
    NV_ERR_INFLATE_COMPRESSED_DATA_FAILED,
    NV_ERR_INSERT_DUPLICATE_NAME,
    NV_ERR_INSUFFICIENT_RESOURCES,
    NV_ERR_INSUFFICIENT_PERMISSIONS,
    NV_ERR_INSUFFICIENT_POWER,
    NV_ERR_INVALID_ACCESS_TYPE,
    NV_ERR_INVALID_ADDRESS,
    NV_ERR_INVALID_ARGUMENT,
    NV_ERR_INVALID_BASE,
    NV_ERR_INVALID_CHANNEL,
    NV_ERR_INVALID_CLASS,
    NV_ERR_INVALID_CLIENT,
    NV_ERR_INVALID_COMMAND,
    NV_ERR_INVALID_DATA,
    NV_ERR_INVALID_DEVICE,
    NV_ERR_INVALID_DMA_SPECIFIER,
    NV_ERR_INVALID_EVENT,
    NV_ERR_INVALID_FLAGS,
    NV_ERR_INVALID_FUNCTION,
    NV_ERR_INVALID_HEAP,
    NV_ERR_INVALID_INDEX,
    NV_ERR_INVALID_IRQ_LEVEL,
    NV_ERR_INVALID_LIMIT,
    NV_ERR_INVALID_LOCK_STATE,
    NV_ERR_INVALID_METHOD,
    NV_ERR_INVALID_OBJECT,
    NV_ERR_INVALID_OBJECT_BUFFER,
    NV_ERR_INVALID_OBJECT_HANDLE,
    NV_ERR_INVALID_OBJECT_NEW,
    NV_ERR_INVALID_OBJECT_OLD,
    NV_ERR_INVALID_OBJECT_PARENT,
    NV_ERR_INVALID_OFFSET,
    NV_ERR_INVALID_OPERATION,
    NV_ERR_INVALID_OWNER,
    NV_ERR_INVALID_PARAM_STRUCT,
    NV_ERR_INVALID_PARAMETER,
    NV_ERR_INVALID_PATH,
    NV_ERR_INVALID_POINTER,
    NV_ERR_INVALID_REGISTRY_KEY,
    NV_ERR_INVALID_REQUEST,
    NV_ERR_INVALID_STATE,
    NV_ERR_INVALID_STRING_LENGTH,
    NV_ERR_INVALID_READ,
    NV_ERR_INVALID_WRITE,
    NV_ERR_INVALID_XLATE,
    NV_ERR_IRQ_NOT_FIRING,
    NV_ERR_IRQ_EDGE_TRIGGERED,
    NV_ERR_MEMORY_TRAINING_FAILED,
    NV_ERR_MISMATCHED_SLAVE,
    NV_ERR_MISMATCHED_TARGET,
    NV_ERR_MISSING_TABLE_ENTRY,
    NV_ERR_MODULE_LOAD_FAILED,
    NV_ERR_MORE_DATA_AVAILABLE,
    NV_ERR_MORE_PROCESSING_REQUIRED,
    NV_ERR_MULTIPLE_MEMORY_TYPES,
    NV_ERR_NO_FREE_FIFOS,
    NV_ERR_NO_INTR_PENDING,
    NV_ERR_NO_MEMORY,
    NV_ERR_NO_SUCH_DOMAIN,
    NV_ERR_NO_VALID_PATH,
    NV_ERR_NOT_COMPATIBLE,
    NV_ERR_NOT_READY,
    NV_ERR_NOT_SUPPORTED,
    NV_ERR_OBJECT_NOT_FOUND,
    NV_ERR_OBJECT_TYPE_MISMATCH,
    NV_ERR_OPERATING_SYSTEM,
    NV_ERR_OTHER_DEVICE_FOUND,
    NV_ERR_OUT_OF_RANGE,
    NV_ERR_OVERLAPPING_UVM_COMMIT,
    NV_ERR_PAGE_TABLE_NOT_AVAIL,
    NV_ERR_PID_NOT_FOUND,
    NV_ERR_PROTECTION_FAULT,
    NV_ERR_RC_ERROR,
    NV_ERR_REJECTED_VBIOS,
    NV_ERR_RESET_REQUIRED,
    NV_ERR_STATE_IN_USE,
    NV_ERR_SIGNAL_PENDING,
    NV_ERR_TIMEOUT,
    NV_ERR_TIMEOUT_RETRY,
    NV_ERR_TOO_MANY_PRIMARIES,
    NV_ERR_UVM_ADDRESS_IN_USE,
    NV_ERR_MAX_SESSION_LIMIT_REACHED,
    NV_ERR_LIB_RM_VERSION_MISMATCH,
    NV_ERR_PRIV_SEC_VIOLATION,
    NV_ERR_GPU_IN_DEBUG_MODE,
    NV_ERR_FEATURE_NOT_ENABLED,
    NV_ERR_RESOURCE_LOST,
    NV_ERR_PMU_NOT_READY,
    NV_ERR_FLCN_ERROR,
    NV_ERR_FATAL_ERROR,
    NV_ERR_MEMORY_ERROR,
    NV_ERR_INVALID_LICENSE,
    NV_ERR_NVLINK_INIT_ERROR,
    NV_ERR_NVLINK_MINION_ERROR,
    NV_ERR_NVLINK_CLOCK_ERROR,
    NV_ERR_NVLINK_TRAINING_ERROR,
    NV_ERR_NVLINK_CONFIGURATION_ERROR,
    NV_ERR_RISCV_ERROR,
    NV_ERR_FABRIC_MANAGER_NOT_PRESENT,
    NV_ERR_ALREADY_SIGNALLED,
    NV_ERR_QUEUE_TASK_SLOT_NOT_AVAILABLE,
    NV_ERR_KEY_ROTATION_IN_PROGRESS,
    NV_ERR_TEST_ONLY_CODE_NOT_ENABLED,
    NV_ERR_SECURE_BOOT_FAILED,
    NV_ERR_INSUFFICIENT_ZBC_ENTRY,
    NV_ERR_NVLINK_FABRIC_NOT_READY,
    NV_ERR_NVLINK_FABRIC_FAILURE,
    NV_ERR_GPU_MEMORY_ONLINING_FAILURE,
    NV_ERR_REDUCTION_MANAGER_NOT_AVAILABLE,
    NV_ERR_THRESHOLD_CROSSED,
    NV_ERR_RESOURCE_RETIREMENT_ERROR,
    NV_ERR_FABRIC_STATE_OUT_OF_SYNC,
    NV_ERR_BUFFER_FULL,
    NV_ERR_BUFFER_EMPTY,
    NV_ERR_MC_FLA_OFFSET_TABLE_FULL,
    NV_WARN_HOT_SWITCH,
    NV_WARN_INCORRECT_PERFMON_DATA,
    NV_WARN_MISMATCHED_SLAVE,
    NV_WARN_MISMATCHED_TARGET,
    NV_WARN_MORE_PROCESSING_REQUIRED,
    NV_WARN_NOTHING_TO_DO,
    NV_WARN_NULL_OBJECT,
}

/// The name of a status code.
pub fn nv_status_name(status: u32) -> Option<&'static str> {
    NV_STATUS_NAMES
        .iter()
        .find(|(c, _)| *c == status)
        .map(|(_, n)| *n)
}

/// `NV_ERR_INVALID_PARAM_STRUCT (0x3a)`, or `unknown NV_STATUS (0x1234)`.
pub fn nv_status_str(status: u32) -> String {
    match nv_status_name(status) {
        Some(n) => format!("{n} ({status:#x})"),
        None => format!("unknown NV_STATUS ({status:#x})"),
    }
}

/// An [`Error::NvStatus`] for `status`: `"<what> failed: NV_ERR_... (0x..)"`, plus the
/// driver's explanation when it gave one.
pub fn nv_status_error(status: u32, what: &str, diagnostic: Option<String>) -> Error {
    let mut msg = format!("{what} failed: {}", nv_status_str(status));
    if let Some(d) = diagnostic {
        msg.push_str(": ");
        msg.push_str(&d);
    }
    Error::NvStatus(status, msg)
}

/// Whether a status is a warning (the call succeeded with a remark, e.g. NV_WARN_NOTHING_TO_DO).
pub fn nv_status_is_warning(status: u32) -> bool {
    status & 0xFFFF_0000 == 0x0001_0000
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_read_like_the_driver_headers() {
        assert_eq!(nv_status_str(0x3A), "NV_ERR_INVALID_PARAM_STRUCT (0x3a)");
        assert_eq!(nv_status_str(0x22), "NV_ERR_INVALID_CLASS (0x22)");
        assert_eq!(nv_status_str(0x56), "NV_ERR_NOT_SUPPORTED (0x56)");
        assert_eq!(nv_status_str(0x68), "NV_ERR_UVM_ADDRESS_IN_USE (0x68)");
        assert_eq!(nv_status_str(0x10006), "NV_WARN_NOTHING_TO_DO (0x10006)");
        assert_eq!(nv_status_str(0), "NV_OK (0x0)");
        assert_eq!(nv_status_str(0xDEAD), "unknown NV_STATUS (0xdead)");
        assert!(nv_status_is_warning(NV_WARN_NOTHING_TO_DO));
        assert!(!nv_status_is_warning(NV_ERR_INVALID_ARGUMENT));
        let e = nv_status_error(0x1F, "NV_ESC_RM_ALLOC(x)", Some("why".into()));
        assert_eq!(e.nv_status(), Some(0x1F));
        assert_eq!(
            e.message(),
            "NV_ESC_RM_ALLOC(x) failed: NV_ERR_INVALID_ARGUMENT (0x1f): why"
        );
    }

    #[test]
    fn codes_are_unique() {
        let mut codes: Vec<u32> = NV_STATUS_NAMES.iter().map(|(c, _)| *c).collect();
        codes.sort_unstable();
        codes.dedup();
        assert_eq!(codes.len(), NV_STATUS_NAMES.len());
        assert_eq!(NV_STATUS_NAMES.len(), 147);
    }
}
