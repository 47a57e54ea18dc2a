//! The CUDA driver API (`libcuda.so.1`), loaded at run time with `dlopen`: no link-time
//! dependency. This is what the `CUDA` fallback family runs on (the `NV` family talks to the
//! kernel driver directly and never loads it).
//!
//! [`CudaLib::load`] resolves the entry points (the `_v2` spellings where the header maps to
//! them) and runs `cuInit(0)`; [`CudaContext::open`] retains device `ordinal`'s primary context
//! (what the CUDA runtime uses; robust across the CUDA 12 -> 13 `cuCtxCreate` signature change)
//! and creates one non-blocking stream. Every call makes the context current on the calling
//! thread first, so a context may be used from any thread. Every failing call is an
//! `Error::Device` naming the function, its arguments and the `CUresult` by name
//! (`cuGetErrorName`).
//!
//! Waits poll `cuStreamQuery`/`cuEventQuery` (never the blocking `cu*Synchronize`) and give up
//! with `Error::Timeout` after the HCQ wait timeout (`HCQDEV_WAIT_TIMEOUT_MS`, see
//! [`crate::driver::deadline`]).
//!
//! Handles (device pointers, modules, functions, events) are plain `u64`s/pointers owned by the
//! caller (the CUDA fallback backend): freeing one twice is the caller's bug, reported by the
//! driver as an error, not undefined behaviour in Rust.
//!
//! Not guaranteed: the pinned staging buffers of [`CudaContext::copy_in_async`] are freed only at
//! the next [`CudaContext::synchronize`].

use std::ffi::{c_char, c_int, c_uint, c_void, CString};
use std::path::Path;
use std::sync::{Arc, Mutex, OnceLock};

use super::nvlib::{c_str, VendorLib};
use crate::{bail, Error, Result};

mod graph;
pub use graph::{CudaGraph, KernelNode, KernelNodeParams};

type CuResult = c_int;
type CuDevice = c_int;
type Ptr = *mut c_void;

/// CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR / MINOR.
const ATTR_CC_MAJOR: c_int = 75;
const ATTR_CC_MINOR: c_int = 76;
/// CU_STREAM_NON_BLOCKING.
const STREAM_NON_BLOCKING: c_uint = 1;
/// CU_LAUNCH_PARAM_BUFFER_POINTER, _SIZE, _END.
const LAUNCH_PARAM_BUFFER_POINTER: usize = 1;
const LAUNCH_PARAM_BUFFER_SIZE: usize = 2;
const LAUNCH_PARAM_END: usize = 0;

/// The entry points rawgrad calls (signatures of `cuda.h`, CUDA 11-13).
struct Api {
    init: unsafe extern "C" fn(c_uint) -> CuResult,
    driver_version: unsafe extern "C" fn(*mut c_int) -> CuResult,
    error_name: unsafe extern "C" fn(CuResult, *mut *const c_char) -> CuResult,
    device_count: unsafe extern "C" fn(*mut c_int) -> CuResult,
    device_get: unsafe extern "C" fn(*mut CuDevice, c_int) -> CuResult,
    device_name: unsafe extern "C" fn(*mut c_char, c_int, CuDevice) -> CuResult,
    device_attribute: unsafe extern "C" fn(*mut c_int, c_int, CuDevice) -> CuResult,
    primary_retain: unsafe extern "C" fn(*mut Ptr, CuDevice) -> CuResult,
    primary_release: unsafe extern "C" fn(CuDevice) -> CuResult,
    ctx_set_current: unsafe extern "C" fn(Ptr) -> CuResult,
    mem_alloc: unsafe extern "C" fn(*mut u64, usize) -> CuResult,
    mem_free: unsafe extern "C" fn(u64) -> CuResult,
    mem_alloc_host: unsafe extern "C" fn(*mut Ptr, usize) -> CuResult,
    mem_free_host: unsafe extern "C" fn(Ptr) -> CuResult,
    htod: unsafe extern "C" fn(u64, *const c_void, usize) -> CuResult,
    dtoh: unsafe extern "C" fn(Ptr, u64, usize) -> CuResult,
    dtod: unsafe extern "C" fn(u64, u64, usize) -> CuResult,
    htod_async: unsafe extern "C" fn(u64, *const c_void, usize, Ptr) -> CuResult,
    dtoh_async: unsafe extern "C" fn(Ptr, u64, usize, Ptr) -> CuResult,
    module_load_data: unsafe extern "C" fn(*mut Ptr, *const c_void) -> CuResult,
    module_unload: unsafe extern "C" fn(Ptr) -> CuResult,
    module_function: unsafe extern "C" fn(*mut Ptr, Ptr, *const c_char) -> CuResult,
    #[allow(clippy::type_complexity)]
    launch: unsafe extern "C" fn(
        Ptr,
        c_uint,
        c_uint,
        c_uint,
        c_uint,
        c_uint,
        c_uint,
        c_uint,
        Ptr,
        *mut Ptr,
        *mut Ptr,
    ) -> CuResult,
    stream_create: unsafe extern "C" fn(*mut Ptr, c_uint) -> CuResult,
    stream_query: unsafe extern "C" fn(Ptr) -> CuResult,
    event_create: unsafe extern "C" fn(*mut Ptr, c_uint) -> CuResult,
    event_record: unsafe extern "C" fn(Ptr, Ptr) -> CuResult,
    event_query: unsafe extern "C" fn(Ptr) -> CuResult,
    event_elapsed: unsafe extern "C" fn(*mut f32, Ptr, Ptr) -> CuResult,
    event_destroy: unsafe extern "C" fn(Ptr) -> CuResult,
}

