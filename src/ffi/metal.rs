//! Metal (macOS only) through the Objective-C runtime, loaded with `dlopen`: `libobjc`
//! (`objc_getClass`, `sel_registerName`, `objc_msgSend` cast to each method's C signature,
//! autorelease pools), `Metal.framework` (`MTLCreateSystemDefaultDevice`), `Foundation` (NSString)
//! and `libSystem` (`dispatch_data_create`). No link-time dependency, no Objective-C compiler.
//!
//! [`MetalContext`] owns the default device and one command queue. Buffers are shared-storage
//! (`MTLResourceStorageModeShared`, unified memory): a buffer is known by its `contents` address,
//! so an address inside it (a view) maps back to (buffer, offset) for `setBuffer:offset:atIndex:`.
//! Kernels are a library (a `.metallib` image, or Metal Shading Language source text) and a
//! compute pipeline per function; a launch is one command buffer with one compute encoder (buffers
//! at indices 0.., then each int with `setBytes` at the following indices, tinygrad's layout).
//! Timing events are empty command buffers; elapsed time is the difference of their
//! `GPUEndTime`s.
//!
//! Not guaranteed: checked only with `cargo check --target aarch64-apple-darwin` (never run on a
//! Mac by rawgrad's CI); objects are released when their handles are freed, an object a caller
//! never frees leaks.

use std::collections::BTreeMap;
use std::ffi::{c_char, c_void, CString};
use std::path::Path;
use std::sync::{Arc, Mutex, OnceLock};

use super::nvlib::{c_str, VendorLib};
use crate::{bail, Error, Result};

type Id = *mut c_void;
type Sel = *const c_void;

/// MTLSize.
#[repr(C)]
#[derive(Clone, Copy)]
struct MtlSize {
    w: u64,
    h: u64,
    d: u64,
}

/// The Objective-C runtime and the few C entry points around it.
struct Objc {
    get_class: unsafe extern "C" fn(*const c_char) -> Id,
    sel: unsafe extern "C" fn(*const c_char) -> Sel,
    msg_send: *const c_void,
    pool_push: unsafe extern "C" fn() -> *mut c_void,
    pool_pop: unsafe extern "C" fn(*mut c_void),
    create_device: unsafe extern "C" fn() -> Id,
    dispatch_data_create:
        unsafe extern "C" fn(*const c_void, usize, *mut c_void, *mut c_void) -> Id,
}

// SAFETY: function pointers into libraries that stay loaded for the life of the process.
unsafe impl Send for Objc {}
// SAFETY: as above; nothing is mutated after loading.
unsafe impl Sync for Objc {}

fn open(path: &str) -> Result<VendorLib> {
    VendorLib::open(Path::new(path), "Metal").map_err(|e| Error::Device(e.message().to_string()))
}

