//! QMD tests: set -> get round trips of every accessor on every version, bit positions spot-
//! checked against open-gpu-doc's `cl*qmd.h`, range errors, patch points, the template.

use super::*;
use crate::hw::nv::arch::{QmdVersion, ADA_COMPUTE_A, BLACKWELL_COMPUTE_B, HOPPER_COMPUTE_A};
use crate::runtime::nv::push::patch::PatchPoint;

const VERSIONS: [QmdVersion; 3] = [QmdVersion::V03_00, QmdVersion::V04_00, QmdVersion::V05_00];

fn bits(words: &[u32], hi: usize, lo: usize) -> u64 {
    (lo..=hi)
        .rev()
        .fold(0, |v, b| v << 1 | u64::from(words[b / 32] >> (b % 32) & 1))
}

const SHARED: SharedMemConfig = SharedMemConfig {
    size: 0x3_0000,
    min_config: 9,
    max_config: 0x3F,
    target_config: 17,
};

fn inv() -> QmdInvalidates {
    QmdInvalidates::SHADER_DATA | QmdInvalidates::INSTRUCTION | QmdInvalidates::TEXTURE_HEADER
}

fn cb(i: usize) -> ConstantBuffer {
    ConstantBuffer {
        addr: 0x1_2345_6000 + 0x100 * i as u64,
        size: 0x10 * (i as u32 + 1),
        invalidate: i % 2 == 0,
    }
}

fn rel(i: usize) -> QmdRelease {
    let structure = [
        ReleaseStructure::FourWords,
        ReleaseStructure::OneWord,
        ReleaseStructure::TwoWords,
    ];
    QmdRelease {
        addr: 0xFF_0000_0000 + 0x10 * i as u64,
        payload: 0x8000_0000_0000_0001 + i as u64,
        payload64: true,
        structure: structure[i],
    }
}

fn dep(i: usize) -> DependentQmd {
    DependentQmd {
        addr: 0xFF_FFFF_FF00 - 0x100 * i as u64,
        action: DependentAction::Schedule,
        prefetch: i == 0,
    }
}

/// Sets every field through the trait (values at the top of their ranges).
fn set_everything(v: QmdVersion) -> AnyQmd {
    let mut q = AnyQmd::new(v);
    assert_eq!(
        (q.version(), q.major_version(), q.minor_version()),
        (v, v.major(), 0)
    );
    assert_eq!(q.dwords().len() * 4, v.size());
    q.set_grid([0x7FFF_FFFF, 0xFFFF, 0x1234]).unwrap();
    q.set_block([1024, 0x3FF, 64]).unwrap();
    q.set_program_address(0x1F_FFFF_FFF0).unwrap();
    q.set_register_count(0x1FF).unwrap();
    q.set_barrier_count(31).unwrap();
    q.set_shared_memory(SHARED).unwrap();
    q.set_shader_local_memory(0x10, 0xFFF0).unwrap();
    q.set_sass_version(0x90).unwrap();
    q.set_program_prefetch(0xAB_CDEF_1200, 0x1FF).unwrap();
    q.set_cache_invalidates(inv()).unwrap();
    q.set_cwd_membar(CwdMembar::L1Sysmembar).unwrap();
    for i in 0..8 {
        q.set_constant_buffer(i, Some(cb(i))).unwrap();
    }
    for i in 0..3 {
        q.set_release(i, Some(rel(i))).unwrap();
    }
    for i in 0..q.layout().dependent.len() {
        q.set_dependent_qmd(i, Some(dep(i))).unwrap();
    }
    q
}

/// Sets every field through the trait and reads it back.
fn round_trip(v: QmdVersion) {
    let mut q = set_everything(v);
    assert_eq!(q.grid(), [0x7FFF_FFFF, 0xFFFF, 0x1234]);
    assert_eq!(q.block(), [1024, 0x3FF, 64]);
    assert_eq!(q.program_address(), 0x1F_FFFF_FFF0);
    assert_eq!((q.register_count(), q.barrier_count()), (0x1FF, 31));
    assert_eq!(q.shared_memory(), SHARED);
    assert_eq!(q.shader_local_memory(), (0x10, 0xFFF0));
    assert_eq!(q.sass_version(), 0x90);
    assert_eq!(q.program_prefetch(), (0xAB_CDEF_1200, 0x1FF));
    assert_eq!(q.cache_invalidates(), inv());
    assert_eq!(q.cwd_membar(), Some(CwdMembar::L1Sysmembar));
    for i in 0..8 {
        assert_eq!(q.constant_buffer(i), Some(cb(i)), "{v:?} cbuf {i}");
    }
    for i in 0..3 {
        assert_eq!(q.release(i), Some(rel(i)), "{v:?} release {i}");
    }
    for i in 0..q.layout().dependent.len() {
        assert_eq!(q.dependent_qmd(i), Some(dep(i)), "{v:?} dependent {i}");
    }
    // The version fields survived every other write.
    assert_eq!(q.major_version(), v.major());
    // Unbinding.
    q.set_constant_buffer(3, None).unwrap();
    q.set_release(1, None).unwrap();
    q.set_dependent_qmd(0, None).unwrap();
    assert_eq!(
        (q.constant_buffer(3), q.release(1), q.dependent_qmd(0)),
        (None, None, None)
    );
    assert_eq!(q.constant_buffer(2), Some(cb(2)));
}