/// The loaded and initialized CUDA driver library.
pub struct CudaLib {
    lib: VendorLib,
    api: Api,
    version: i32,
}

impl std::fmt::Debug for CudaLib {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "CudaLib({} from {})",
            self.version,
            self.lib.path().display()
        )
    }
}

/// The file names tried, in order (`CUDA_LIB` overrides).
fn candidates() -> Vec<String> {
    match crate::helpers::getenv_str("CUDA_LIB").filter(|s| !s.trim().is_empty()) {
        Some(p) => vec![p],
        None => vec!["libcuda.so.1".into(), "libcuda.so".into()],
    }
}

impl CudaLib {
    /// The process-wide driver library (loaded and `cuInit`ed once; the error is kept).
    pub fn load() -> Result<Arc<CudaLib>> {
        static LIB: OnceLock<std::result::Result<Arc<CudaLib>, String>> = OnceLock::new();
        LIB.get_or_init(|| CudaLib::open_first().map_err(|e| e.message().to_string()))
            .clone()
            .map_err(Error::Device)
    }

    fn open_first() -> Result<Arc<CudaLib>> {
        let mut why = vec![];
        for name in candidates() {
            match VendorLib::open(Path::new(&name), "libcuda") {
                Ok(lib) => return CudaLib::init(lib).map(Arc::new),
                Err(e) => why.push(e.message().to_string()),
            }
        }
        bail!(
            Device,
            "CUDA: the CUDA driver library is not available (install the NVIDIA driver, or set \
             CUDA_LIB to libcuda.so): {}",
            why.join("; ")
        )
    }

