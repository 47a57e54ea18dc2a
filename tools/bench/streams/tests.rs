use super::*;

/// Each thread's sum is the wrapping sum of the i32 words of exactly its chunk: the source holds
/// distinct words (byte `i` is `i * 7 % 251`), so a skipped, repeated or foreign vector changes a
/// sum.
#[test]
fn the_read_loop_sums_every_word_of_each_threads_chunk() {
    let fill = |_: usize, i: usize| (i * 7 % 251) as u8;
    let Some(l) = StreamLoop::new(Stream::Read, 2, 3 << 16, fill).unwrap() else {
        panic!("the bench needs libLLVM for its ceilings");
    };
    assert!(l.each > 0 && l.each <= 3 << 16 && l.each % 2 == 0);
    assert_eq!(l.moved(), l.each);
    l.pass().unwrap();
    let mut out = vec![0u8; 8];
    HostAllocator.copyout(&mut out, &l.bufs[0]).unwrap();
    let chunk = l.each / 2;
    for core in 0..2 {
        let want = (core * chunk..(core + 1) * chunk)
            .step_by(4)
            .map(|i| u32::from_le_bytes([0, 1, 2, 3].map(|b| fill(1, i + b))))
            .fold(0u32, u32::wrapping_add);
        let got = u32::from_le_bytes(out[4 * core..4 * core + 4].try_into().unwrap());
        assert_eq!(got, want, "thread {core}");
    }
}

/// Element `j` of data buffer `k` (1 is the output, zero).
fn value(k: usize, j: usize) -> f32 {
    if k == 1 {
        0.0
    } else {
        ((j * 7 + k * 13) % 1000) as f32 / 8.0 - 60.0
    }
}

/// Every element of the triad's output is the host's `a * b + c` (a multiply, then an add),
/// across both threads' chunks.
#[test]
fn the_triad_writes_a_times_b_plus_c_everywhere() {
    let fill = |k: usize, i: usize| value(k, i / 4).to_le_bytes()[i % 4];
    let Some(l) = StreamLoop::new(Stream::Triad, 2, 1 << 18, fill).unwrap() else {
        panic!("the bench needs libLLVM for its ceilings");
    };
    assert!(l.each > 0 && 4 * l.each <= 1 << 18);
    assert_eq!(l.moved(), 4 * l.each);
    l.pass().unwrap();
    let mut out = vec![0u8; l.each];
    HostAllocator.copyout(&mut out, &l.bufs[1]).unwrap();
    for (j, b) in out.chunks_exact(4).enumerate() {
        let got = f32::from_le_bytes(b.try_into().unwrap());
        let want = value(2, j) * value(3, j) + value(4, j);
        assert_eq!(got.to_bits(), want.to_bits(), "element {j}");
    }
}
