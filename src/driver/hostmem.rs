//! [`HostMemory`]: an owned, zero-initialised, aligned host allocation that CPU kernels address
//! directly (the memory behind every `CLANG`/`INTERP` buffer).
//!
//! What it owns: one block from the global allocator, aligned to 64 bytes (4096 for blocks of a
//! page or more), freed when the value drops; blocks of [`HUGE_MIN`] or more are their own
//! anonymous mapping instead, 2 MiB-aligned and advised to the kernel as transparent-huge-page
//! candidates before anything touches them.
//! Kernels get its raw address through [`HostMemory::addr`]; host code reads and writes it only
//! through the bounds-checked accessors ([`HostMemory::read`], [`HostMemory::write`],
//! [`HostMemory::fill`], [`HostMemory::copy_from`]), which serialize with each other through an
//! internal lock.
//!
//! Why huge pages: a kernel streaming a large buffer on 4 KiB pages misses the TLB every page
//! (a two-level walk under KVM), and its software prefetches stop at page walks. On a loaded
//! 2-core KVM Xeon guest, one thread, thread CPU ms, medians of 3 alternated `bench workloads`
//! runs (`--threads 1 --repeats 9 --budget-s 1 --no-ceilings --cold-runs 0`), 4 KiB -> advised:
//! W1 5.1-5.3 -> 4.1-4.2, W2 CLANG 4.5-4.8 -> 4.0-4.2, W2 LLVM 5.1-5.3 -> 4.0-4.4, W10 CLANG
//! 9.5-12.4 -> 9.2-10.3, W10 LLVM 12.7-13.2 -> 9.2-10.4, W11 1.9-2.7 -> 1.7-2.4. The C harness,
//! W2's CLANG object on both kinds of input: 2.37-2.42 -> 2.28-2.30 ms best with the input in L3,
//! 4.56-4.61 -> 4.31-4.33 ms median from memory.
//!
//! Not guaranteed: huge pages are only advised (`MADV_HUGEPAGE`): where transparent huge pages
//! are off, or the kernel has no free 2 MiB page, the block is on small pages, as before. A
//! kernel writes through the raw address without taking that lock, so a kernel running on one
//! thread while the host reads or writes the same bytes on another is a race the caller must
//! order (the CLANG program returns only after every one of its threads finished, so a kernel
//! call followed by a read on the same thread is ordered). The contents after a kernel wrote out
//! of bounds are whatever the kernel wrote; this type cannot see it.

use std::alloc::{alloc_zeroed, dealloc, Layout};
use std::fmt;
use std::sync::{Mutex, MutexGuard};

use crate::{bail, ensure, Result};

/// Alignment of small blocks: a cache line, enough for any vector type a kernel loads.
pub const HOST_ALIGN: usize = 64;
/// Alignment of blocks of a page or more.
pub const PAGE_ALIGN: usize = 4096;
/// Alignment of blocks of [`HUGE_MIN`] bytes or more: one transparent huge page on x86-64.
pub const HUGE_ALIGN: usize = 2 << 20;
/// The smallest block that is aligned to [`HUGE_ALIGN`] and advised for huge pages (two huge
/// pages: a smaller block would waste up to half of its alignment padding).
pub const HUGE_MIN: usize = 2 * HUGE_ALIGN;

/// Where a block came from, for freeing it.
enum Backing {
    /// The global allocator, with this layout.
    Heap(Layout),
    /// Its own anonymous mapping of this many bytes (blocks of [`HUGE_MIN`] or more).
    Mapped(usize),
}

/// An owned, zero-initialised, aligned block of host memory.
pub struct HostMemory {
    ptr: *mut u8,
    len: usize,
    backing: Backing,
    /// Serializes host-side accessors on this block.
    lock: Mutex<()>,
}

// SAFETY: `HostMemory` owns its block exclusively (no aliasing owner exists); the pointer is only
// dereferenced inside the accessors, which hold `lock`, so moving the value to another thread or
// sharing `&HostMemory` between threads cannot produce unsynchronized host accesses.
unsafe impl Send for HostMemory {}
// SAFETY: see `Send` above: every host access through `&HostMemory` takes `lock` first.
unsafe impl Sync for HostMemory {}

