//! tinygrad's `Buffer`: a typed, lazily allocated region of one device's memory, or a view (a byte
//! offset) into such a region.
//!
//! A [`Buffer`] is always handled through a [`BufferRef`] (an `Arc`), which compares and hashes by
//! identity, as Python objects do. A base buffer allocates through its device's allocator (found in
//! the registry's table, which holds the built-in families once `runtime::builtin` registered
//! them: any tensor, engine run or `runtime::builtin::open_device` does) on
//! [`Buffer::ensure_allocated`] and returns the memory to that allocator when
//! the last handle drops; a view allocates through the allocator's `offset` over its base's memory
//! (allocating the base first), keeps the base alive, and frees nothing. `lb_refcount` counts the
//! lazy-graph references and lives on the base (a view reads and bumps its base's count).
//! `GlobalCounters::mem_used` counts the bytes of allocated base buffers (not of DISK devices).
//!
//! Not guaranteed: a buffer is allocated once and stays allocated until dropped (there is no
//! `deallocate`); concurrent `copyin`s of one buffer from different threads race in the ordinary
//! way (the last write wins); kernels running on the memory are the caller's ordering problem.

use std::fmt;
use std::hash::{Hash, Hasher};
use std::ops::Deref;
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

use crate::device::registry::{canonical_arc, open_registered};
use crate::device::{Allocator, BufferOptions, RawBuf};
use crate::dtype::DType;
use crate::helpers::{debug, GlobalCounters};
use crate::{ensure, Error, Result};

/// A device buffer (see the module doc). Create it with [`Buffer::new`].
pub struct Buffer {
    /// Canonical name, shared with every buffer on the device (no allocation per buffer).
    device: Arc<str>,
    size: usize,
    dtype: DType,
    options: BufferOptions,
    /// Byte offset into the base (0 for a base buffer).
    offset: usize,
    base: Option<BufferRef>,
    allocator: OnceLock<Arc<dyn Allocator>>,
    raw: OnceLock<RawBuf>,
    init: Mutex<()>,
    lb_refcount: AtomicI64,
}

/// A shared handle to a [`Buffer`] with identity semantics: two handles are equal when they point
/// at the same buffer.
#[derive(Clone)]
pub struct BufferRef(Arc<Buffer>);

impl Buffer {
    /// A base buffer of `size` elements of `dtype` on `device` (canonicalised); nothing is
    /// allocated until [`Buffer::ensure_allocated`]. A buffer exists only behind its identity
    /// handle, so this returns the handle.
    #[allow(clippy::new_ret_no_self)]
    pub fn new(device: &str, size: usize, dtype: DType, options: BufferOptions) -> BufferRef {
        BufferRef(Arc::new(Buffer {
            device: canonical_arc(device),
            size,
            dtype,
            options,
            offset: 0,
            base: None,
            allocator: OnceLock::new(),
            raw: OnceLock::new(),
            init: Mutex::new(()),
            lb_refcount: AtomicI64::new(0),
        }))
    }

    /// A base buffer allocated now and filled with `initial` (tinygrad's `initial_value`).
    pub fn with_initial(
        device: &str,
        size: usize,
        dtype: DType,
        options: BufferOptions,
        initial: &[u8],
    ) -> Result<BufferRef> {
        let b = Buffer::new(device, size, dtype, options);
        b.copyin(initial)?;
        Ok(b)
    }

    /// Canonical device name.
    pub fn device(&self) -> &str {
        &self.device
    }
    /// Number of elements.
    pub fn size(&self) -> usize {
        self.size
    }
    pub fn dtype(&self) -> DType {
        self.dtype
    }
    pub fn options(&self) -> &BufferOptions {
        &self.options
    }
    /// Byte offset into the base buffer (0 for a base).
    pub fn offset(&self) -> usize {
        self.offset
    }
    /// `size * itemsize` (saturating: an impossible size fails at allocation, not here).
    pub fn nbytes(&self) -> usize {
        self.size.saturating_mul(self.dtype.itemsize())
    }
    /// Whether this buffer is a view of another.
    pub fn is_view(&self) -> bool {
        self.base.is_some()
    }

    /// Lazy-graph references to the base buffer.
    pub fn lb_refcount(&self) -> i64 {
        match &self.base {
            Some(b) => b.lb_refcount(),
            None => self.lb_refcount.load(Ordering::Acquire),
        }
    }
    /// Add `cnt` (may be negative) to the base buffer's lazy-graph reference count
    /// (tinygrad's `Buffer.ref`).
    pub fn lb_ref(&self, cnt: i64) {
        match &self.base {
            Some(b) => b.lb_ref(cnt),
            None => {
                self.lb_refcount.fetch_add(cnt, Ordering::AcqRel);
            }
        }
    }

    pub fn is_allocated(&self) -> bool {
        self.raw.get().is_some()
    }

    /// The allocator this buffer allocated through (once allocated).
    pub fn allocator(&self) -> Option<&Arc<dyn Allocator>> {
        self.allocator.get()
    }

    /// The device memory, which must be allocated.
    pub fn raw(&self) -> Result<&RawBuf> {
        self.raw
            .get()
            .ok_or_else(|| Error::Device(format!("{self:?} is not allocated")))
    }

