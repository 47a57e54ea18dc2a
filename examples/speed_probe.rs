//! Probe: steady-state time of a few kernels on the default device.
use rawgrad::engine::realize::{capture_exec_items, RunOptions};
use rawgrad::helpers::getenv;
use rawgrad::Tensor;
use std::time::Instant;

fn time_it(name: &str, t: Tensor, flops: f64, bytes: f64) -> rawgrad::Result<()> {
    let st = Instant::now();
    let (r, items) = capture_exec_items(|| t.realize());
    r?;
    let first = st.elapsed().as_secs_f64();
    let ei = items.last().unwrap();
    if getenv("SRC", 0) != 0 {
        if let Some(cr) = ei
            .runner
            .as_any()
            .downcast_ref::<rawgrad::engine::realize::CompiledRunner>()
        {
            println!("{}", cr.p.src);
        }
    }
    let vv = Default::default();
    let mut tms = vec![];
    for _ in 0..getenv("REPS", 10) {
        let s = Instant::now();
        ei.run_with(
            &vv,
            RunOptions {
                wait: true,
                no_stats: true,
                ..Default::default()
            },
        )?;
        tms.push(s.elapsed().as_secs_f64());
    }
    tms.sort_by(|a, b| a.partial_cmp(b).unwrap());
    let (mn, med) = (tms[0], tms[tms.len() / 2]);
    println!(
        "{name:10} first {:8.1} ms  min {:8.3} ms  med {:8.3} ms  {:7.1} GFLOP/s  {:6.1} GB/s  [{}]",
        first * 1e3, mn * 1e3, med * 1e3, flops / mn / 1e9, bytes / mn / 1e9,
        rawgrad::helpers::ansistrip(ei.runner.display_name())
    );
    Ok(())
}

fn main() -> rawgrad::Result<()> {
    let which = std::env::args().nth(1).unwrap_or("all".into());
    let n = getenv("N", 1024) as usize;
    if which == "all" || which == "mm" {
        let a = Tensor::rand(&[n, n])?.realize()?;
        let b = Tensor::rand(&[n, n])?.realize()?;
        time_it(
            "matmul",
            a.matmul(&b)?,
            2.0 * (n * n * n) as f64,
            12.0 * (n * n) as f64,
        )?;
    }
    if which == "all" || which == "sum" {
        let x = Tensor::rand(&[4096, 4096])?.realize()?;
        time_it(
            "sum-last",
            x.sum(-1, false)?,
            4096.0 * 4096.0,
            4.0 * 4096.0 * 4097.0,
        )?;
    }
    if which == "all" || which == "ew" {
        let m = 4_194_304;
        let a = Tensor::rand(&[m])?.realize()?;
        let b = Tensor::rand(&[m])?.realize()?;
        let c = Tensor::rand(&[m])?.realize()?;
        time_it(
            "a*b+c",
            a.mul(&b)?.add(&c)?,
            2.0 * m as f64,
            16.0 * m as f64,
        )?;
    }
    Ok(())
}
