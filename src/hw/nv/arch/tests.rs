//! Arch table tests: consistency, lookups, class selection, derived values.

use super::*;

#[test]
fn table_is_consistent() {
    for a in NV_ARCHS {
        assert_eq!(a.qmd_size, a.qmd_version.size(), "{}", a.compute_class_name);
        assert!(!a.copy_classes.is_empty() && !a.channel_classes.is_empty());
        assert!(!a.usermode_classes.is_empty() && !a.sm_versions.is_empty());
        assert_eq!(a.shared_window % a.shared_window_align, 0, "{}", a.name);
        assert!(a.shared_window < 1 << 49 && a.local_window < 1 << 49);
        assert!(a.cbuf0.param_base > a.cbuf0.global_mem_desc);
        assert!(a.shared_mem_configs_kib.windows(2).all(|w| w[0] < w[1]));
        assert!(std::ptr::eq(
            arch_for_compute_class(a.compute_class).unwrap(),
            a
        ));
        assert_eq!(class_name(a.compute_class), Some(a.compute_class_name));
        for sm in a.sm_versions {
            assert!(std::ptr::eq(arch_for_sm(*sm).unwrap(), a));
        }
    }
    assert_eq!(HOPPER_COMPUTE_A.cbuf0.param_base, 0x210);
    assert_eq!(ADA_COMPUTE_A.cbuf0.param_base, 0x160);
    assert_eq!(BLACKWELL_COMPUTE_B.cbuf0.param_base, 0x380);
    assert_eq!(HOPPER_COMPUTE_A.shared_window, 0x1_0000_0000);
}

#[test]
fn lookups_fail_with_the_known_list() {
    let e = arch_for_compute_class(0xCBA0).unwrap_err().to_string();
    assert!(
        e.contains("0xcba0") && e.contains("HOPPER_COMPUTE_A=0xcbc0"),
        "{e}"
    );
    assert!(arch_for_sm(75).is_err());
    assert_eq!(class_name(0xC8B5), Some("HOPPER_DMA_COPY_A"));
    assert_eq!(class_name(0xC661), Some("HOPPER_USERMODE_A"));
    assert_eq!(class_name(0x1234), None);
}

#[test]
fn selection_from_a_class_list() {
    // GH100's list (g_gpu_class_list.c): Hopper compute/copy, both channel and usermode
    // generations.
    let gh100 = [
        0xC361, 0xC461, 0xC561, 0xC661, 0xC36F, 0xC56F, 0xC86F, 0xCBC0, 0xC8B5,
    ];
    let c = select_classes(&gh100).unwrap();
    assert_eq!(c.arch, &HOPPER_COMPUTE_A);
    assert_eq!(c.channel, &HOPPER_CHANNEL_GPFIFO_A);
    assert_eq!(c.copy, &HOPPER_DMA_COPY_A);
    assert_eq!(c.usermode, 0xC661);
    // Hopper without its own channel class falls back to Ampere's (40-bit semaphores).
    let c = select_classes(&[0xC561, 0xC56F, 0xCBC0, 0xC8B5]).unwrap();
    assert_eq!(c.channel.sem_addr_bits, 40);
    // AD102: Ada compute, Ampere copy/channel.
    let c = select_classes(&[0xC461, 0xC561, 0xC56F, 0xC9C0, 0xC7B5, 0xC997]).unwrap();
    assert_eq!(c.arch.name, "ada");
    let e = select_classes(&[0xCBC0, 0xC56F, 0xC561])
        .unwrap_err()
        .to_string();
    assert!(e.contains("copy") && e.contains("0xc8b5"), "{e}");
    let e = select_classes(&[0xC5C0, 0xC56F]).unwrap_err().to_string();
    assert!(e.contains("no known compute class"), "{e}");
}

#[test]
fn cbuf0_prefix_per_arch() {
    for a in NV_ARCHS {
        let l = a.cbuf0;
        let mut buf = vec![0xEEu8; l.param_base as usize];
        a.fill_cbuf0(&mut buf, [128, 2, 1], [40, 3, 7]).unwrap();
        let u32_at =
            |o: u32| u32::from_le_bytes(buf[o as usize..o as usize + 4].try_into().unwrap());
        let u64_at =
            |o: u32| u64::from_le_bytes(buf[o as usize..o as usize + 8].try_into().unwrap());
        assert_eq!(
            [u32_at(l.ntid), u32_at(l.ntid + 4), u32_at(l.ntid + 8)],
            [128, 2, 1]
        );
        assert_eq!(
            [u32_at(l.nctaid), u32_at(l.nctaid + 4), u32_at(l.nctaid + 8)],
            [40, 3, 7]
        );
        assert_eq!(u64_at(l.shared_window), a.shared_window);
        assert_eq!(u64_at(l.local_window), a.local_window);
        assert_eq!(u32_at(l.stack_top), 0xFF_FDC0);
        assert!(a
            .fill_cbuf0(&mut buf[..l.param_base as usize - 1], [1; 3], [1; 3])
            .is_err());
    }
}

#[test]
fn derived_values() {
    assert_eq!(NvArch::sass_version(90), 0x90);
    assert_eq!(NvArch::sass_version(89), 0x89);
    assert_eq!(NvArch::sass_version(120), 0xC0);
    let c = ADA_COMPUTE_A.shared_mem_config(0, 0).unwrap();
    assert_eq!((c.size, c.min_config, c.max_config), (0x400, 9, 0x1A));
    let c = ADA_COMPUTE_A.shared_mem_config(40 * 1024, 0).unwrap();
    assert_eq!((c.size, c.target_config), (41 * 1024, 17));
    assert!(ADA_COMPUTE_A.shared_mem_config(100 * 1024, 0).is_err());
    // Hopper: MAX config 0x1A (100 KiB) unless a larger carveout is allowed.
    let c = HOPPER_COMPUTE_A.shared_mem_config(0, 0).unwrap();
    assert_eq!((c.min_config, c.max_config), (9, 0x1A));
    let e = HOPPER_COMPUTE_A
        .shared_mem_config(200 * 1024, 0)
        .unwrap_err();
    assert!(e.message().contains("NV_MAX_SHARED_KIB=228"), "{e}");
    let c = HOPPER_COMPUTE_A
        .shared_mem_config_up_to(200 * 1024, 0, 228)
        .unwrap();
    assert_eq!((c.target_config, c.max_config), (58, 58));
    let c = HOPPER_COMPUTE_A.shared_mem_config_up_to(0, 0, 164).unwrap();
    assert_eq!(c.max_config, 42);
    assert_eq!(NvArch::max_block_threads(32), 1024);
    assert_eq!(NvArch::max_block_threads(255), 256);
}