impl Objc {
    fn load() -> Result<&'static Objc> {
        static OBJC: OnceLock<std::result::Result<Objc, String>> = OnceLock::new();
        OBJC.get_or_init(|| Objc::open().map_err(|e| e.message().to_string()))
            .as_ref()
            .map_err(|m| Error::Device(m.clone()))
    }

    fn open() -> Result<Objc> {
        let objc = open("/usr/lib/libobjc.A.dylib")?;
        let metal = open("/System/Library/Frameworks/Metal.framework/Metal")?;
        // Foundation registers NSString and NSError with the runtime.
        open("/System/Library/Frameworks/Foundation.framework/Foundation")?;
        let system = open("/usr/lib/libSystem.B.dylib")?;
        let d = |e: Error| Error::Device(e.message().to_string());
        // SAFETY: each type is the C signature of the named function in objc/runtime.h,
        // objc/objc-internal.h (pools), Metal/MTLDevice.h and dispatch/data.h.
        unsafe {
            Ok(Objc {
                get_class: objc.get(&["objc_getClass"]).map_err(d)?,
                sel: objc.get(&["sel_registerName"]).map_err(d)?,
                msg_send: objc.get::<*const c_void>(&["objc_msgSend"]).map_err(d)?,
                pool_push: objc.get(&["objc_autoreleasePoolPush"]).map_err(d)?,
                pool_pop: objc.get(&["objc_autoreleasePoolPop"]).map_err(d)?,
                create_device: metal.get(&["MTLCreateSystemDefaultDevice"]).map_err(d)?,
                dispatch_data_create: system.get(&["dispatch_data_create"]).map_err(d)?,
            })
        }
    }

    fn sel(&self, name: &str) -> Sel {
        let c = CString::new(name).unwrap_or_default();
        // SAFETY: a NUL-terminated selector name; the runtime interns it.
        unsafe { (self.sel)(c.as_ptr()) }
    }

    /// `objc_msgSend` as the function type `F` (the method's C signature with `id, SEL` first).
    ///
    /// # Safety
    /// `F` must be an `unsafe extern "C" fn(Id, Sel, ...)` type matching the method sent.
    unsafe fn msg<F: Copy>(&self) -> F {
        // SAFETY: per the caller, F is a function-pointer type of pointer size.
        unsafe { std::mem::transmute_copy(&self.msg_send) }
    }

    /// `[obj sel]` returning an object.
    fn send(&self, obj: Id, sel: &str) -> Id {
        // SAFETY: a no-argument method returning an object (or nothing: the result is ignored).
        unsafe { self.msg::<unsafe extern "C" fn(Id, Sel) -> Id>()(obj, self.sel(sel)) }
    }

    /// `[obj sel:arg]` returning an object.
    fn send1(&self, obj: Id, sel: &str, arg: Id) -> Id {
        // SAFETY: a one-object-argument method returning an object.
        unsafe { self.msg::<unsafe extern "C" fn(Id, Sel, Id) -> Id>()(obj, self.sel(sel), arg) }
    }

    fn nsstring(&self, s: &str) -> Result<Id> {
        let c = CString::new(s).map_err(|_| Error::Device(format!("Metal: {s:?} has a NUL")))?;
        // SAFETY: a class name string; `stringWithUTF8String:` copies the C string.
        let cls = unsafe { (self.get_class)(c"NSString".as_ptr()) };
        // SAFETY: `stringWithUTF8String:(const char*) -> id`.
        Ok(unsafe {
            self.msg::<unsafe extern "C" fn(Id, Sel, *const c_char) -> Id>()(
                cls,
                self.sel("stringWithUTF8String:"),
                c.as_ptr(),
            )
        })
    }

    fn string_of(&self, s: Id) -> String {
        if s.is_null() {
            return String::new();
        }
        // SAFETY: `UTF8String -> const char*`, valid while `s` lives (it does: autoreleased).
        unsafe {
            c_str(
                self.msg::<unsafe extern "C" fn(Id, Sel) -> *const c_char>()(
                    s,
                    self.sel("UTF8String"),
                ),
            )
        }
    }

    /// An NSError's description.
    fn error_text(&self, err: Id) -> String {
        if err.is_null() {
            return "no NSError".into();
        }
        self.string_of(self.send(err, "localizedDescription"))
    }
}

/// Runs `f` inside an autorelease pool.
fn pooled<T>(o: &Objc, f: impl FnOnce() -> T) -> T {
    // SAFETY: push/pop are paired on this thread around `f`.
    let p = unsafe { (o.pool_push)() };
    let r = f();
    // SAFETY: the token from the push above.
    unsafe { (o.pool_pop)(p) };
    r
}

/// A Metal device, its command queue and what rawgrad made with it.
pub struct MetalContext {
    objc: &'static Objc,
    device: usize,
    queue: usize,
    name: String,
    /// contents address -> (MTLBuffer, length).
    buffers: Mutex<BTreeMap<u64, (usize, usize)>>,
    /// Committed command buffers not yet waited for (retained).
    in_flight: Mutex<Vec<usize>>,
}

impl std::fmt::Debug for MetalContext {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "MetalContext({})", self.name)
    }
}