#[test]
fn every_field_round_trips_on_every_version() {
    for v in VERSIONS {
        round_trip(v);
    }
}

#[test]
fn bit_positions_match_the_class_headers() {
    // V04 (clcbc0qmd.h): GRID_WIDTH 1055:1024, REGISTER_COUNT 1208:1200, MAJOR 583:580,
    // CTA_THREAD_DIMENSION1 1183:1168, RELEASE_SEMAPHORE1_ADDR_LOWER 799:768, cbuf(1) VALID 420.
    let mut q = QmdV04::new();
    q.set_grid([0xDEAD_BEEF, 3, 5]).unwrap();
    q.set_register_count(0x1AB).unwrap();
    q.set_block([1, 0x155, 1]).unwrap();
    q.set_release(
        1,
        Some(QmdRelease {
            addr: 0x1234_5670,
            payload: 9,
            payload64: false,
            structure: ReleaseStructure::FourWords,
        }),
    )
    .unwrap();
    q.set_constant_buffer(
        1,
        Some(ConstantBuffer {
            addr: 0x40,
            size: 0x10,
            invalidate: false,
        }),
    )
    .unwrap();
    let w = q.dwords();
    assert_eq!(w[32], 0xDEAD_BEEF);
    assert_eq!(bits(w, 1208, 1200), 0x1AB);
    assert_eq!(bits(w, 583, 580), 4);
    assert_eq!(bits(w, 1183, 1168), 0x155);
    assert_eq!(bits(w, 799, 768), 0x1234_5670);
    assert_eq!((bits(w, 336, 336), bits(w, 420, 420)), (1, 1)); // RELEASE_ENABLE(1), VALID(1)
                                                                // V03 (clc6c0qmd.h): CTA_RASTER_WIDTH 415:384, REGISTER_COUNT_V 656:648, MAJOR 583:580,
                                                                // QMD_GROUP_ID 133:128 = 0x3F, SM_GLOBAL_CACHING_ENABLE 134.
    let mut q = QmdV03::new();
    q.set_grid([0xCAFE_F00D, 1, 1]).unwrap();
    q.set_register_count(0x101).unwrap();
    let w = q.dwords();
    assert_eq!(w[12], 0xCAFE_F00D);
    assert_eq!(bits(w, 656, 648), 0x101);
    assert_eq!(
        (bits(w, 583, 580), bits(w, 133, 128), bits(w, 134, 134)),
        (3, 0x3F, 1)
    );
    // V05 (clcdc0qmd.h): MAJOR 471:468, QMD_TYPE 153:151 = GRID_CTA, GRID_WIDTH 1279:1248,
    // PROGRAM_ADDRESS_LOWER_SHIFTED4 1055:1024, SHARED_MEMORY_SIZE_SHIFTED7 1162:1152.
    let mut q = QmdV05::new();
    q.set_grid([0x1357_9BDF, 1, 1]).unwrap();
    q.set_program_address(0x12_3456_7890).unwrap();
    let cfg = SharedMemConfig {
        size: 0x8080,
        min_config: 1,
        max_config: 1,
        target_config: 1,
    };
    q.set_shared_memory(cfg).unwrap();
    let w = q.dwords();
    assert_eq!((bits(w, 471, 468), bits(w, 153, 151)), (5, 2));
    assert_eq!(bits(w, 1279, 1248), 0x1357_9BDF);
    assert_eq!(bits(w, 1055, 1024), 0x2345_6789);
    assert_eq!(bits(w, 1162, 1152), 0x8080 >> 7);
}

