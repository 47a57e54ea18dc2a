//! Allocators: [`HostAllocator`] (host memory for the CPU devices) and [`LruAllocator`], tinygrad's
//! `LRUAllocator` as a wrapper around any [`Allocator`].
//!
//! - `HostAllocator` hands out [`RawBuf`]s whose owner is an `Arc<HostMemory>` and whose `addr` is
//!   a host pointer into it; views share the owner (`addr + offset`, bounds-checked against the
//!   block), so a view keeps its memory alive.
//! - `LruAllocator` keeps freed buffers in a cache keyed by `(size, options)` and hands them back
//!   on the next `alloc` of the same key; `nolru` buffers and `LRU=0` bypass the cache; a failing
//!   allocation flushes the cache and retries once.
//!
//! Not guaranteed: memory reused from the LRU cache holds whatever it held before (only fresh
//! host memory is zeroed). `GlobalCounters::mem_used` is accounted by `Buffer` (bytes held by live
//! buffers, as tinygrad does), not here: cached memory does not count as used.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use crate::device::{Allocator, BufferOptions, RawBuf};
use crate::driver::hostmem::HostMemory;
use crate::helpers::getenv;
use crate::{ensure, Error, Result};

/// The host memory behind a `RawBuf` from [`HostAllocator`], and the buffer's offset into it.
pub fn host_memory(buf: &RawBuf) -> Result<(&HostMemory, usize)> {
    let mem = buf.owner.downcast_ref::<HostMemory>().ok_or_else(|| {
        Error::Device(format!(
            "{buf:?} is not host memory (it was not allocated by a CPU device)"
        ))
    })?;
    let off = mem.offset_of(buf.addr, buf.size)?;
    Ok((mem, off))
}

/// Host memory for the CPU devices (tinygrad's `MallocAllocator`).
#[derive(Debug, Default, Clone, Copy)]
pub struct HostAllocator;

impl Allocator for HostAllocator {
    fn alloc(&self, size: usize, _opts: &BufferOptions) -> Result<RawBuf> {
        let mem = Arc::new(HostMemory::new(size)?);
        Ok(RawBuf {
            addr: mem.addr(),
            size,
            owner: mem,
        })
    }

    fn free(&self, buf: RawBuf, _size: usize, _opts: &BufferOptions) {
        // The block is released when the last owner (this buffer or a view of it) drops.
        drop(buf);
    }

    fn copyin(&self, dst: &RawBuf, src: &[u8]) -> Result<()> {
        ensure!(
            src.len() <= dst.size,
            InvalidArgument,
            "copyin: {} bytes into a buffer of {} bytes",
            src.len(),
            dst.size
        );
        let (mem, off) = host_memory(dst)?;
        mem.write(off, src)
    }

    fn copyout(&self, dst: &mut [u8], src: &RawBuf) -> Result<()> {
        ensure!(
            dst.len() <= src.size,
            InvalidArgument,
            "copyout: {} bytes out of a buffer of {} bytes",
            dst.len(),
            src.size
        );
        let (mem, off) = host_memory(src)?;
        mem.read(off, dst)
    }

    fn offset(&self, buf: &RawBuf, size: usize, offset: usize) -> Result<RawBuf> {
        ensure!(
            offset.checked_add(size).is_some_and(|end| end <= buf.size),
            InvalidArgument,
            "offset view of {size} bytes at offset {offset} exceeds the buffer of {} bytes",
            buf.size
        );
        // Also proves the parent itself lies in its block.
        host_memory(buf)?;
        Ok(RawBuf {
            addr: buf.addr + offset as u64,
            size,
            owner: Arc::clone(&buf.owner),
        })
    }

    fn transfer(&self, dst: &RawBuf, src: &RawBuf, size: usize) -> Result<()> {
        ensure!(
            size <= dst.size && size <= src.size,
            InvalidArgument,
            "transfer of {size} bytes from a buffer of {} into a buffer of {} bytes",
            src.size,
            dst.size
        );
        let (dmem, doff) = host_memory(dst)?;
        let (smem, soff) = host_memory(src)?;
        dmem.copy_from(doff, smem, soff, size)
    }
}

type LruKey = (usize, BufferOptions);

/// tinygrad's `LRUAllocator`: reuses freed buffers of the same size and options.
pub struct LruAllocator<A: Allocator> {
    inner: A,
    cache: Mutex<HashMap<LruKey, Vec<RawBuf>>>,
}

impl<A: Allocator> LruAllocator<A> {
    pub fn new(inner: A) -> Self {
        LruAllocator {
            inner,
            cache: Mutex::new(HashMap::new()),
        }
    }

    /// The wrapped allocator.
    pub fn inner(&self) -> &A {
        &self.inner
    }

    fn cache(&self) -> std::sync::MutexGuard<'_, HashMap<LruKey, Vec<RawBuf>>> {
        self.cache.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Number of buffers waiting in the cache.
    pub fn cached_count(&self) -> usize {
        self.cache().values().map(Vec::len).sum()
    }

    /// Bytes waiting in the cache.
    pub fn cached_bytes(&self) -> usize {
        self.cache()
            .iter()
            .map(|((size, _), bufs)| size * bufs.len())
            .sum()
    }
}

impl<A: Allocator> Drop for LruAllocator<A> {
    fn drop(&mut self) {
        self.free_cache();
    }
}

impl<A: Allocator> Allocator for LruAllocator<A> {
    fn alloc(&self, size: usize, opts: &BufferOptions) -> Result<RawBuf> {
        if let Some(buf) = self.cache().get_mut(&(size, *opts)).and_then(Vec::pop) {
            return Ok(buf);
        }
        match self.inner.alloc(size, opts) {
            Ok(buf) => Ok(buf),
            Err(first) => {
                self.free_cache();
                self.inner.alloc(size, opts).map_err(|e| {
                    Error::Device(format!(
                        "allocation of {size} bytes failed after freeing the LRU cache: {} \
                         (first attempt: {})",
                        e.message(),
                        first.message()
                    ))
                })
            }
        }
    }

    fn free(&self, buf: RawBuf, size: usize, opts: &BufferOptions) {
        if getenv("LRU", 1) != 0 && !opts.nolru {
            self.cache().entry((size, *opts)).or_default().push(buf);
        } else {
            self.inner.free(buf, size, opts);
        }
    }

    fn copyin(&self, dst: &RawBuf, src: &[u8]) -> Result<()> {
        self.inner.copyin(dst, src)
    }

    fn copyout(&self, dst: &mut [u8], src: &RawBuf) -> Result<()> {
        self.inner.copyout(dst, src)
    }

    fn offset(&self, buf: &RawBuf, size: usize, offset: usize) -> Result<RawBuf> {
        self.inner.offset(buf, size, offset)
    }

    fn transfer(&self, dst: &RawBuf, src: &RawBuf, size: usize) -> Result<()> {
        self.inner.transfer(dst, src, size)
    }

    fn synchronize(&self) -> Result<()> {
        self.inner.synchronize()
    }

    /// Release every cached buffer to the wrapped allocator.
    fn free_cache(&self) {
        let drained: Vec<(LruKey, Vec<RawBuf>)> = self.cache().drain().collect();
        for ((size, opts), bufs) in drained {
            for b in bufs {
                self.inner.free(b, size, &opts);
            }
        }
    }
}

#[cfg(test)]
mod tests;
