use std::sync::atomic::{AtomicUsize, Ordering};

use super::*;
use crate::device::testing::register_host_family;

#[test]
fn canonicalize_like_tinygrad() {
    let cases = [
        ("CLANG", "CLANG"),
        ("clang", "CLANG"),
        ("GPU:0", "GPU"),
        ("gpu:0", "GPU"),
        ("GPU:1", "GPU:1"),
        ("amd:1", "AMD:1"),
        ("AMD:10", "AMD:10"),
        ("disk:/dev/shm/test", "DISK:/dev/shm/test"),
        ("disk:000.txt", "DISK:000.txt"),
        ("disk:/tmp/A:0", "DISK:/tmp/A"),
    ];
    for (inp, want) in cases {
        assert_eq!(canonicalize(inp), want, "canonicalize({inp:?})");
    }
    assert_eq!(device_family("amd:1"), "AMD");
}

#[test]
fn opens_once_and_caches() {
    static OPENS: AtomicUsize = AtomicUsize::new(0);
    register_family("RGTEST_ONCE", |name| {
        OPENS.fetch_add(1, Ordering::SeqCst);
        crate::device::testing::host_compiled(name)
    });
    let a = open_registered("rgtest_once").unwrap();
    let b = open_registered("RGTEST_ONCE:0").unwrap();
    assert!(Arc::ptr_eq(&a, &b));
    assert_eq!(a.name, "RGTEST_ONCE");
    let c = open_registered("rgtest_once:1").unwrap();
    assert_eq!(c.name, "RGTEST_ONCE:1");
    assert_eq!(c.family(), "RGTEST_ONCE");
    assert!(!Arc::ptr_eq(&a, &c));
    assert_eq!(OPENS.load(Ordering::SeqCst), 2);
    assert!(opened_devices().contains(&"RGTEST_ONCE:1".to_string()));
    c.synchronize().unwrap();
    // Opening from many threads at once still opens once.
    std::thread::scope(|s| {
        for _ in 0..4 {
            s.spawn(|| open_registered("RGTEST_ONCE:2").unwrap());
        }
    });
    assert_eq!(OPENS.load(Ordering::SeqCst), 3);
}

#[test]
fn unknown_and_failing_devices_are_errors() {
    let e = open_registered("rgtest_nosuch:3").unwrap_err();
    assert!(matches!(e, Error::Device(_)));
    assert!(
        e.message().contains("unknown device RGTEST_NOSUCH:3"),
        "{e}"
    );
    static TRIES: AtomicUsize = AtomicUsize::new(0);
    register_family("RGTEST_FAIL", |_| {
        TRIES.fetch_add(1, Ordering::SeqCst);
        Err(Error::Driver("no /dev/rgtest".into()))
    });
    let e = open_registered("RGTEST_FAIL").unwrap_err();
    assert!(
        e.message()
            .contains("opening device RGTEST_FAIL: no /dev/rgtest"),
        "{e}"
    );
    // Failures are not cached.
    assert!(open_registered("RGTEST_FAIL").is_err());
    assert_eq!(TRIES.load(Ordering::SeqCst), 2);
    assert!(!opened_devices().contains(&"RGTEST_FAIL".to_string()));
}

#[test]
fn registering_if_absent_keeps_the_first_opener() {
    register_family("RGTEST_ABSENT", |_| Err(Error::Driver("the first".into())));
    let added =
        register_family_if_absent("rgtest_absent", |_| Err(Error::Driver("the second".into())));
    assert!(!added);
    let e = open_registered("RGTEST_ABSENT").unwrap_err();
    assert!(e.message().contains("the first"), "{e}");
    assert!(register_family_if_absent("RGTEST_ABSENT_NEW", |_| {
        Err(Error::Driver("new".into()))
    }));
    assert!(is_registered("rgtest_absent_new"));
}

#[test]
fn default_by_availability_skips_unregistered_and_failing() {
    register_family("RGTEST_AVAIL_BAD", |_| Err(Error::Driver("absent".into())));
    register_host_family("RGTEST_AVAIL_OK");
    let order = ["RGTEST_AVAIL_UNREG", "RGTEST_AVAIL_BAD", "RGTEST_AVAIL_OK"];
    assert_eq!(select_available(&order).unwrap(), "RGTEST_AVAIL_OK");
    let e = select_available(&order[..2]).unwrap_err();
    assert!(e.message().contains("no usable device"), "{e}");
    assert!(e.message().contains("absent"), "{e}");
}