#[test]
fn values_that_do_not_fit_are_errors_and_change_nothing() {
    let mut q = QmdV05::new();
    let before = q.clone();
    assert!(q
        .set_block([1, 1, 256])
        .unwrap_err()
        .to_string()
        .contains("CTA_THREAD_DIMENSION2"));
    assert!(q.set_grid([5, 0x1_0000, 1]).is_err());
    assert!(q.set_register_count(0x200).is_err());
    assert!(
        q.set_program_address(0x1008).is_err(),
        "V05 program address is >> 4"
    );
    let cfg = SharedMemConfig {
        size: 0x8040,
        min_config: 1,
        max_config: 1,
        target_config: 1,
    };
    assert!(q.set_shared_memory(cfg).is_err(), "SHIFTED7");
    assert_eq!(q, before);
}

#[test]
fn v04_values_that_do_not_fit() {
    let mut q = QmdV04::new();
    let before = q.clone();
    let cb = ConstantBuffer {
        addr: 0x1020,
        size: 0x10,
        invalidate: false,
    };
    assert!(
        q.set_constant_buffer(0, Some(cb)).is_err(),
        "SHIFTED6 address"
    );
    let cb = ConstantBuffer {
        addr: 0x1000,
        size: 0x18,
        invalidate: false,
    };
    assert!(q.set_constant_buffer(0, Some(cb)).is_err(), "SHIFTED4 size");
    assert!(q.set_constant_buffer(8, None).is_err());
    let r = QmdRelease {
        addr: 0x1000,
        payload: 1 << 32,
        payload64: false,
        structure: ReleaseStructure::FourWords,
    };
    assert!(q.set_release(0, Some(r)).is_err());
    assert!(q.set_release(3, None).is_err());
    let d = DependentQmd {
        addr: 0x1080,
        action: DependentAction::Schedule,
        prefetch: true,
    };
    assert!(q.set_dependent_qmd(0, Some(d)).is_err());
    let d = DependentQmd {
        addr: 1 << 40,
        action: DependentAction::Schedule,
        prefetch: true,
    };
    assert!(q.set_dependent_qmd(0, Some(d)).is_err());
    assert_eq!(q, before);
}

#[test]
fn v03_values_that_do_not_fit() {
    let mut v3 = QmdV03::new();
    let d = DependentQmd {
        addr: 0x1000,
        action: DependentAction::Schedule,
        prefetch: true,
    };
    assert!(
        v3.set_dependent_qmd(1, Some(d)).is_err(),
        "V03 has one dependent pointer"
    );
    let r = QmdRelease {
        addr: 1 << 40,
        payload: 1,
        payload64: false,
        structure: ReleaseStructure::FourWords,
    };
    assert!(
        v3.set_release(0, Some(r)).is_err(),
        "V03 releases are 40-bit"
    );
    assert!(AnyQmd::from_dwords(QmdVersion::V04_00, &[0; 64]).is_err());
    assert!(AnyQmd::from_bytes(QmdVersion::V03_00, &[0; 255]).is_err());
}

/// A QMD with release 0 (64-bit unless V03), dependent QMD 0 and cbuf0 set.
fn linked_qmd(v: QmdVersion) -> (AnyQmd, QmdRelease, DependentQmd, ConstantBuffer) {
    let mut q = AnyQmd::new(v);
    let r = QmdRelease {
        addr: 0x1000,
        payload: 1,
        payload64: v != QmdVersion::V03_00,
        structure: ReleaseStructure::FourWords,
    };
    q.set_release(0, Some(r)).unwrap();
    let d = DependentQmd {
        addr: 0x2000,
        action: DependentAction::Schedule,
        prefetch: true,
    };
    q.set_dependent_qmd(0, Some(d)).unwrap();
    let cb = ConstantBuffer {
        addr: 0x4000,
        size: 0x230,
        invalidate: true,
    };
    q.set_launch([1, 1, 1], [1, 1, 1], cb).unwrap();
    (q, r, d, cb)
}