    fn init(lib: VendorLib) -> Result<CudaLib> {
        let d = |e: Error| Error::Device(format!("CUDA: {}", e.message()));
        // SAFETY: each type is the signature `cuda.h` declares for the named symbol (the `_v2`
        // names are what the header's macros select since CUDA 3.2/4.0).
        let api = unsafe {
            Api {
                init: lib.get(&["cuInit"]).map_err(d)?,
                driver_version: lib.get(&["cuDriverGetVersion"]).map_err(d)?,
                error_name: lib.get(&["cuGetErrorName"]).map_err(d)?,
                device_count: lib.get(&["cuDeviceGetCount"]).map_err(d)?,
                device_get: lib.get(&["cuDeviceGet"]).map_err(d)?,
                device_name: lib.get(&["cuDeviceGetName"]).map_err(d)?,
                device_attribute: lib.get(&["cuDeviceGetAttribute"]).map_err(d)?,
                primary_retain: lib.get(&["cuDevicePrimaryCtxRetain"]).map_err(d)?,
                primary_release: lib
                    .get(&["cuDevicePrimaryCtxRelease_v2", "cuDevicePrimaryCtxRelease"])
                    .map_err(d)?,
                ctx_set_current: lib.get(&["cuCtxSetCurrent"]).map_err(d)?,
                mem_alloc: lib.get(&["cuMemAlloc_v2"]).map_err(d)?,
                mem_free: lib.get(&["cuMemFree_v2"]).map_err(d)?,
                mem_alloc_host: lib.get(&["cuMemAllocHost_v2"]).map_err(d)?,
                mem_free_host: lib.get(&["cuMemFreeHost"]).map_err(d)?,
                htod: lib.get(&["cuMemcpyHtoD_v2"]).map_err(d)?,
                dtoh: lib.get(&["cuMemcpyDtoH_v2"]).map_err(d)?,
                dtod: lib.get(&["cuMemcpyDtoD_v2"]).map_err(d)?,
                htod_async: lib.get(&["cuMemcpyHtoDAsync_v2"]).map_err(d)?,
                dtoh_async: lib.get(&["cuMemcpyDtoHAsync_v2"]).map_err(d)?,
                module_load_data: lib.get(&["cuModuleLoadData"]).map_err(d)?,
                module_unload: lib.get(&["cuModuleUnload"]).map_err(d)?,
                module_function: lib.get(&["cuModuleGetFunction"]).map_err(d)?,
                launch: lib.get(&["cuLaunchKernel"]).map_err(d)?,
                stream_create: lib.get(&["cuStreamCreate"]).map_err(d)?,
                stream_query: lib.get(&["cuStreamQuery"]).map_err(d)?,
                event_create: lib.get(&["cuEventCreate"]).map_err(d)?,
                event_record: lib.get(&["cuEventRecord"]).map_err(d)?,
                event_query: lib.get(&["cuEventQuery"]).map_err(d)?,
                event_elapsed: lib
                    .get(&["cuEventElapsedTime_v2", "cuEventElapsedTime"])
                    .map_err(d)?,
                event_destroy: lib
                    .get(&["cuEventDestroy_v2", "cuEventDestroy"])
                    .map_err(d)?,
            }
        };
        let mut l = CudaLib {
            lib,
            api,
            version: 0,
        };
        // SAFETY: cuInit takes flags 0; cuDriverGetVersion writes one int.
        let rc = unsafe { (l.api.init)(0) };
        l.check(rc, "cuInit(0)")?;
        let mut v = 0;
        // SAFETY: as above.
        let rc = unsafe { (l.api.driver_version)(&mut v) };
        l.check(rc, "cuDriverGetVersion")?;
        l.version = v;
        Ok(l)
    }

    /// The driver's CUDA version (12040 for 12.4).
    pub fn version(&self) -> i32 {
        self.version
    }

    /// A `CUresult` by name (`CUDA_ERROR_OUT_OF_MEMORY (2)`).
    pub fn error_name(&self, rc: CuResult) -> String {
        let mut p: *const c_char = std::ptr::null();
        // SAFETY: cuGetErrorName writes a pointer to a static string (or fails for unknown codes).
        let ok = unsafe { (self.api.error_name)(rc, &mut p) } == 0;
        let name = if ok {
            // SAFETY: on success `p` is a static NUL-terminated string.
            unsafe { c_str(p) }
        } else {
            String::new()
        };
        if name.is_empty() {
            format!("unknown CUresult ({rc})")
        } else {
            format!("{name} ({rc})")
        }
    }

    fn check(&self, rc: CuResult, what: &str) -> Result<()> {
        if rc != 0 {
            bail!(Device, "CUDA {what}: {}", self.error_name(rc));
        }
        Ok(())
    }

    /// How many CUDA devices there are.
    pub fn device_count(&self) -> Result<usize> {
        let mut n = 0;
        // SAFETY: writes one int.
        let rc = unsafe { (self.api.device_count)(&mut n) };
        self.check(rc, "cuDeviceGetCount")?;
        Ok(n.max(0) as usize)
    }
}

/// A pinned host buffer from `cuMemAllocHost`, freed on drop.
struct Pinned {
    lib: Arc<CudaLib>,
    ptr: usize,
}

