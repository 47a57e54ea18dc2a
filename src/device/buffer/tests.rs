use std::collections::HashSet;
use std::sync::atomic::AtomicUsize;

use super::*;
use crate::device::allocator::HostAllocator;
use crate::device::registry::{register_family, Compiled};
use crate::device::testing::{register_host_family, EchoCompiler, NoRuntime, TestRenderer};
use crate::dtypes;

/// Counts the allocations, frees and views that reach the device (no LRU in between).
#[derive(Default)]
struct Counting {
    allocs: AtomicUsize,
    frees: AtomicUsize,
    offsets: AtomicUsize,
}

impl Allocator for Counting {
    fn alloc(&self, size: usize, opts: &BufferOptions) -> Result<RawBuf> {
        self.allocs.fetch_add(1, Ordering::SeqCst);
        HostAllocator.alloc(size, opts)
    }
    fn free(&self, buf: RawBuf, size: usize, opts: &BufferOptions) {
        self.frees.fetch_add(1, Ordering::SeqCst);
        HostAllocator.free(buf, size, opts)
    }
    fn copyin(&self, dst: &RawBuf, src: &[u8]) -> Result<()> {
        HostAllocator.copyin(dst, src)
    }
    fn copyout(&self, dst: &mut [u8], src: &RawBuf) -> Result<()> {
        HostAllocator.copyout(dst, src)
    }
    fn offset(&self, buf: &RawBuf, size: usize, offset: usize) -> Result<RawBuf> {
        self.offsets.fetch_add(1, Ordering::SeqCst);
        HostAllocator.offset(buf, size, offset)
    }
}

/// A device family of its own per test, so counts are not shared between parallel tests.
fn counting_device(family: &str) -> Arc<Counting> {
    let counter = Arc::new(Counting::default());
    let c = Arc::clone(&counter);
    register_family(family, move |name| {
        Ok(Compiled {
            name: name.to_string(),
            allocator: c.clone(),
            compiler: Arc::new(EchoCompiler(None)),
            runtime: Arc::new(NoRuntime),
            renderer: Arc::new(TestRenderer::new(name)),
        })
    });
    counter
}

fn f32_bytes(xs: &[f32]) -> Vec<u8> {
    xs.iter().flat_map(|x| x.to_le_bytes()).collect()
}

#[test]
fn lazy_allocation_and_copies() {
    let cnt = counting_device("RGTEST_BUF_LAZY");
    let b = Buffer::new(
        "rgtest_buf_lazy",
        4,
        dtypes::float32,
        BufferOptions::default(),
    );
    assert_eq!(b.device(), "RGTEST_BUF_LAZY");
    assert_eq!(b.nbytes(), 16);
    assert!(!b.is_allocated());
    assert_eq!(cnt.allocs.load(Ordering::SeqCst), 0);
    let e = b.as_bytes().unwrap_err();
    assert!(e.message().contains("can't copyout unallocated"), "{e}");
    assert!(b.raw().is_err());
    let addr = b.ensure_allocated().unwrap().addr;
    assert_eq!(b.ensure_allocated().unwrap().addr, addr);
    assert_eq!(cnt.allocs.load(Ordering::SeqCst), 1);
    b.copyin(&f32_bytes(&[1.0, 2.0, 3.0, 4.0])).unwrap();
    assert_eq!(b.as_bytes().unwrap(), f32_bytes(&[1.0, 2.0, 3.0, 4.0]));
    let e = b.copyin(&[0u8; 12]).unwrap_err();
    assert!(
        e.message().contains("copyin size mismatch: 12 bytes"),
        "{e}"
    );
    let mut small = [0u8; 8];
    assert!(b.copyout(&mut small).is_err());
    let init = Buffer::with_initial(
        "RGTEST_BUF_LAZY",
        2,
        dtypes::int32,
        BufferOptions::default(),
        &[1, 0, 0, 0, 2, 0, 0, 0],
    )
    .unwrap();
    assert!(init.is_allocated());
    assert_eq!(init.as_bytes().unwrap(), vec![1, 0, 0, 0, 2, 0, 0, 0]);
}

