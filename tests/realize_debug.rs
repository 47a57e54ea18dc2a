//! The realize engine's DEBUG output, captured through `capture_debug_output`: the `DEBUG=2` line
//! of tinygrad 0.9.1 field by field (never timing values), and what DEBUG 3, 4 and 5 add.

mod realize_common;

use rawgrad::engine::realize::{capture_debug_output, run_schedule};
use rawgrad::helpers::{ansistrip, Context, GlobalCounters};
use realize_common::*;

/// Run the schedule of `outs` at `DEBUG=level`, returning the captured lines.
fn run_at(level: i64, outs: &[&T]) -> Vec<String> {
    let (sched, vv) = schedule(outs);
    let _g = Context::new(&[("DEBUG", level)]);
    let (res, lines) = capture_debug_output(|| run_schedule(sched, &vv));
    res.unwrap();
    lines
}

/// Check the timed tail `tm <t>us|ms/<sum>ms (<x> GFLOPS, <y> GB/s)` without its numbers.
fn check_tail(plain: &str) {
    let tail = plain
        .split_once(" GB tm ")
        .unwrap_or_else(|| panic!("no ' GB tm ' in {plain:?}"))
        .1;
    let (t, rest) = tail.split_once('/').unwrap();
    assert_eq!(t.len(), 11, "tm field {t:?} is {{:9.2}} plus a unit");
    assert!(t.ends_with("us") || t.ends_with("ms"), "{t:?}");
    let (sum, rest) = rest.split_once("ms (").unwrap();
    assert_eq!(sum.len(), 9, "time sum {sum:?} is {{:9.2}}");
    let (gflops, rest) = rest.split_once(" GFLOPS, ").unwrap();
    assert_eq!(gflops.len(), 8, "{gflops:?} is {{:8.2}}");
    let gbs = rest.strip_suffix(" GB/s)").unwrap();
    assert_eq!(gbs.len(), 7, "{gbs:?} is {{:7.2}}");
    for num in [&t[..9], sum, gflops, gbs] {
        num.trim().parse::<f64>().unwrap();
    }
}

#[test]
fn debug2_prints_one_tinygrad_line_per_kernel() {
    // A reduce no other test builds, so this run compiles it (its first run: green header).
    let a = input("CLANG", &[3, 7], &values(21, 20));
    let out = mul_c(&a, 1.75).max(Some(&[1]), false);
    GlobalCounters::reset();
    let lines = run_at(2, &[&out]);
    assert_eq!(lines.len(), 1, "{lines:?}");
    let line = &lines[0];
    assert!(
        line.starts_with("\x1b[32m*** CLANG      1\x1b[0m "),
        "{line:?}"
    );
    // The name: r_3_7 with the global dim blue, the reduce dim magenta (the hand-coded opts
    // unroll a reduce of 7 on CLANG, as 0.9.1 does), grey separators.
    assert!(
        line.contains("r_\x1b[34m3\x1b[0m\x1b[90m_\x1b[0m\x1b[35m7\x1b[0m"),
        "{line:?}"
    );
    let plain = ansistrip(line);
    assert!(plain.starts_with("*** CLANG      1 r_3_7"), "{plain:?}");
    // The name is padded to 38 visible characters.
    assert_eq!(&plain[55..68], " arg   2 mem ", "{plain:?}");
    check_tail(&plain);
    assert_eq!(GlobalCounters::get().kernel_count, 1);
    // The same kernel again: an uncolored header, the next kernel count.
    let a = input("CLANG", &[3, 7], &values(21, 21));
    let out = mul_c(&a, 1.75).max(Some(&[1]), false);
    let lines = run_at(2, &[&out]);
    assert!(lines[0].starts_with("*** CLANG      2 "), "{:?}", lines[0]);
}

#[test]
fn debug2_lines_for_copies_and_views() {
    let a = input("INTERP", &[21], &values(21, 22));
    let c = T(a.0.copy_to_device("CLANG", false).unwrap());
    GlobalCounters::reset();
    let lines = run_at(2, &[&c]);
    assert_eq!(lines.len(), 1, "{lines:?}");
    assert!(
        lines[0].contains("\x1b[33mcopy       84,   CLANG <- INTERP \x1b[0m"),
        "{:?}",
        lines[0]
    );
    let plain = ansistrip(&lines[0]);
    assert!(plain.starts_with("*** CLANG      1 copy "), "{plain:?}");
    assert_eq!(&plain[55..68], " arg   2 mem ", "{plain:?}");
    check_tail(&plain);
    let v = T(c
        .0
        .shrink(&[(rawgrad::shape::Node::Num(1), rawgrad::shape::Node::Num(5))])
        .unwrap())
    .contiguous();
    let lines = run_at(2, &[&v]);
    let plain = ansistrip(&lines[0]);
    assert!(
        plain.starts_with("*** CLANG      2 view       16 @ 4          "),
        "{plain:?}"
    );
    // A view is not timed: the line ends after the memory field.
    assert!(plain.ends_with(" GB "), "{plain:?}");
}

#[test]
fn debug_levels_3_to_5_add_ast_source_and_uops() {
    let a = input("CLANG", &[5, 3], &values(15, 23));
    let out = mul_c(&add_c(&a, 0.125), 3.5).sum(Some(&[0]), false);
    let lines = run_at(5, &[&out]);
    let all = lines.join("\n");
    assert!(
        all.contains("  0 ━┳ BufferOps.STORE MemBuffer(idx=0"),
        "DEBUG>=3: the AST\n{all}"
    );
    assert!(all.contains("void r_3_5"), "DEBUG>=4: the C source\n{all}");
    assert!(all.contains("DEFINE_GLOBAL"), "DEBUG>=5: the UOps\n{all}");
    assert!(ansistrip(lines.last().unwrap()).starts_with("*** CLANG "));
    // DEBUG=1 prints none of this.
    let a = input("CLANG", &[5, 3], &values(15, 24));
    let out = mul_c(&add_c(&a, 0.375), 3.5).sum(Some(&[0]), false);
    assert!(run_at(1, &[&out]).is_empty());
}