#[test]
fn patch_points_match_the_setters() {
    for v in VERSIONS {
        let (mut q, r, d, cb) = linked_qmd(v);
        let (g, b, c) = (q.grid_patch(), q.block_patch(), q.cbuf0_addr_patch());
        let ra = q.release_addr_patch(0).unwrap();
        let rp = q.release_payload_patch(0).unwrap();
        let dp = q.dependent_patch(0).unwrap();
        // Patch a copy embedded at dword 10 of a larger view, and the same through the setters.
        let n = q.dwords().len();
        let mut view = vec![0xFFFF_FFFFu32; n + 20];
        view[10..10 + n].copy_from_slice(q.dwords());
        g.rebase(10).apply(&mut view, [7, 8, 9]).unwrap();
        b.rebase(10).apply(&mut view, [32, 2, 1]).unwrap();
        c.rebase(10).apply(&mut view, 0x8_0000_0040).unwrap();
        ra.rebase(10).apply(&mut view, 0x3000).unwrap();
        rp.rebase(10).apply(&mut view, 0xAB).unwrap();
        dp.rebase(10).apply(&mut view, 0x5500).unwrap();
        q.set_grid([7, 8, 9]).unwrap();
        q.set_block([32, 2, 1]).unwrap();
        q.set_constant_buffer(
            0,
            Some(ConstantBuffer {
                addr: 0x8_0000_0040,
                ..cb
            }),
        )
        .unwrap();
        q.set_release(
            0,
            Some(QmdRelease {
                addr: 0x3000,
                payload: 0xAB,
                ..r
            }),
        )
        .unwrap();
        q.set_dependent_qmd(0, Some(DependentQmd { addr: 0x5500, ..d }))
            .unwrap();
        assert_eq!(&view[10..10 + n], q.dwords(), "{v:?}");
        assert!(view[..10]
            .iter()
            .chain(&view[10 + n..])
            .all(|&w| w == 0xFFFF_FFFF));
    }
}

#[test]
fn patch_points_refuse_bad_values_without_writing() {
    for v in VERSIONS {
        let (q, ..) = linked_qmd(v);
        let (g, dp, rp) = (
            q.grid_patch(),
            q.dependent_patch(0).unwrap(),
            q.release_payload_patch(0).unwrap(),
        );
        let mut view = q.dwords().to_vec();
        let snapshot = view.clone();
        assert!(g.apply(&mut view, [1, 1 << 16, 1]).is_err());
        assert!(dp.apply(&mut view, 0x5510).is_err());
        assert!(
            g.apply(&mut view[..3].to_vec(), [1, 1, 1]).is_err(),
            "short view"
        );
        assert_eq!(view, snapshot);
        let payload_ok = rp.apply(&mut view, 1 << 40).is_ok();
        assert_eq!(
            payload_ok,
            v != QmdVersion::V03_00,
            "64-bit payload only with PAYLOAD64B"
        );
    }
    assert!(
        QmdV04::new().release_payload_patch(0).is_err(),
        "release not enabled"
    );
}

#[test]
fn program_template() {
    for (arch, sm, sass) in [
        (&ADA_COMPUTE_A, 89, 0x89),
        (&HOPPER_COMPUTE_A, 90, 0x90),
        (&BLACKWELL_COMPUTE_B, 120, 0xC0),
    ] {
        let prg = QmdProgram {
            program_addr: 0x10_0000_0100,
            code_bytes: 0x30000,
            register_count: 24,
            shared: arch.shared_mem_config(0, 0).unwrap(),
            slm_bytes_per_thread: 0x260,
            sm,
            const_banks: vec![],
        };
        let q = program_qmd(arch, &prg).unwrap();
        assert_eq!(q.version(), arch.qmd_version);
        assert_eq!(
            (q.register_count(), q.barrier_count(), q.sass_version()),
            (24, 1, sass)
        );
        assert_eq!(q.cwd_membar(), Some(CwdMembar::L1Sysmembar));
        assert_eq!(q.program_prefetch(), (0x10_0000_0100, 0x1FF));
        assert_eq!(q.shader_local_memory(), (0, 0x260));
        assert_eq!(q.shared_memory().size, 0x400);
        assert!(q.cache_invalidates().contains(QmdInvalidates::SHADER_DATA));
        assert_eq!(q.constant_buffer(0), None, "cbuf0 is per launch");
        assert!(program_qmd(
            arch,
            &QmdProgram {
                sm: 75,
                ..prg.clone()
            }
        )
        .is_err());
        assert!(program_qmd(
            arch,
            &QmdProgram {
                register_count: 0,
                ..prg
            }
        )
        .is_err());
    }
}

#[test]
fn named_fields_cover_every_table_entry() {
    for v in VERSIONS {
        let q = AnyQmd::new(v);
        let fields = q.layout().named_fields();
        let mut names: Vec<&str> = fields.iter().map(|(n, _)| n.as_str()).collect();
        names.sort();
        let total = names.len();
        names.dedup();
        assert_eq!(names.len(), total, "{v:?}: duplicate display names");
        for (n, f) in &fields {
            assert!(f.hi() < (v.size() * 8) as u32, "{v:?} {n} outside the QMD");
        }
    }
}