#[test]
fn views_share_memory_and_keep_base_alive() {
    let cnt = counting_device("RGTEST_BUF_VIEW");
    let base = Buffer::new(
        "RGTEST_BUF_VIEW",
        8,
        dtypes::float32,
        BufferOptions::default(),
    );
    let v = base.view(2, dtypes::float32, 8).unwrap();
    assert!(v.is_view());
    assert_eq!(v.base(), base);
    assert_eq!(v.offset(), 8);
    // Allocating the view allocates the base first.
    v.ensure_allocated().unwrap();
    assert!(base.is_allocated());
    assert_eq!(v.raw().unwrap().addr, base.raw().unwrap().addr + 8);
    assert_eq!(cnt.offsets.load(Ordering::SeqCst), 1);
    v.copyin(&f32_bytes(&[5.0, 6.0])).unwrap();
    assert_eq!(
        base.as_bytes().unwrap(),
        f32_bytes(&[0.0, 0.0, 5.0, 6.0, 0.0, 0.0, 0.0, 0.0])
    );
    // A view of a view is a view of the base at the summed offset, in another dtype.
    let vv = v.view(4, dtypes::uint8, 4).unwrap();
    assert_eq!(vv.base(), base);
    assert_eq!(vv.offset(), 12);
    vv.ensure_allocated().unwrap();
    assert_eq!(vv.as_bytes().unwrap(), 6.0f32.to_le_bytes().to_vec());
    assert!(base.view(usize::MAX, dtypes::float32, 0).is_err());
    assert!(v.view(1, dtypes::float32, usize::MAX).is_err());
    let e = base.view(3, dtypes::float32, 24).unwrap_err();
    assert!(e.message().contains("exceeds the base of 32 bytes"), "{e}");
    // Dropping the base handle does not free while views live; views free nothing themselves.
    drop(base);
    drop(vv);
    assert_eq!(cnt.frees.load(Ordering::SeqCst), 0);
    assert_eq!(v.as_bytes().unwrap(), f32_bytes(&[5.0, 6.0]));
    drop(v);
    assert_eq!(cnt.frees.load(Ordering::SeqCst), 1);
    assert_eq!(cnt.allocs.load(Ordering::SeqCst), 1);
}

#[test]
fn drop_frees_and_accounts_mem_used() {
    let cnt = counting_device("RGTEST_BUF_DROP");
    let unallocated = Buffer::new("RGTEST_BUF_DROP", 4, dtypes::int8, BufferOptions::default());
    drop(unallocated);
    assert_eq!(cnt.frees.load(Ordering::SeqCst), 0);
    // 64 MiB (lazily zeroed pages): large enough that other tests' traffic cannot mask it.
    const N: usize = 64 << 20;
    const SLACK: i64 = 1 << 20;
    let before = GlobalCounters::mem_used();
    let b = Buffer::new(
        "RGTEST_BUF_DROP",
        N / 4,
        dtypes::float32,
        BufferOptions::default(),
    );
    b.ensure_allocated().unwrap();
    let during = GlobalCounters::mem_used();
    assert!(
        (during - before - N as i64).abs() < SLACK,
        "{before} -> {during}"
    );
    drop(b);
    let after = GlobalCounters::mem_used();
    assert!(
        (during - after - N as i64).abs() < SLACK,
        "{during} -> {after}"
    );
    assert_eq!(cnt.frees.load(Ordering::SeqCst), 1);
}

#[test]
fn lru_device_reuses_freed_memory() {
    register_host_family("RGTEST_BUF_LRU");
    let a = Buffer::new(
        "RGTEST_BUF_LRU",
        16,
        dtypes::float32,
        BufferOptions::default(),
    );
    let addr = a.ensure_allocated().unwrap().addr;
    drop(a);
    let b = Buffer::new(
        "RGTEST_BUF_LRU",
        16,
        dtypes::float32,
        BufferOptions::default(),
    );
    assert_eq!(b.ensure_allocated().unwrap().addr, addr);
    let nolru = BufferOptions {
        nolru: true,
        ..Default::default()
    };
    let c = Buffer::new("RGTEST_BUF_LRU", 16, dtypes::float32, nolru);
    assert_ne!(c.ensure_allocated().unwrap().addr, addr);
}

#[test]
fn refcount_identity_and_errors() {
    register_host_family("RGTEST_BUF_REF");
    let a = Buffer::new(
        "RGTEST_BUF_REF",
        4,
        dtypes::float32,
        BufferOptions::default(),
    );
    let a2 = a.clone();
    let b = Buffer::new(
        "RGTEST_BUF_REF",
        4,
        dtypes::float32,
        BufferOptions::default(),
    );
    assert_eq!(a, a2);
    assert_ne!(a, b);
    let set: HashSet<BufferRef> = [a.clone(), a2.clone(), b.clone()].into_iter().collect();
    assert_eq!(set.len(), 2);
    let v = a.view(1, dtypes::float32, 4).unwrap();
    a.lb_ref(2);
    v.lb_ref(1);
    assert_eq!(a.lb_refcount(), 3);
    assert_eq!(v.lb_refcount(), 3);
    a2.lb_ref(-3);
    assert_eq!(a.lb_refcount(), 0);
    assert_eq!(
        format!("{v:?}"),
        "<buf real:false device:RGTEST_BUF_REF size:1 dtype:dtypes.float offset:4>"
    );
    let huge = Buffer::new(
        "RGTEST_BUF_REF",
        usize::MAX,
        dtypes::float32,
        BufferOptions::default(),
    );
    assert!(huge.ensure_allocated().is_err());
    let bad = Buffer::new(
        "rgtest_buf_nosuch:1",
        4,
        dtypes::float32,
        BufferOptions::default(),
    );
    let e = bad.ensure_allocated().unwrap_err();
    assert!(
        e.message().contains("unknown device RGTEST_BUF_NOSUCH:1"),
        "{e}"
    );
}
