use std::sync::atomic::{AtomicUsize, Ordering};

use super::*;
use crate::helpers::Context;

/// A host allocator that counts real allocations and frees, and refuses to hold more than
/// `limit` bytes at once (to exercise the LRU's flush-and-retry).
struct Counting {
    allocs: AtomicUsize,
    frees: AtomicUsize,
    live_bytes: AtomicUsize,
    limit: usize,
}

impl Counting {
    fn new(limit: usize) -> Self {
        Counting {
            allocs: AtomicUsize::new(0),
            frees: AtomicUsize::new(0),
            live_bytes: AtomicUsize::new(0),
            limit,
        }
    }
}

impl Allocator for Counting {
    fn alloc(&self, size: usize, opts: &BufferOptions) -> Result<RawBuf> {
        let live = self.live_bytes.load(Ordering::SeqCst);
        ensure!(
            live + size <= self.limit,
            Device,
            "out of memory: {live} + {size} > {}",
            self.limit
        );
        self.allocs.fetch_add(1, Ordering::SeqCst);
        self.live_bytes.fetch_add(size, Ordering::SeqCst);
        HostAllocator.alloc(size, opts)
    }
    fn free(&self, buf: RawBuf, size: usize, opts: &BufferOptions) {
        self.frees.fetch_add(1, Ordering::SeqCst);
        self.live_bytes.fetch_sub(size, Ordering::SeqCst);
        HostAllocator.free(buf, size, opts)
    }
    fn copyin(&self, dst: &RawBuf, src: &[u8]) -> Result<()> {
        HostAllocator.copyin(dst, src)
    }
    fn copyout(&self, dst: &mut [u8], src: &RawBuf) -> Result<()> {
        HostAllocator.copyout(dst, src)
    }
}

#[test]
fn host_alloc_copyin_copyout() {
    let a = HostAllocator;
    let opts = BufferOptions::default();
    let b = a.alloc(16, &opts).unwrap();
    assert_eq!(b.size, 16);
    let mut out = [9u8; 16];
    a.copyout(&mut out, &b).unwrap();
    assert_eq!(out, [0u8; 16], "fresh host memory is zeroed");
    let data: Vec<u8> = (1..=16).collect();
    a.copyin(&b, &data).unwrap();
    a.copyout(&mut out, &b).unwrap();
    assert_eq!(out.to_vec(), data);
    let e = a.copyin(&b, &[0u8; 17]).unwrap_err();
    assert!(e.message().contains("17 bytes into a buffer of 16"), "{e}");
    let mut big = [0u8; 17];
    assert!(a.copyout(&mut big, &b).is_err());
}

#[test]
fn host_offset_views_share_memory() {
    let a = HostAllocator;
    let b = a.alloc(16, &BufferOptions::default()).unwrap();
    let v = a.offset(&b, 8, 4).unwrap();
    assert_eq!(v.addr, b.addr + 4);
    a.copyin(&v, &[7u8; 8]).unwrap();
    let mut out = [0u8; 16];
    a.copyout(&mut out, &b).unwrap();
    assert_eq!(
        &out[..],
        &[0, 0, 0, 0, 7, 7, 7, 7, 7, 7, 7, 7, 0, 0, 0, 0][..]
    );
    // A view of a view stays inside the base block.
    let vv = a.offset(&v, 2, 6).unwrap();
    assert_eq!(vv.addr, b.addr + 10);
    let e = a.offset(&v, 8, 1).unwrap_err();
    assert!(e.message().contains("exceeds the buffer of 8 bytes"), "{e}");
    assert!(a.offset(&b, 1, usize::MAX).is_err());
    // The view keeps the block alive after the base handle is freed.
    a.free(b, 16, &BufferOptions::default());
    let mut got = [0u8; 8];
    a.copyout(&mut got, &v).unwrap();
    assert_eq!(got, [7u8; 8]);
}

#[test]
fn host_transfer_and_foreign_owner() {
    let a = HostAllocator;
    let opts = BufferOptions::default();
    let x = a.alloc(8, &opts).unwrap();
    let y = a.alloc(8, &opts).unwrap();
    a.copyin(&x, &[1, 2, 3, 4, 5, 6, 7, 8]).unwrap();
    a.transfer(&y, &x, 8).unwrap();
    let mut out = [0u8; 8];
    a.copyout(&mut out, &y).unwrap();
    assert_eq!(out, [1, 2, 3, 4, 5, 6, 7, 8]);
    assert!(a.transfer(&y, &x, 9).is_err());
    let foreign = RawBuf {
        addr: 0x1000,
        size: 8,
        owner: Arc::new(5u32),
    };
    let e = a.copyin(&foreign, &[0; 4]).unwrap_err();
    assert!(e.message().contains("is not host memory"), "{e}");
    // An addr that does not lie in its owner's block is refused.
    let forged = RawBuf {
        addr: x.addr + 4,
        size: 8,
        owner: Arc::clone(&x.owner),
    };
    assert!(a.copyin(&forged, &[0; 8]).is_err());
}

