//! Random numbers on CLANG and INTERP: threefry values pinned to tinygrad 0.9.1's
//! test_randomness.py (`manual_seed(1337); rand(20)` with THREEFRY=1), the counter advancing
//! between draws (checked against a host threefry), and the distributions built on rand.
//! One test function: the generator state is process-wide.

mod tensor_common;

use rawgrad::dtype::dtypes;
use rawgrad::Tensor;
use tensor_common::reference::assert_close;
use tensor_common::*;

/// Host threefry-2x32 with tinygrad's key schedule (the test's own reference).
fn threefry(c0: u32, c1: u32, seed: u32) -> (u32, u32) {
    const ROT: [[u32; 4]; 2] = [[13, 15, 26, 6], [17, 29, 16, 24]];
    let ks = [0u32, seed ^ 0x1BD1_1BDA, seed];
    let mut x = [c0.wrapping_add(ks[2]), c1.wrapping_add(ks[0])];
    for i in 0..5usize {
        for &r in &ROT[i % 2] {
            let x0 = x[0].wrapping_add(x[1]);
            x = [x0, x0 ^ x[1].rotate_left(r)];
        }
        x = [
            x[0].wrapping_add(ks[i % 3]),
            x[1].wrapping_add(ks[(i + 1) % 3])
                .wrapping_add(i as u32 + 1),
        ];
    }
    (x[0], x[1])
}

/// The values tinygrad's rand gives for `num` draws starting at counter `start`.
fn host_rand(num: usize, start: u32, seed: u32) -> Vec<f64> {
    let half = num.div_ceil(2) as u32;
    let (mut a, mut b) = (vec![], vec![]);
    for j in 0..half {
        let c = start + j;
        let (x, y) = threefry(c, c + half, seed);
        a.push((x >> 8) as f64 / (1u32 << 24) as f64);
        b.push((y >> 8) as f64 / (1u32 << 24) as f64);
    }
    a.extend(b);
    a.truncate(num);
    a
}

#[test]
fn random_numbers() {
    let jr = [
        0.30984968, 0.42723763, 0.92448753, 0.27268296, 0.48820806, 0.29587173, 0.3213513,
        0.05805135, 0.4954177, 0.23303074, 0.62478125, 0.51861334, 0.24712527, 0.12718695,
        0.5236074, 0.50704265, 0.9166272, 0.6918763, 0.6530086, 0.34640658,
    ];
    for dev in DEVICES {
        let _d = on(dev);
        Tensor::manual_seed(1337).unwrap();
        let r = Tensor::rand(&[20]).unwrap();
        assert_eq!((r.shape(), r.dtype()), (vec![20], dtypes::float32));
        assert_close(
            &get(&r),
            &jr,
            1e-6,
            1e-6,
            &format!("{dev} rand(20) after manual_seed(1337)"),
        );
        let r2 = Tensor::rand(&[4, 5]).unwrap();
        assert_close(
            &get(&r2),
            &host_rand(20, 20, 1337),
            0.0,
            0.0,
            "the counter advanced by 20",
        );
        let r3 = Tensor::rand(&[5]).unwrap();
        assert_close(&get(&r3), &host_rand(5, 40, 1337), 0.0, 0.0, "odd count");
        Tensor::manual_seed(1337).unwrap();
        assert_close(
            &get(&Tensor::rand(&[20]).unwrap()),
            &jr,
            1e-6,
            1e-6,
            "reseeding repeats",
        );

        let n = Tensor::randn(&[2000]).unwrap().to_vec::<f32>().unwrap();
        assert!(n.iter().all(|v| v.is_finite()), "{dev} randn finite");
        let mean = n.iter().map(|&v| v as f64).sum::<f64>() / n.len() as f64;
        let var = n.iter().map(|&v| (v as f64 - mean).powi(2)).sum::<f64>() / n.len() as f64;
        assert!(
            mean.abs() < 0.1 && (var.sqrt() - 1.0).abs() < 0.1,
            "{dev} randn {mean} {var}"
        );
        let ri = Tensor::randint(&[500], 3, 9).unwrap();
        assert_eq!(ri.dtype(), dtypes::int32);
        let ri = ri.to_vec::<i32>().unwrap();
        assert!(ri.iter().all(|v| (3..9).contains(v)), "{dev} randint range");
        assert!(
            (3..9).all(|k| ri.contains(&k)),
            "{dev} randint covers the range"
        );
        let u = get(&Tensor::uniform(&[500], -2.0, 3.0).unwrap());
        assert!(
            u.iter().all(|v| (-2.0..3.0).contains(v)),
            "{dev} uniform range"
        );
        let nm = get(&Tensor::normal(&[1000], 5.0, 0.5).unwrap());
        let m = nm.iter().sum::<f64>() / nm.len() as f64;
        assert!((m - 5.0).abs() < 0.1, "{dev} normal mean {m}");
        let h = Tensor::rand_dtype(&[3, 3], dtypes::float16).unwrap();
        assert_eq!((h.shape(), h.dtype()), (vec![3, 3], dtypes::float16));
        let k = Tensor::kaiming_uniform(&[8, 4], 5f64.sqrt()).unwrap();
        let bound = 3f64.sqrt() * (2.0 / 6.0f64).sqrt() / 2.0;
        assert!(
            get(&k).iter().all(|v| v.abs() <= bound),
            "{dev} kaiming bound"
        );
        assert_eq!(
            Tensor::rand(&[0, 3]).unwrap().to_vec::<f32>().unwrap(),
            Vec::<f32>::new()
        );

        let x = Tensor::ones(&[4000]).unwrap();
        assert_eq!(
            x.dropout(0.5).unwrap().lazydata(),
            x.lazydata(),
            "no dropout outside training"
        );
        let _t = Tensor::train(true);
        let kept = get(&x.dropout(0.25).unwrap());
        assert!(kept
            .iter()
            .all(|&v| v == 0.0 || (v - 1.0 / 0.75).abs() < 1e-6));
        let frac = kept.iter().filter(|&&v| v == 0.0).count() as f64 / kept.len() as f64;
        assert!((frac - 0.25).abs() < 0.05, "{dev} dropout fraction {frac}");
        assert!(x.dropout(0.25).unwrap().sum().is_ok());
    }
}
