//! The crate's one error type.
//!
//! Every fallible operation returns [`Result`]. The variant says which layer refused, the message
//! says what was wrong and where (the operation, the shapes or values at fault). Nothing a caller
//! can reach through the public API is supposed to panic; an internal invariant that breaks is
//! reported as [`Error::Internal`] so that it surfaces as a value, not an abort.
//!
//! Not guaranteed: message texts are for people and may change; match on the variant.

#![forbid(unsafe_code)]

use std::fmt;

/// What went wrong, by layer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Error {
    /// A caller passed something the operation cannot take (bad shape, axis, dtype, value).
    InvalidArgument(String),
    /// Symbolic or ShapeTracker algebra refused (impossible reshape, non-int where an int is needed).
    Shape(String),
    /// The scheduler could not order or group the graph (cycle, unsupported assign).
    Schedule(String),
    /// An optimization action was illegal for this kernel (the reason strings follow tinygrad's
    /// `KernelOptError`); the optimizer and BEAM use it as control flow.
    KernelOpt(String),
    /// Kernel construction, linearization, UOp verification or rendering failed.
    Codegen(String),
    /// A device compiler (cc, clang, libLLVM, ptxas ...) failed or is missing.
    Compile(String),
    /// A device could not be opened, or refused an allocation or a transfer.
    Device(String),
    /// A kernel or copy failed while running.
    Runtime(String),
    /// A wait on the device passed its deadline; the message carries the queue state.
    Timeout(String),
    /// The device (real or emulated) reported a fault; the message carries the queue state.
    Fault(String),
    /// A driver call (ioctl, mmap, open) failed.
    Driver(String),
    /// A driver call failed with an OS error number (from the kernel, or mimicked by the emulated
    /// driver); the message names the call, the errno and the values at fault. Callers branch on
    /// the number (tinygrad maps ENOMEM to "out of memory", EINVAL on public VRAM to "no large BAR").
    Errno(i32, String),
    /// The NVIDIA resource manager (RM) or UVM refused a call with an `NV_STATUS` code (the ioctl
    /// itself succeeded); the message names the call, the class or control and the status by name,
    /// e.g. `NV_ERR_INVALID_PARAM_STRUCT (0x3a)`. Callers branch on the code (a perf boost refused
    /// in a VM, `NV_WARN_NOTHING_TO_DO` from UVM_MM_INITIALIZE).
    NvStatus(u32, String),
    /// File system or process errors.
    Io(String),
    /// A broken internal invariant: a bug in rawgrad, reported instead of panicking.
    Internal(String),
}

/// `std::result::Result` with [`Error`].
pub type Result<T> = std::result::Result<T, Error>;

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (kind, msg) = match self {
            Error::InvalidArgument(m) => ("invalid argument", m),
            Error::Shape(m) => ("shape", m),
            Error::Schedule(m) => ("schedule", m),
            Error::KernelOpt(m) => ("kernel opt", m),
            Error::Codegen(m) => ("codegen", m),
            Error::Compile(m) => ("compile", m),
            Error::Device(m) => ("device", m),
            Error::Runtime(m) => ("runtime", m),
            Error::Timeout(m) => ("timeout", m),
            Error::Fault(m) => ("fault", m),
            Error::Driver(m) => ("driver", m),
            Error::Errno(_, m) => ("driver", m),
            Error::NvStatus(_, m) => ("driver", m),
            Error::Io(m) => ("io", m),
            Error::Internal(m) => ("internal", m),
        };
        write!(f, "{kind}: {msg}")
    }
}

impl std::error::Error for Error {}

impl From<std::io::Error> for Error {
    fn from(e: std::io::Error) -> Self {
        Error::Io(e.to_string())
    }
}

impl Error {
    /// The OS error number of an [`Error::Errno`] (`None` for every other variant).
    pub fn errno(&self) -> Option<i32> {
        match self {
            Error::Errno(e, _) => Some(*e),
            _ => None,
        }
    }

    /// The `NV_STATUS` code of an [`Error::NvStatus`] (`None` for every other variant).
    pub fn nv_status(&self) -> Option<u32> {
        match self {
            Error::NvStatus(s, _) => Some(*s),
            _ => None,
        }
    }

    /// The same error (variant, errno, status) with `prefix: ` in front of its message.
    pub fn with_context(self, prefix: &str) -> Error {
        let p = |m: String| format!("{prefix}: {m}");
        match self {
            Error::InvalidArgument(m) => Error::InvalidArgument(p(m)),
            Error::Shape(m) => Error::Shape(p(m)),
            Error::Schedule(m) => Error::Schedule(p(m)),
            Error::KernelOpt(m) => Error::KernelOpt(p(m)),
            Error::Codegen(m) => Error::Codegen(p(m)),
            Error::Compile(m) => Error::Compile(p(m)),
            Error::Device(m) => Error::Device(p(m)),
            Error::Runtime(m) => Error::Runtime(p(m)),
            Error::Timeout(m) => Error::Timeout(p(m)),
            Error::Fault(m) => Error::Fault(p(m)),
            Error::Driver(m) => Error::Driver(p(m)),
            Error::Errno(e, m) => Error::Errno(e, p(m)),
            Error::NvStatus(s, m) => Error::NvStatus(s, p(m)),
            Error::Io(m) => Error::Io(p(m)),
            Error::Internal(m) => Error::Internal(p(m)),
        }
    }

    /// The message without the layer prefix.
    pub fn message(&self) -> &str {
        match self {
            Error::InvalidArgument(m)
            | Error::Shape(m)
            | Error::Schedule(m)
            | Error::KernelOpt(m)
            | Error::Codegen(m)
            | Error::Compile(m)
            | Error::Device(m)
            | Error::Runtime(m)
            | Error::Timeout(m)
            | Error::Fault(m)
            | Error::Driver(m)
            | Error::Errno(_, m)
            | Error::NvStatus(_, m)
            | Error::Io(m)
            | Error::Internal(m) => m,
        }
    }
}

/// Return early with an [`Error`] variant built from a format string:
/// `bail!(InvalidArgument, "reshape: {} elements into {:?}", n, shape)`.
#[macro_export]
macro_rules! bail {
    ($kind:ident, $($arg:tt)*) => {
        return Err($crate::Error::$kind(format!($($arg)*)))
    };
}

/// Like `assert!`, but returns an [`Error`] of the given variant instead of panicking.
#[macro_export]
macro_rules! ensure {
    ($cond:expr, $kind:ident, $($arg:tt)*) => {
        if !$cond {
            return Err($crate::Error::$kind(format!($($arg)*)));
        }
    };
}