impl HostMemory {
    /// Allocate `len` zeroed bytes (a zero-length block still gets a distinct, aligned address).
    pub fn new(len: usize) -> Result<HostMemory> {
        if len >= HUGE_MIN {
            return Self::new_mapped(len);
        }
        let align = if len >= PAGE_ALIGN {
            PAGE_ALIGN
        } else {
            HOST_ALIGN
        };
        let Some(alloc_len) = len.max(1).checked_next_multiple_of(align) else {
            bail!(Device, "host alloc of {len} bytes: size overflows");
        };
        let layout = match Layout::from_size_align(alloc_len, align) {
            Ok(l) => l,
            Err(e) => bail!(Device, "host alloc of {len} bytes: bad layout: {e}"),
        };
        // SAFETY: `layout` has a non-zero size (at least `align` bytes) and a power-of-two
        // alignment, which is all `alloc_zeroed` requires.
        let ptr = unsafe { alloc_zeroed(layout) };
        ensure!(
            !ptr.is_null(),
            Device,
            "host alloc of {len} bytes (aligned to {align}) failed: out of memory"
        );
        Ok(HostMemory {
            ptr,
            len,
            backing: Backing::Heap(layout),
            lock: Mutex::new(()),
        })
    }

    /// A block of [`HUGE_MIN`] bytes or more: its own anonymous mapping (zero pages, so no
    /// zeroing pass), trimmed to a [`HUGE_ALIGN`] start and advised `MADV_HUGEPAGE` before
    /// anything touches it, so first touches fault in huge pages.
    fn new_mapped(len: usize) -> Result<HostMemory> {
        let map_len = len
            .checked_next_multiple_of(PAGE_ALIGN)
            .and_then(|l| l.checked_add(HUGE_ALIGN));
        let Some(map_len) = map_len else {
            bail!(Device, "host alloc of {len} bytes: size overflows");
        };
        let size = map_len - HUGE_ALIGN;
        let prot = libc::PROT_READ | libc::PROT_WRITE;
        let flags = libc::MAP_PRIVATE | libc::MAP_ANONYMOUS;
        // SAFETY: a fresh private anonymous mapping at an address the kernel picks: it aliases
        // nothing in this process.
        let base = unsafe { libc::mmap(std::ptr::null_mut(), map_len, prot, flags, -1, 0) };
        ensure!(
            base != libc::MAP_FAILED,
            Device,
            "host alloc of {len} bytes: mmap of {map_len} bytes failed: {}",
            std::io::Error::last_os_error()
        );
        let start = base as usize;
        let head = start.next_multiple_of(HUGE_ALIGN) - start;
        let tail = HUGE_ALIGN - head;
        let ptr = (start + head) as *mut u8;
        // A failed unmap leaves an end mapped (a leak of at most 2 MiB, not a fault); a failed
        // advice (THP off) leaves the block on small pages.
        // SAFETY: `[base, base + head)` and `[ptr + size, ptr + size + tail)` are the page-aligned
        // ends of the mapping just made, outside the block kept, referred to by nothing; the
        // advice changes only how the kernel backs the block's pages, never their contents.
        unsafe {
            if head > 0 {
                libc::munmap(base, head);
            }
            if tail > 0 {
                libc::munmap(ptr.add(size).cast(), tail);
            }
            libc::madvise(ptr.cast(), size, libc::MADV_HUGEPAGE);
        }
        Ok(HostMemory {
            ptr,
            len,
            backing: Backing::Mapped(size),
            lock: Mutex::new(()),
        })
    }

    /// The address kernels use.
    pub fn addr(&self) -> u64 {
        self.ptr as u64
    }

    /// Usable length in bytes.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether the block holds no bytes.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Whether `[addr, addr + size)` lies inside this block.
    pub fn contains(&self, addr: u64, size: usize) -> bool {
        let start = self.addr();
        match (addr.checked_sub(start), u64::try_from(size)) {
            (Some(off), Ok(size)) => off
                .checked_add(size)
                .is_some_and(|end| end <= self.len as u64),
            _ => false,
        }
    }