impl Drop for Pinned {
    fn drop(&mut self) {
        // SAFETY: `ptr` came from cuMemAllocHost and is freed once, here.
        unsafe { (self.lib.api.mem_free_host)(self.ptr as Ptr) };
    }
}

/// A CUDA device: its primary context and one stream.
pub struct CudaContext {
    lib: Arc<CudaLib>,
    device: CuDevice,
    ordinal: usize,
    ctx: usize,
    stream: usize,
    name: String,
    sm: u32,
    /// Pinned staging buffers of async copies in flight (freed at synchronize).
    pending: Mutex<Vec<Pinned>>,
}

impl std::fmt::Debug for CudaContext {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "CudaContext({}: {} sm_{})",
            self.ordinal, self.name, self.sm
        )
    }
}

impl Drop for CudaContext {
    fn drop(&mut self) {
        // SAFETY: the primary context was retained once in `open`; released once here.
        unsafe { (self.lib.api.primary_release)(self.device) };
    }
}

impl CudaContext {
    /// Device `ordinal`'s primary context and a new non-blocking stream.
    pub fn open(lib: &Arc<CudaLib>, ordinal: usize) -> Result<CudaContext> {
        let count = lib.device_count()?;
        if ordinal >= count {
            bail!(Device, "CUDA:{ordinal}: there are {count} CUDA devices");
        }
        let a = &lib.api;
        let mut dev = 0;
        // SAFETY: writes one device handle; the ordinal is in range.
        let rc = unsafe { (a.device_get)(&mut dev, ordinal as c_int) };
        lib.check(rc, "cuDeviceGet")?;
        let mut name = [0u8; 256];
        // SAFETY: the buffer holds the 256 bytes passed as its length.
        let rc = unsafe { (a.device_name)(name.as_mut_ptr().cast(), 256, dev) };
        lib.check(rc, "cuDeviceGetName")?;
        let (mut major, mut minor) = (0, 0);
        // SAFETY: each call writes one int.
        let rc = unsafe { (a.device_attribute)(&mut major, ATTR_CC_MAJOR, dev) };
        lib.check(rc, "cuDeviceGetAttribute(COMPUTE_CAPABILITY_MAJOR)")?;
        // SAFETY: as above.
        let rc = unsafe { (a.device_attribute)(&mut minor, ATTR_CC_MINOR, dev) };
        lib.check(rc, "cuDeviceGetAttribute(COMPUTE_CAPABILITY_MINOR)")?;
        let mut ctx: Ptr = std::ptr::null_mut();
        // SAFETY: writes one context handle.
        let rc = unsafe { (a.primary_retain)(&mut ctx, dev) };
        lib.check(rc, &format!("cuDevicePrimaryCtxRetain(device {ordinal})"))?;
        let mut c = CudaContext {
            lib: Arc::clone(lib),
            device: dev,
            ordinal,
            ctx: ctx as usize,
            stream: 0,
            name: super::nvlib::log_text(&name),
            sm: (major.max(0) * 10 + minor.max(0)) as u32,
            pending: Mutex::new(vec![]),
        };
        c.current()?;
        let mut stream: Ptr = std::ptr::null_mut();
        // SAFETY: writes one stream handle in the current context.
        let rc = unsafe { (a.stream_create)(&mut stream, STREAM_NON_BLOCKING) };
        lib.check(rc, "cuStreamCreate(NON_BLOCKING)")?;
        c.stream = stream as usize;
        Ok(c)
    }

    /// The GPU's name (`NVIDIA H100 80GB HBM3`).
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The compute capability as an SM version (90 for 9.0).
    pub fn sm(&self) -> u32 {
        self.sm
    }

    fn current(&self) -> Result<()> {
        // SAFETY: `ctx` is the retained primary context, alive while `self` is.
        let rc = unsafe { (self.lib.api.ctx_set_current)(self.ctx as Ptr) };
        self.lib.check(rc, "cuCtxSetCurrent")
    }

    fn stream(&self) -> Ptr {
        self.stream as Ptr
    }

