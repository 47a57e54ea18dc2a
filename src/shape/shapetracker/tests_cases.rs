//! tinygrad 0.9.1's TestSingleShapeTracker, TestShapeTracker (a 7x4 tracker through every
//! movement op), TestMaskedShapeTracker and TestShapeTrackerFuzzFailures, checked element by
//! element against the brute-force index array.

use super::checker::Checking;

fn ck(shape: &[usize]) -> Checking {
    Checking::new(shape)
}

// TestSingleShapeTracker, TestShapeTracker (7x4), TestMaskedShapeTracker, fuzz failures

type Op = fn(&mut Checking);

fn run_cases(cases: Vec<(&str, Op)>) {
    for (name, f) in cases {
        let mut s = ck(&[7, 4]);
        f(&mut s);
        eprintln!("{name}");
        s.assert_same();
    }
}

#[test]
fn test_single_shapetracker() {
    run_cases(vec![
        ("reshape", |s| {
            s.reshape(&[7, 1, 4]);
            assert!(s.contiguous());
        }),
        ("permute", |s| {
            s.permute(&[1, 0]);
            assert!(!s.contiguous());
        }),
        ("shrink", |s| {
            s.shrink(&[(1, 2), (0, 4)]);
            assert!(!s.contiguous());
        }),
        ("double_permute", |s| {
            s.permute(&[1, 0]).permute(&[1, 0]);
            assert!(s.contiguous());
        }),
        ("reshape_permute_yes", |s| {
            s.reshape(&[7, 1, 4]).permute(&[0, 2, 1]);
            assert!(s.contiguous());
        }),
        ("reshape_permute_no", |s| {
            s.reshape(&[4, 7]).permute(&[1, 0]);
            assert!(!s.contiguous());
        }),
    ]);
}

#[test]
fn test_shapetracker_7x4() {
    run_cases(vec![
        ("simple_split", |s| {
            s.permute(&[1, 0]).reshape(&[28]);
        }),
        ("simple_pad", |s| {
            s.pad(&[(1, 1), (1, 1)]);
        }),
        ("pad_shrink", |s| {
            s.pad(&[(1, 1), (1, 1)]).shrink(&[(0, 4), (0, 4)]);
        }),
        ("pad_one_sided", |s| {
            s.pad(&[(0, 1), (0, 0)]);
        }),
        ("pad_reshape", |s| {
            s.pad(&[(0, 1), (0, 0)]).reshape(&[32]);
        }),
        ("pad_pad", |s| {
            s.pad(&[(1, 1), (1, 1)]).pad(&[(1, 1), (1, 1)]);
        }),
        ("pad_permute", |s| {
            s.pad(&[(1, 1), (2, 2)]).permute(&[1, 0]);
        }),
        ("pad_expand", |s| {
            s.reshape(&[7, 4, 1])
                .pad(&[(1, 1), (1, 1), (0, 0)])
                .expand(&[9, 6, 4]);
        }),
        ("pad_expand_alt", |s| {
            s.pad(&[(1, 1), (1, 1)])
                .reshape(&[9, 6, 1])
                .expand(&[9, 6, 4]);
        }),
        ("pad_stride", |s| {
            s.pad(&[(1, 4), (1, 3)]).stride(&[2, 2]);
        }),
        ("pad_stride_neg", |s| {
            s.pad(&[(1, 2), (1, 0)]).stride(&[-1, -1]);
        }),
        ("pad_stride_both", |s| {
            s.pad(&[(1, 2), (1, 0)]).stride(&[-2, -2]);
        }),
        ("shrink_pad", |s| {
            s.shrink(&[(0, 4), (0, 4)]).pad(&[(1, 1), (1, 1)]);
        }),
    ]);
}

#[test]
fn test_shapetracker_7x4_more() {
    run_cases(vec![
        ("reshape_reverse", |s| {
            s.reshape(&[4, 7]);
        }),
        ("expand", |s| {
            s.reshape(&[7, 1, 4]).expand(&[7, 2, 4]);
        }),
        ("flip_0", |s| {
            s.flip(&[0]);
        }),
        ("flip_1", |s| {
            s.flip(&[1]);
        }),
        ("flip_01", |s| {
            s.flip(&[0, 1]);
        }),
        ("slices", |s| {
            s.shrink(&[(1, 7), (0, 4)])
                .shrink(&[(0, 6), (1, 4)])
                .shrink(&[(1, 2), (1, 2)]);
        }),
        ("slice_permute", |s| {
            s.shrink(&[(0, 2), (2, 4)]).permute(&[1, 0]);
        }),
        ("slice_expand", |s| {
            s.shrink(&[(0, 2), (3, 4)]).expand(&[2, 10]);
        }),
        ("double_stride", |s| {
            s.stride(&[1, 2]).stride(&[2, 1]);
        }),
        ("strides", |s| {
            s.stride(&[2, 1]).stride(&[1, 2]).stride(&[-1, 2]);
        }),
        ("stride_n", |s| {
            s.stride(&[-2, 1]);
        }),
        ("stride_2_n", |s| {
            s.stride(&[-2, -2]);
        }),
        ("combo", |s| {
            s.permute(&[1, 0])
                .reshape(&[7, 4])
                .shrink(&[(0, 7), (1, 4)])
                .reshape(&[7, 1, 3])
                .expand(&[7, 2, 3])
                .permute(&[2, 0, 1]);
        }),
    ]);
}

#[test]
fn test_masked_shapetracker() {
    let mut s = ck(&[1, 1]);
    s.pad(&[(1, 1), (1, 1)]);
    s.assert_same();
    let mut s = ck(&[2, 2]);
    s.pad(&[(1, 1), (1, 1)]);
    s.assert_same();
    let mut s = ck(&[1, 2]);
    s.pad(&[(1, 0), (0, 1)]).reshape(&[3, 2]);
    s.assert_same();
    let mut s = ck(&[1, 2]);
    s.pad(&[(1, 1), (0, 2)]).reshape(&[4, 3]);
    s.assert_same();
    let mut s = ck(&[1, 1, 1, 2]);
    s.pad(&[(0, 2), (1, 2), (2, 2), (0, 4)])
        .reshape(&[4, 3, 6, 5]);
    s.assert_same();
}

#[test]
fn test_fuzz_failures() {
    let mut s = ck(&[3, 3, 3]);
    s.shrink(&[(1, 2), (1, 3), (1, 3)])
        .reshape(&[1, 4])
        .shrink(&[(0, 1), (1, 3)])
        .simplify();
    s.assert_same();
    let mut s = ck(&[3, 3, 3]);
    s.stride(&[1, 1, -2])
        .reshape(&[3, 6])
        .shrink(&[(1, 2), (1, 5)])
        .stride(&[1, -1]);
    s.assert_same();
    let mut s = ck(&[3, 3, 3]);
    s.shrink(&[(0, 2), (0, 2), (0, 1)])
        .permute(&[1, 0, 2])
        .reshape(&[4])
        .shrink(&[(0, 3)])
        .stride(&[-1]);
    s.assert_same();
    let mut s = ck(&[3, 3, 3]);
    s.reshape(&[3, 3, 3, 1])
        .pad(&[(0, 0), (0, 0), (0, 0), (1, 1)])
        .shrink(&[(0, 2), (1, 2), (0, 2), (0, 1)])
        .expand(&[2, 1, 2, 3]);
    s.assert_same();
}