impl MetalContext {
    /// The system's default Metal device and a new command queue.
    pub fn open() -> Result<Arc<MetalContext>> {
        let o = Objc::load()?;
        // SAFETY: MTLCreateSystemDefaultDevice takes nothing and returns a retained device or nil.
        let dev = unsafe { (o.create_device)() };
        if dev.is_null() {
            bail!(
                Device,
                "METAL: MTLCreateSystemDefaultDevice returned nil (no Metal GPU)"
            );
        }
        let queue = o.send(dev, "newCommandQueue");
        if queue.is_null() {
            bail!(Device, "METAL: [device newCommandQueue] returned nil");
        }
        let name = pooled(o, || o.string_of(o.send(dev, "name")));
        Ok(Arc::new(MetalContext {
            objc: o,
            device: dev as usize,
            queue: queue as usize,
            name,
            buffers: Mutex::new(BTreeMap::new()),
            in_flight: Mutex::new(vec![]),
        }))
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    fn dev(&self) -> Id {
        self.device as Id
    }

    /// A shared-storage buffer of `size` bytes; its contents address.
    pub fn alloc(&self, size: usize) -> Result<u64> {
        let o = self.objc;
        // SAFETY: `newBufferWithLength:(NSUInteger)options:(MTLResourceOptions) -> id`.
        let buf = unsafe {
            o.msg::<unsafe extern "C" fn(Id, Sel, u64, u64) -> Id>()(
                self.dev(),
                o.sel("newBufferWithLength:options:"),
                size.max(1) as u64,
                0,
            )
        };
        if buf.is_null() {
            bail!(Device, "METAL: newBufferWithLength:{size} returned nil");
        }
        // SAFETY: `contents -> void*` of a shared buffer: its CPU address.
        let addr = unsafe {
            o.msg::<unsafe extern "C" fn(Id, Sel) -> *mut c_void>()(buf, o.sel("contents"))
        } as u64;
        lock(&self.buffers).insert(addr, (buf as usize, size.max(1)));
        Ok(addr)
    }

    /// The buffer holding `addr` and the offset into it.
    fn find(&self, addr: u64, len: usize) -> Result<(Id, u64)> {
        let bufs = lock(&self.buffers);
        match bufs.range(..=addr).next_back() {
            Some((base, (b, size))) if addr - base + len as u64 <= *size as u64 => {
                Ok((*b as Id, addr - base))
            }
            _ => bail!(Device, "METAL: no buffer holds {len} bytes at {addr:#x}"),
        }
    }

    /// Release a buffer from [`MetalContext::alloc`].
    pub fn free(&self, addr: u64) -> Result<()> {
        let Some((b, _)) = lock(&self.buffers).remove(&addr) else {
            bail!(Device, "METAL: free of unknown buffer {addr:#x}");
        };
        self.objc.send(b as Id, "release");
        Ok(())
    }

    /// Copy host bytes into a buffer (after the GPU's earlier work).
    pub fn copy_in(&self, dst: u64, src: &[u8]) -> Result<()> {
        self.find(dst, src.len())?;
        self.synchronize()?;
        // SAFETY: `find` proved `[dst, dst+len)` lies inside a live shared buffer's contents,
        // and the GPU is idle after synchronize.
        unsafe { std::ptr::copy_nonoverlapping(src.as_ptr(), dst as *mut u8, src.len()) };
        Ok(())
    }

    /// Copy buffer bytes to the host (after the GPU's earlier work).
    pub fn copy_out(&self, dst: &mut [u8], src: u64) -> Result<()> {
        self.find(src, dst.len())?;
        self.synchronize()?;
        // SAFETY: as in `copy_in`, for reading.
        unsafe { std::ptr::copy_nonoverlapping(src as *const u8, dst.as_mut_ptr(), dst.len()) };
        Ok(())
    }

    fn commit(&self, cb: Id) {
        let o = self.objc;
        o.send(cb, "retain");
        o.send(cb, "commit");
        lock(&self.in_flight).push(cb as usize);
    }

    /// A blit copy between two buffers.
    pub fn copy_device(&self, dst: u64, src: u64, size: usize) -> Result<()> {
        let (db, doff) = self.find(dst, size)?;
        let (sb, soff) = self.find(src, size)?;
        let o = self.objc;
        pooled(o, || {
            let cb = o.send(self.queue as Id, "commandBuffer");
            let enc = o.send(cb, "blitCommandEncoder");
            // SAFETY: `copyFromBuffer:sourceOffset:toBuffer:destinationOffset:size:`.
            unsafe {
                o.msg::<unsafe extern "C" fn(Id, Sel, Id, u64, Id, u64, u64)>()(
                    enc,
                    o.sel("copyFromBuffer:sourceOffset:toBuffer:destinationOffset:size:"),
                    sb,
                    soff,
                    db,
                    doff,
                    size as u64,
                )
            };
            o.send(enc, "endEncoding");
            self.commit(cb);
        });
        Ok(())
    }

    /// A library from a `.metallib` image or from Metal source text.
    pub fn load_library(&self, binary: &[u8]) -> Result<u64> {
        let o = self.objc;
        pooled(o, || {
            let mut err: Id = std::ptr::null_mut();
            let lib = if binary.starts_with(b"MTLB") {
                // SAFETY: DISPATCH_DATA_DESTRUCTOR_DEFAULT (null) copies the bytes.
                let data = unsafe {
                    (o.dispatch_data_create)(
                        binary.as_ptr().cast(),
                        binary.len(),
                        std::ptr::null_mut(),
                        std::ptr::null_mut(),
                    )
                };
                // SAFETY: `newLibraryWithData:(dispatch_data_t)error:(NSError**) -> id`.
                let l = unsafe {
                    o.msg::<unsafe extern "C" fn(Id, Sel, Id, *mut Id) -> Id>()(
                        self.dev(),
                        o.sel("newLibraryWithData:error:"),
                        data,
                        &mut err,
                    )
                };
                o.send(data, "release");
                l
            } else {
                let text = String::from_utf8_lossy(binary);
                let src = o.nsstring(&text)?;
                // SAFETY: `newLibraryWithSource:options:error:` with nil options.
                unsafe {
                    o.msg::<unsafe extern "C" fn(Id, Sel, Id, Id, *mut Id) -> Id>()(
                        self.dev(),
                        o.sel("newLibraryWithSource:options:error:"),
                        src,
                        std::ptr::null_mut(),
                        &mut err,
                    )
                }
            };
            if lib.is_null() {
                bail!(Device, "METAL: loading a library: {}", o.error_text(err));
            }
            Ok(lib as u64)
        })
    }

    /// Release an object handle (library, pipeline).
    pub fn release(&self, obj: u64) {
        self.objc.send(obj as Id, "release");
    }

    /// The compute pipeline of function `name` of `library`.
    pub fn pipeline(&self, library: u64, name: &str) -> Result<u64> {
        let o = self.objc;
        pooled(o, || {
            let n = o.nsstring(name)?;
            let f = o.send1(library as Id, "newFunctionWithName:", n);
            if f.is_null() {
                bail!(Device, "METAL: the library has no function {name}");
            }
            let mut err: Id = std::ptr::null_mut();
            // SAFETY: `newComputePipelineStateWithFunction:error: -> id`.
            let p = unsafe {
                o.msg::<unsafe extern "C" fn(Id, Sel, Id, *mut Id) -> Id>()(
                    self.dev(),
                    o.sel("newComputePipelineStateWithFunction:error:"),
                    f,
                    &mut err,
                )
            };
            o.send(f, "release");
            if p.is_null() {
                bail!(Device, "METAL: pipeline for {name}: {}", o.error_text(err));
            }
            Ok(p as u64)
        })
    }

    /// One command buffer: bind `bufs` then `vals`, dispatch `grid` groups of `block` threads.
    pub fn launch(
        &self,
        pipeline: u64,
        bufs: &[u64],
        vals: &[i32],
        grid: [u32; 3],
        block: [u32; 3],
    ) -> Result<()> {
        let bound = bufs
            .iter()
            .map(|a| self.find(*a, 0))
            .collect::<Result<Vec<_>>>()?;
        let o = self.objc;
        pooled(o, || {
            let cb = o.send(self.queue as Id, "commandBuffer");
            let enc = o.send(cb, "computeCommandEncoder");
            o.send1(enc, "setComputePipelineState:", pipeline as Id);
            for (i, (b, off)) in bound.iter().enumerate() {
                // SAFETY: `setBuffer:(id)offset:(NSUInteger)atIndex:(NSUInteger)`.
                unsafe {
                    o.msg::<unsafe extern "C" fn(Id, Sel, Id, u64, u64)>()(
                        enc,
                        o.sel("setBuffer:offset:atIndex:"),
                        *b,
                        *off,
                        i as u64,
                    )
                };
            }
            for (i, v) in vals.iter().enumerate() {
                // SAFETY: `setBytes:(const void*)length:(NSUInteger)atIndex:`; Metal copies the
                // 4 bytes before returning.
                unsafe {
                    o.msg::<unsafe extern "C" fn(Id, Sel, *const c_void, u64, u64)>()(
                        enc,
                        o.sel("setBytes:length:atIndex:"),
                        (v as *const i32).cast(),
                        4,
                        (bufs.len() + i) as u64,
                    )
                };
            }
            let size = |d: [u32; 3]| MtlSize {
                w: d[0].into(),
                h: d[1].into(),
                d: d[2].into(),
            };
            // SAFETY: `dispatchThreadgroups:(MTLSize)threadsPerThreadgroup:(MTLSize)`.
            unsafe {
                o.msg::<unsafe extern "C" fn(Id, Sel, MtlSize, MtlSize)>()(
                    enc,
                    o.sel("dispatchThreadgroups:threadsPerThreadgroup:"),
                    size(grid),
                    size(block),
                )
            };
            o.send(enc, "endEncoding");
            self.commit(cb);
        });
        Ok(())
    }

    /// An empty command buffer committed now (a timing event).
    pub fn event_record(&self) -> Result<u64> {
        let o = self.objc;
        Ok(pooled(o, || {
            let cb = o.send(self.queue as Id, "commandBuffer");
            o.send(cb, "retain");
            self.commit(cb);
            cb as u64
        }))
    }

    /// Wait for an event's command buffer (polled, with the HCQ wait timeout).
    pub fn event_synchronize(&self, event: u64) -> Result<()> {
        self.wait_completed(event as Id)
    }

    /// Poll a command buffer's `status` until it is completed or failed, for at most the HCQ
    /// wait timeout (`waitUntilCompleted` has no bound).
    fn wait_completed(&self, cb: Id) -> Result<()> {
        let o = self.objc;
        let what = || format!("METAL: command buffer {cb:?} status");
        let timeout = crate::driver::deadline::wait_timeout();
        crate::driver::deadline::poll_bounded(what, timeout, u64::MAX, || {
            // SAFETY: `status -> MTLCommandBufferStatus` (an NSUInteger) on a live buffer.
            let st =
                unsafe { o.msg::<unsafe extern "C" fn(Id, Sel) -> u64>()(cb, o.sel("status")) };
            Ok((st >= MTL_COMMAND_BUFFER_STATUS_COMPLETED).then_some(()))
        })
    }

    /// Seconds between two completed events.
    pub fn event_elapsed(&self, start: u64, end: u64) -> Result<f64> {
        let o = self.objc;
        // SAFETY: `GPUEndTime -> CFTimeInterval (double)`.
        let t = |cb: u64| unsafe {
            o.msg::<unsafe extern "C" fn(Id, Sel) -> f64>()(cb as Id, o.sel("GPUEndTime"))
        };
        Ok(t(end) - t(start))
    }

    /// Release an event.
    pub fn event_destroy(&self, event: u64) -> Result<()> {
        self.objc.send(event as Id, "release");
        Ok(())
    }

    /// Wait for every committed command buffer and release them.
    pub fn synchronize(&self) -> Result<()> {
        let cbs = std::mem::take(&mut *lock(&self.in_flight));
        let o = self.objc;
        let mut failed = None;
        for (i, &cb) in cbs.iter().enumerate() {
            if let Err(e) = self.wait_completed(cb as Id) {
                // Still in flight: keep them for the next synchronize.
                lock(&self.in_flight).splice(0..0, cbs[i..].iter().copied());
                return Err(e);
            }
            let err = o.send(cb as Id, "error");
            if !err.is_null() && failed.is_none() {
                failed = Some(pooled(o, || o.error_text(err)));
            }
            o.send(cb as Id, "release");
        }
        match failed {
            Some(e) => bail!(Device, "METAL: a command buffer failed: {e}"),
            None => Ok(()),
        }
    }
}

/// `MTLCommandBufferStatusCompleted` (`MTLCommandBuffer.h`; `Error`, 5, follows it): the
/// buffer is done.
const MTL_COMMAND_BUFFER_STATUS_COMPLETED: u64 = 4;

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}