    /// `cuMemAlloc(size)`: a device address.
    pub fn alloc(&self, size: usize) -> Result<u64> {
        self.current()?;
        let mut p = 0u64;
        // SAFETY: writes one device pointer.
        let rc = unsafe { (self.lib.api.mem_alloc)(&mut p, size.max(1)) };
        self.lib.check(rc, &format!("cuMemAlloc({size} bytes)"))?;
        Ok(p)
    }

    /// `cuMemFree(ptr)`.
    pub fn free(&self, ptr: u64) -> Result<()> {
        self.current()?;
        // SAFETY: the driver validates the address and reports unknown ones as errors.
        let rc = unsafe { (self.lib.api.mem_free)(ptr) };
        self.lib.check(rc, &format!("cuMemFree({ptr:#x})"))
    }

    /// Synchronous host-to-device copy of `src` to `dst`.
    pub fn copy_in(&self, dst: u64, src: &[u8]) -> Result<()> {
        self.current()?;
        // SAFETY: `src` is a live slice of the given length; the driver checks `dst`.
        let rc = unsafe { (self.lib.api.htod)(dst, src.as_ptr().cast(), src.len()) };
        self.lib
            .check(rc, &format!("cuMemcpyHtoD({dst:#x}, {} bytes)", src.len()))
    }

    /// Asynchronous host-to-device copy through a pinned staging buffer (the stream orders it
    /// before later launches; `src` may be reused at once).
    pub fn copy_in_async(&self, dst: u64, src: &[u8]) -> Result<()> {
        self.current()?;
        let mut p: Ptr = std::ptr::null_mut();
        // SAFETY: writes one host pointer to `src.len()` pinned bytes.
        let rc = unsafe { (self.lib.api.mem_alloc_host)(&mut p, src.len().max(1)) };
        self.lib
            .check(rc, &format!("cuMemAllocHost({} bytes)", src.len()))?;
        let pinned = Pinned {
            lib: Arc::clone(&self.lib),
            ptr: p as usize,
        };
        // SAFETY: `p` points to at least `src.len()` fresh bytes that nothing else uses.
        unsafe { std::ptr::copy_nonoverlapping(src.as_ptr(), p.cast::<u8>(), src.len()) };
        // SAFETY: the pinned buffer stays alive in `pending` until the stream is synchronized.
        let rc = unsafe { (self.lib.api.htod_async)(dst, p, src.len(), self.stream()) };
        self.lib.check(
            rc,
            &format!("cuMemcpyHtoDAsync({dst:#x}, {} bytes)", src.len()),
        )?;
        self.pending
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(pinned);
        Ok(())
    }

    /// Device-to-host copy into `dst` (after the stream's earlier work).
    pub fn copy_out(&self, dst: &mut [u8], src: u64) -> Result<()> {
        self.synchronize()?;
        // SAFETY: `dst` is a live mutable slice of the given length; the driver checks `src`.
        let rc = unsafe { (self.lib.api.dtoh)(dst.as_mut_ptr().cast(), src, dst.len()) };
        self.lib
            .check(rc, &format!("cuMemcpyDtoH({src:#x}, {} bytes)", dst.len()))
    }

    /// Device-to-host copy enqueued on the stream and waited for (the asynchronous form, so it
    /// orders after earlier launches without a full context synchronize).
    pub fn copy_out_async(&self, dst: &mut [u8], src: u64) -> Result<()> {
        self.current()?;
        // SAFETY: `dst` stays borrowed until the stream synchronize below returns.
        let rc = unsafe {
            (self.lib.api.dtoh_async)(dst.as_mut_ptr().cast(), src, dst.len(), self.stream())
        };
        self.lib.check(
            rc,
            &format!("cuMemcpyDtoHAsync({src:#x}, {} bytes)", dst.len()),
        )?;
        self.stream_synchronize()
    }

    /// Device-to-device copy of `size` bytes.
    pub fn copy_device(&self, dst: u64, src: u64, size: usize) -> Result<()> {
        self.current()?;
        // SAFETY: the driver checks both device ranges.
        let rc = unsafe { (self.lib.api.dtod)(dst, src, size) };
        self.lib
            .check(rc, &format!("cuMemcpyDtoD({dst:#x}, {src:#x}, {size})"))
    }

