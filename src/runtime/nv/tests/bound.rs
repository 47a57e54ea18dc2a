//! Bound pushbuffers ([`crate::runtime::nv::bound::BoundPush`]): a replay that changes only
//! signal values rewrites exactly the dwords that changed in the image it takes, and every image
//! taken holds the queue's host dwords, over many alternating replays.

use super::*;
use crate::hcq::{HcqBackend, HwQueue};
use crate::runtime::nv::process::lock;
use crate::runtime::nv::queue::NvStream;

#[test]
fn a_bound_queue_rewrites_only_the_changed_dwords_of_each_image() {
    let (dev, _emu) = one_gpu();
    let b = dev.backend();
    let (s1, s2) = (dev.new_signal(0).unwrap(), dev.new_signal(0).unwrap());
    let mut q = b.compute_queue();
    let w = q.wait(&s1, 5).unwrap().into_patch();
    let s = q.signal(&s2, 7).unwrap().into_patch();
    assert!(q.bind(b).unwrap(), "an NV queue binds");
    let take = |q: &super::super::queue::NvComputeQueue| -> (usize, Vec<u32>, usize) {
        let m = q.encoder().bound().expect("bound");
        let mut bp = lock(m);
        let i = bp.next_image();
        bp.take_next(q.dwords()).unwrap();
        let img = bp.image_dwords(i).unwrap();
        (bp.last_written(), img, i)
    };
    // nothing patched: nothing to write
    assert_eq!(take(&q).0, 0);
    q.update_wait(&w, None, Some(6)).unwrap();
    // the next image takes the low dword of the wait; the image after it catches up alike
    let (n, img, _) = take(&q);
    assert_eq!((n, img.as_slice()), (1, q.dwords()));
    let (n, img, _) = take(&q);
    assert_eq!((n, img.as_slice()), (1, q.dwords()));
    assert_eq!(take(&q).0, 0, "both images current");
    // a value crossing 2^32 changes the high dword only (the low one stays 6)
    q.update_wait(&w, None, Some((1 << 32) | 6)).unwrap();
    assert_eq!(take(&q).0, 1);
    // replays with a rising base: two values a run, each image two runs behind
    for base in 100u64..160 {
        q.update_wait(&w, None, Some(base)).unwrap();
        q.update_signal(&s, None, Some(base + 1)).unwrap();
        let (n, img, _) = take(&q);
        assert_eq!(img.as_slice(), q.dwords(), "run at base {base}");
        assert!(n <= 6, "run at base {base}: {n} dwords written");
    }
    // many patches without a submission: the one dword they changed is written once (the
    // first image also lacks the last run's wait value)
    for v in 0..2000u64 {
        q.update_signal(&s, None, Some(v)).unwrap();
    }
    let (n, img, _) = take(&q);
    assert_eq!((n, img.as_slice()), (2, q.dwords()));
    let (n, img, _) = take(&q);
    assert_eq!(
        (n, img.as_slice()),
        (1, q.dwords()),
        "the other image: the signal only"
    );
}