    /// Allocate the memory if that has not happened yet, and return it.
    pub fn ensure_allocated(&self) -> Result<&RawBuf> {
        if let Some(raw) = self.raw.get() {
            return Ok(raw);
        }
        let _g = self.init.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(raw) = self.raw.get() {
            return Ok(raw);
        }
        if debug() >= 7 {
            println!(
                "buffer: allocate {} bytes on {}",
                self.nbytes(),
                self.device
            );
        }
        let (allocator, raw) = match &self.base {
            Some(base) => {
                let base_raw = base.ensure_allocated()?;
                let allocator = base.allocator().cloned().ok_or_else(|| {
                    Error::Internal(format!("allocated base {base:?} has no allocator"))
                })?;
                let raw = allocator.offset(base_raw, self.nbytes(), self.offset)?;
                (allocator, raw)
            }
            None => {
                let allocator = Arc::clone(&open_registered(&self.device)?.allocator);
                let raw = allocator
                    .alloc(self.nbytes(), &self.options)
                    .map_err(|e| Error::Device(format!("allocating {self:?}: {}", e.message())))?;
                if !self.device.starts_with("DISK") {
                    GlobalCounters::add_mem_used(self.nbytes() as i64);
                }
                (allocator, raw)
            }
        };
        let _ = self.allocator.set(allocator);
        Ok(self.raw.get_or_init(|| raw))
    }

    /// Copy `src` (exactly `nbytes` bytes) into the buffer, allocating it first if needed.
    pub fn copyin(&self, src: &[u8]) -> Result<()> {
        ensure!(
            src.len() == self.nbytes(),
            InvalidArgument,
            "copyin size mismatch: {} bytes into {self:?} of {} bytes",
            src.len(),
            self.nbytes()
        );
        let raw = self.ensure_allocated()?;
        self.allocated_allocator()?.copyin(raw, src)
    }

    /// Copy the buffer (exactly `nbytes` bytes) to `dst`; the buffer must be allocated.
    pub fn copyout(&self, dst: &mut [u8]) -> Result<()> {
        ensure!(
            dst.len() == self.nbytes(),
            InvalidArgument,
            "copyout size mismatch: {self:?} of {} bytes into {} bytes",
            self.nbytes(),
            dst.len()
        );
        let raw = self
            .raw
            .get()
            .ok_or_else(|| Error::Device(format!("can't copyout unallocated {self:?}")))?;
        self.allocated_allocator()?.copyout(dst, raw)
    }

    /// The buffer's bytes (tinygrad's `as_buffer`); the buffer must be allocated.
    pub fn as_bytes(&self) -> Result<Vec<u8>> {
        let mut out = vec![0u8; self.nbytes()];
        self.copyout(&mut out)?;
        Ok(out)
    }

    fn allocated_allocator(&self) -> Result<&Arc<dyn Allocator>> {
        self.allocator
            .get()
            .ok_or_else(|| Error::Internal(format!("{self:?} is allocated without an allocator")))
    }
}

impl BufferRef {
    /// A view of `size` elements of `dtype` starting `offset` bytes into this buffer (views of
    /// views are views of the same base). The view must lie inside the base.
    pub fn view(&self, size: usize, dtype: DType, offset: usize) -> Result<BufferRef> {
        let base = self.base();
        let start = self.offset.saturating_add(offset);
        let nbytes = size.saturating_mul(dtype.itemsize());
        ensure!(
            start
                .checked_add(nbytes)
                .is_some_and(|end| end <= base.nbytes()),
            InvalidArgument,
            "view of {size} x {dtype:?} at byte offset {offset} of {self:?} exceeds the base of {} bytes",
            base.nbytes()
        );
        Ok(BufferRef(Arc::new(Buffer {
            device: self.device.clone(),
            size,
            dtype,
            options: base.options,
            offset: start,
            base: Some(base),
            allocator: OnceLock::new(),
            raw: OnceLock::new(),
            init: Mutex::new(()),
            lb_refcount: AtomicI64::new(0),
        })))
    }

    /// The base buffer (this one when it is not a view).
    pub fn base(&self) -> BufferRef {
        match &self.0.base {
            Some(b) => b.clone(),
            None => self.clone(),
        }
    }

    /// A number unique to this buffer while it lives (its address).
    pub fn id(&self) -> usize {
        Arc::as_ptr(&self.0) as usize
    }
}

impl Deref for BufferRef {
    type Target = Buffer;
    fn deref(&self) -> &Buffer {
        &self.0
    }
}

impl PartialEq for BufferRef {
    fn eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }
}
impl Eq for BufferRef {}

impl Hash for BufferRef {
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.id().hash(state);
    }
}

impl fmt::Debug for Buffer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "<buf real:{} device:{} size:{} dtype:{:?}",
            self.is_allocated(),
            self.device,
            self.size,
            self.dtype
        )?;
        if self.base.is_some() {
            write!(f, " offset:{}", self.offset)?;
        }
        if self.options != BufferOptions::default() {
            write!(f, " options:{:?}", self.options)?;
        }
        write!(f, ">")
    }
}

impl fmt::Debug for BufferRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&*self.0, f)
    }
}

impl Drop for Buffer {
    fn drop(&mut self) {
        if self.base.is_some() {
            return;
        }
        let (Some(raw), Some(allocator)) = (self.raw.take(), self.allocator.get()) else {
            return;
        };
        if debug() >= 7 {
            println!(
                "buffer: deallocate {} bytes on {}",
                self.nbytes(),
                self.device
            );
        }
        if !self.device.starts_with("DISK") {
            GlobalCounters::add_mem_used(-(self.nbytes() as i64));
        }
        allocator.free(raw, self.nbytes(), &self.options);
    }
}

#[cfg(test)]
mod tests;