    /// `cuModuleLoadData(image)`: a module handle.
    pub fn load_module(&self, image: &[u8]) -> Result<u64> {
        self.current()?;
        // cuModuleLoadData takes a cubin/fatbin (sized by its ELF header) or NUL-terminated PTX.
        let mut data = image.to_vec();
        data.push(0);
        let mut m: Ptr = std::ptr::null_mut();
        // SAFETY: `data` is alive for the call; the driver copies what it loads.
        let rc = unsafe { (self.lib.api.module_load_data)(&mut m, data.as_ptr().cast()) };
        self.lib
            .check(rc, &format!("cuModuleLoadData({} bytes)", image.len()))?;
        Ok(m as u64)
    }

    /// `cuModuleUnload(module)`.
    pub fn unload_module(&self, module: u64) -> Result<()> {
        self.current()?;
        // SAFETY: the driver validates the handle.
        let rc = unsafe { (self.lib.api.module_unload)(module as Ptr) };
        self.lib.check(rc, "cuModuleUnload")
    }

    /// `cuModuleGetFunction(module, name)`.
    pub fn function(&self, module: u64, name: &str) -> Result<u64> {
        self.current()?;
        let c = CString::new(name)
            .map_err(|_| Error::Device(format!("CUDA: kernel name {name:?} contains NUL")))?;
        let mut f: Ptr = std::ptr::null_mut();
        // SAFETY: `c` is NUL-terminated and alive; writes one function handle.
        let rc = unsafe { (self.lib.api.module_function)(&mut f, module as Ptr, c.as_ptr()) };
        self.lib
            .check(rc, &format!("cuModuleGetFunction({name})"))?;
        Ok(f as u64)
    }

    /// `cuLaunchKernel` on the stream with the packed parameter buffer `params` (8-byte pointers
    /// then 4-byte ints, the kernel's parameter layout).
    pub fn launch(
        &self,
        function: u64,
        params: &[u8],
        grid: [u32; 3],
        block: [u32; 3],
        shared: u32,
    ) -> Result<()> {
        self.current()?;
        let mut size = params.len();
        let mut extra: [Ptr; 5] = [
            LAUNCH_PARAM_BUFFER_POINTER as Ptr,
            params.as_ptr() as Ptr,
            LAUNCH_PARAM_BUFFER_SIZE as Ptr,
            (&mut size as *mut usize).cast(),
            LAUNCH_PARAM_END as Ptr,
        ];
        // SAFETY: `extra` is the documented (pointer, buffer, size, end) list; the buffer and
        // size live until cuLaunchKernel returns (it copies the parameters).
        let rc = unsafe {
            (self.lib.api.launch)(
                function as Ptr,
                grid[0],
                grid[1],
                grid[2],
                block[0],
                block[1],
                block[2],
                shared,
                self.stream(),
                std::ptr::null_mut(),
                extra.as_mut_ptr(),
            )
        };
        self.lib.check(
            rc,
            &format!("cuLaunchKernel(grid {grid:?}, block {block:?}, {size} param bytes)"),
        )
    }

    /// Wait for the stream: `cuStreamQuery` polled with a deadline (not `cuStreamSynchronize`,
    /// which has none).
    fn stream_synchronize(&self) -> Result<()> {
        let what = format!("cuStreamQuery(stream {:?})", self.stream());
        wait_ready(
            &what,
            |rc| self.lib.check(rc, &what),
            || {
                // SAFETY: the stream lives as long as the context.
                unsafe { (self.lib.api.stream_query)(self.stream()) }
            },
        )
    }

    /// Wait for the stream (every launch and async copy of this context goes through it; the
    /// other copies are synchronous) with a deadline; frees the staging buffers.
    pub fn synchronize(&self) -> Result<()> {
        self.current()?;
        self.stream_synchronize()?;
        self.pending
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clear();
        Ok(())
    }

    /// A new event recorded on the stream now.
    pub fn event_record(&self) -> Result<u64> {
        self.current()?;
        let mut e: Ptr = std::ptr::null_mut();
        // SAFETY: writes one event handle (flags 0: timing enabled).
        let rc = unsafe { (self.lib.api.event_create)(&mut e, 0) };
        self.lib.check(rc, "cuEventCreate")?;
        // SAFETY: both handles are live.
        let rc = unsafe { (self.lib.api.event_record)(e, self.stream()) };
        self.lib.check(rc, "cuEventRecord")?;
        Ok(e as u64)
    }