#[test]
fn lru_reuses_by_size_and_options() {
    let lru = LruAllocator::new(Counting::new(1 << 20));
    let opts = BufferOptions::default();
    let b = lru.alloc(64, &opts).unwrap();
    let addr = b.addr;
    lru.free(b, 64, &opts);
    assert_eq!(lru.cached_count(), 1);
    assert_eq!(lru.cached_bytes(), 64);
    assert_eq!(lru.inner().frees.load(Ordering::SeqCst), 0);
    // Same key: reused, no new allocation.
    let again = lru.alloc(64, &opts).unwrap();
    assert_eq!(again.addr, addr);
    assert_eq!(lru.inner().allocs.load(Ordering::SeqCst), 1);
    // Other size or other options: fresh allocations.
    lru.free(again, 64, &opts);
    let other = lru.alloc(32, &opts).unwrap();
    let host = BufferOptions { host: true, ..opts };
    let hostbuf = lru.alloc(64, &host).unwrap();
    assert_eq!(lru.inner().allocs.load(Ordering::SeqCst), 3);
    assert_eq!(lru.cached_count(), 1);
    lru.free(other, 32, &opts);
    lru.free(hostbuf, 64, &host);
    assert_eq!(lru.cached_count(), 3);
    lru.free_cache();
    assert_eq!(lru.cached_count(), 0);
    assert_eq!(lru.inner().frees.load(Ordering::SeqCst), 3);
    assert_eq!(lru.inner().live_bytes.load(Ordering::SeqCst), 0);
}

#[test]
fn lru_nolru_and_lru_knob_free_for_real() {
    let lru = LruAllocator::new(Counting::new(1 << 20));
    let nolru = BufferOptions {
        nolru: true,
        ..Default::default()
    };
    let b = lru.alloc(16, &nolru).unwrap();
    lru.free(b, 16, &nolru);
    assert_eq!(lru.cached_count(), 0);
    assert_eq!(lru.inner().frees.load(Ordering::SeqCst), 1);

    let opts = BufferOptions::default();
    let _g = Context::new(&[("LRU", 0)]);
    let b = lru.alloc(16, &opts).unwrap();
    lru.free(b, 16, &opts);
    assert_eq!(lru.cached_count(), 0);
    assert_eq!(lru.inner().frees.load(Ordering::SeqCst), 2);
}

#[test]
fn lru_flushes_cache_and_retries_on_failure() {
    let lru = LruAllocator::new(Counting::new(100));
    let opts = BufferOptions::default();
    let a = lru.alloc(60, &opts).unwrap();
    lru.free(a, 60, &opts);
    // 60 bytes sit in the cache; 50 more exceed the limit until the cache is flushed.
    let b = lru.alloc(50, &opts).unwrap();
    assert_eq!(b.size, 50);
    assert_eq!(lru.cached_count(), 0);
    assert_eq!(lru.inner().frees.load(Ordering::SeqCst), 1);
    // A request that fails even with an empty cache reports both attempts.
    let e = lru.alloc(80, &opts).unwrap_err();
    assert!(matches!(e, Error::Device(_)));
    assert!(e.message().contains("after freeing the LRU cache"), "{e}");
    assert!(e.message().contains("out of memory: 50 + 80 > 100"), "{e}");
}

#[test]
fn lru_forwards_views_and_copies() {
    let lru = LruAllocator::new(HostAllocator);
    let opts = BufferOptions::default();
    let b = lru.alloc(8, &opts).unwrap();
    lru.copyin(&b, &[1, 2, 3, 4, 5, 6, 7, 8]).unwrap();
    let v = lru.offset(&b, 4, 4).unwrap();
    let mut out = [0u8; 4];
    lru.copyout(&mut out, &v).unwrap();
    assert_eq!(out, [5, 6, 7, 8]);
    let c = lru.alloc(4, &opts).unwrap();
    lru.transfer(&c, &v, 4).unwrap();
    lru.copyout(&mut out, &c).unwrap();
    assert_eq!(out, [5, 6, 7, 8]);
}