    /// The byte offset of `addr` inside this block, when `[addr, addr + size)` lies inside it.
    pub fn offset_of(&self, addr: u64, size: usize) -> Result<usize> {
        ensure!(
            self.contains(addr, size),
            Device,
            "host memory: range {addr:#x}+{size} is outside the block {:#x}+{}",
            self.addr(),
            self.len
        );
        // Cannot truncate: the offset is below `self.len`, a usize.
        Ok((addr - self.addr()) as usize)
    }

    fn check(&self, op: &str, offset: usize, n: usize) -> Result<()> {
        ensure!(
            offset.checked_add(n).is_some_and(|end| end <= self.len),
            InvalidArgument,
            "host memory {op}: {n} bytes at offset {offset} exceed the block of {} bytes",
            self.len
        );
        Ok(())
    }

    fn guard(&self) -> MutexGuard<'_, ()> {
        self.lock.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Copy `dst.len()` bytes starting at `offset` to `dst`.
    pub fn read(&self, offset: usize, dst: &mut [u8]) -> Result<()> {
        self.check("read", offset, dst.len())?;
        let _g = self.guard();
        // SAFETY: `check` proved `offset + dst.len() <= self.len`, so the source range lies inside
        // the live block; `dst` is a distinct Rust borrow, so the ranges do not overlap; the lock
        // excludes concurrent host writes (kernel writes are the caller's ordering, see module doc).
        unsafe { std::ptr::copy_nonoverlapping(self.ptr.add(offset), dst.as_mut_ptr(), dst.len()) };
        Ok(())
    }

    /// Copy `src` into the block starting at `offset`.
    pub fn write(&self, offset: usize, src: &[u8]) -> Result<()> {
        self.check("write", offset, src.len())?;
        let _g = self.guard();
        // SAFETY: the destination range is inside the live block (`check`), `src` is a distinct
        // Rust borrow (no overlap), and the lock excludes concurrent host accesses.
        unsafe { std::ptr::copy_nonoverlapping(src.as_ptr(), self.ptr.add(offset), src.len()) };
        Ok(())
    }

    /// Set `len` bytes starting at `offset` to `value`.
    pub fn fill(&self, offset: usize, len: usize, value: u8) -> Result<()> {
        self.check("fill", offset, len)?;
        let _g = self.guard();
        // SAFETY: the range is inside the live block (`check`) and the lock excludes concurrent
        // host accesses.
        unsafe { std::ptr::write_bytes(self.ptr.add(offset), value, len) };
        Ok(())
    }

    /// Copy `len` bytes from `src` at `src_offset` to this block at `dst_offset`. `src` may be this
    /// block; overlapping ranges copy as if through a temporary buffer.
    pub fn copy_from(
        &self,
        dst_offset: usize,
        src: &HostMemory,
        src_offset: usize,
        len: usize,
    ) -> Result<()> {
        self.check("copy (destination)", dst_offset, len)?;
        src.check("copy (source)", src_offset, len)?;
        let same = std::ptr::eq(self, src);
        // Lock both blocks in address order so two opposite copies cannot deadlock.
        let (_a, _b) = if same {
            (self.guard(), None)
        } else if self.addr() < src.addr() {
            let a = self.guard();
            (a, Some(src.guard()))
        } else {
            let b = src.guard();
            (self.guard(), Some(b))
        };
        // SAFETY: both ranges lie inside live blocks (`check` on each); `copy` allows overlap,
        // which happens only when `src` is `self`; both locks are held, so no other host access
        // to either block runs meanwhile.
        unsafe { std::ptr::copy(src.ptr.add(src_offset), self.ptr.add(dst_offset), len) };
        Ok(())
    }

    /// The block's contents as a new vector.
    pub fn to_vec(&self) -> Vec<u8> {
        let mut out = vec![0u8; self.len];
        // Cannot fail: the whole block is in bounds.
        let _ = self.read(0, &mut out);
        out
    }
}