    /// Wait for an event: `cuEventQuery` polled with a deadline.
    pub fn event_synchronize(&self, event: u64) -> Result<()> {
        let what = format!("cuEventQuery(event {event:#x})");
        wait_ready(
            &what,
            |rc| self.lib.check(rc, &what),
            || {
                // SAFETY: the driver validates the handle.
                unsafe { (self.lib.api.event_query)(event as Ptr) }
            },
        )
    }

    /// Seconds between two recorded (and completed) events.
    pub fn event_elapsed(&self, start: u64, end: u64) -> Result<f64> {
        let mut ms = 0f32;
        // SAFETY: writes one float; the driver validates the handles.
        let rc = unsafe { (self.lib.api.event_elapsed)(&mut ms, start as Ptr, end as Ptr) };
        self.lib.check(rc, "cuEventElapsedTime")?;
        Ok(f64::from(ms) / 1e3)
    }

    /// `cuEventDestroy`.
    pub fn event_destroy(&self, event: u64) -> Result<()> {
        // SAFETY: the driver validates the handle.
        let rc = unsafe { (self.lib.api.event_destroy)(event as Ptr) };
        self.lib.check(rc, "cuEventDestroy")
    }
}

/// `CUDA_ERROR_NOT_READY` (`cuda.h`): the queried stream or event has work outstanding.
const CUDA_ERROR_NOT_READY: CuResult = 600;

/// Poll a `cu*Query` until it succeeds (other results through `check`), for at most the HCQ
/// wait timeout: then the `Error::Timeout` of [`crate::driver::deadline::poll_bounded`].
fn wait_ready(
    what: &str,
    check: impl Fn(CuResult) -> Result<()>,
    mut query: impl FnMut() -> CuResult,
) -> Result<()> {
    let timeout = crate::driver::deadline::wait_timeout();
    crate::driver::deadline::poll_bounded(
        || format!("CUDA: {what}"),
        timeout,
        u64::MAX,
        || match query() {
            CUDA_ERROR_NOT_READY => Ok(None),
            rc => check(rc).map(Some),
        },
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(rc: CuResult) -> Result<()> {
        match rc {
            0 => Ok(()),
            rc => Err(Error::Device(format!("cuStreamQuery: CUresult {rc}"))),
        }
    }

    #[test]
    fn waits_poll_not_ready_until_done_or_an_error() {
        let mut n = 0;
        let ok = wait_ready("cuStreamQuery(stream 0x1)", check, || {
            n += 1;
            if n < 50 {
                CUDA_ERROR_NOT_READY
            } else {
                0
            }
        });
        assert!(ok.is_ok() && n == 50);
        // CUDA_ERROR_LAUNCH_FAILED (719) while polling: the error, not a wait.
        let e = wait_ready("q", check, || 719).unwrap_err();
        assert!(matches!(&e, Error::Device(m) if m.contains("719")), "{e}");
    }

    #[test]
    fn a_stream_that_never_finishes_is_a_timeout() {
        let _t = crate::helpers::Context::with_str(&[("HCQDEV_WAIT_TIMEOUT_MS", "20")]);
        let e = wait_ready("cuEventQuery(event 0x5)", check, || CUDA_ERROR_NOT_READY).unwrap_err();
        let Error::Timeout(m) = &e else {
            panic!("not a timeout: {e}")
        };
        assert!(m.contains("CUDA: cuEventQuery(event 0x5): not done"), "{m}");
    }

    #[test]
    fn loads_or_names_why_not() {
        match CudaLib::load() {
            Ok(lib) => {
                assert!(lib.version() > 0);
                assert!(lib.error_name(2).contains("CUDA_ERROR_OUT_OF_MEMORY"));
            }
            Err(e) => {
                let m = e.message();
                assert!(m.contains("CUDA driver library is not available"), "{m}");
                assert!(m.contains("libcuda.so"), "{m}");
                println!("skipped: {m}");
            }
        }
    }
}