impl Drop for HostMemory {
    fn drop(&mut self) {
        match self.backing {
            // SAFETY: `ptr` came from `alloc_zeroed(layout)` in `new` and is freed only here,
            // once, when the last owner drops the block.
            Backing::Heap(layout) => unsafe { dealloc(self.ptr, layout) },
            // SAFETY: `[ptr, ptr + size)` is the mapping `new_mapped` kept, unmapped only here,
            // once; a failure leaves it mapped (a leak, not a fault).
            Backing::Mapped(size) => unsafe {
                libc::munmap(self.ptr.cast(), size);
            },
        }
    }
}

impl fmt::Debug for HostMemory {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "HostMemory({:#x}, {} bytes)", self.addr(), self.len)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn zeroed_aligned_and_bounds_checked() {
        let m = HostMemory::new(100).unwrap();
        assert_eq!(m.addr() % HOST_ALIGN as u64, 0);
        assert_eq!(m.len(), 100);
        assert!(m.to_vec().iter().all(|&b| b == 0));
        m.write(96, &[1, 2, 3, 4]).unwrap();
        let mut out = [0u8; 4];
        m.read(96, &mut out).unwrap();
        assert_eq!(out, [1, 2, 3, 4]);
        let e = m.write(97, &[1, 2, 3, 4]).unwrap_err();
        assert!(e.message().contains("exceed the block of 100 bytes"), "{e}");
        assert!(m.read(usize::MAX, &mut out).is_err());
        assert!(m.fill(0, 101, 7).is_err());
        m.fill(10, 5, 7).unwrap();
        assert_eq!(&m.to_vec()[9..16], &[0, 7, 7, 7, 7, 7, 0]);
    }

    #[test]
    fn page_alignment_and_empty_blocks() {
        let big = HostMemory::new(3 * PAGE_ALIGN + 5).unwrap();
        assert_eq!(big.addr() % PAGE_ALIGN as u64, 0);
        let empty = HostMemory::new(0).unwrap();
        assert!(empty.is_empty());
        assert!(empty.contains(empty.addr(), 0));
        assert!(!empty.contains(empty.addr(), 1));
        assert!(HostMemory::new(usize::MAX - 10).is_err());
    }

    #[test]
    fn huge_blocks_are_2mib_aligned_and_zeroed() {
        let just_below = HostMemory::new(HUGE_MIN - 1).unwrap();
        assert_eq!(just_below.addr() % PAGE_ALIGN as u64, 0);
        let n = HUGE_MIN + 3;
        let m = HostMemory::new(n).unwrap();
        assert_eq!(m.addr() % HUGE_ALIGN as u64, 0);
        assert_eq!(m.len(), n);
        assert!(m.to_vec().iter().all(|&b| b == 0));
        m.write(n - 4, &[9, 8, 7, 6]).unwrap();
        let mut out = [0u8; 4];
        m.read(n - 4, &mut out).unwrap();
        assert_eq!(out, [9, 8, 7, 6]);
        assert!(m.write(n - 3, &[0; 4]).is_err());
        // A block freed and allocated again (possibly the same memory) is zeroed again.
        m.fill(0, n, 0xff).unwrap();
        drop(m);
        let again = HostMemory::new(n).unwrap();
        assert!(again.to_vec().iter().all(|&b| b == 0));
    }

    #[test]
    fn copies_between_and_within_blocks() {
        let a = HostMemory::new(16).unwrap();
        let b = HostMemory::new(16).unwrap();
        a.write(0, &(0u8..16).collect::<Vec<_>>()).unwrap();
        b.copy_from(4, &a, 0, 8).unwrap();
        assert_eq!(&b.to_vec()[..13], &[0, 0, 0, 0, 0, 1, 2, 3, 4, 5, 6, 7, 0]);
        // Overlapping copy inside one block behaves like memmove.
        a.copy_from(2, &a, 0, 8).unwrap();
        assert_eq!(&a.to_vec()[..10], &[0, 1, 0, 1, 2, 3, 4, 5, 6, 7]);
        assert!(a.copy_from(10, &b, 0, 8).is_err());
        assert_eq!(a.offset_of(a.addr() + 3, 13).unwrap(), 3);
        assert!(a.offset_of(a.addr() + 3, 14).is_err());
        assert!(a.offset_of(a.addr().wrapping_sub(1), 1).is_err());
    }
}
