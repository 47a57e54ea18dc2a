//! What the realize engine prints: the per-item `DEBUG>=2` line (tinygrad 0.9.1's
//! `ExecItem.run` format), the colored kernel name, and the output sink.
//!
//! Every line goes through [`debug_print`]: to stdout, or, inside [`capture_debug_output`], into a
//! list the caller gets back (so tests can check the lines without reading stdout).
//!
//! The `DEBUG>=2` line, field by field (Python format specs):
//! `colored(f"*** {device[:7]:7s} {kernel_count:4d}", magenta if jit, green on a runner's first
//! run)`, the display name padded with spaces to 38 visible characters, `arg {nbufs:3d}`,
//! `mem {mem_used/1e9:5.2f} GB`, and when the item was timed
//! `tm {t}/{time_sum*1e3:9.2f}ms ({ops/(t*1e9):8.2f} GFLOPS, {mem/(t*1e9):7.2f} GB/s)` where `t`
//! prints as `{t*1e6:9.2f}us`, or `{t*1e3:9.2f}ms` in yellow above 10 ms.
//!
//! Not guaranteed: captured output is per thread (lines printed by other threads are not
//! captured).

use std::cell::RefCell;

use crate::helpers::{ansilen, colored};
use crate::shape::Sint;

thread_local! {
    static CAPTURE: RefCell<Option<Vec<String>>> = const { RefCell::new(None) };
}

/// Print one line of engine output (to the active capture on this thread, else stdout).
pub fn debug_print(line: impl Into<String>) {
    let line = line.into();
    let rest = CAPTURE.with(|c| match c.borrow_mut().as_mut() {
        Some(lines) => {
            lines.push(line);
            None
        }
        None => Some(line),
    });
    if let Some(line) = rest {
        println!("{line}");
    }
}

/// Run `f` with the engine's output on this thread collected instead of printed; returns `f`'s
/// result and the lines (each without its newline; a multi-line message is one entry).
pub fn capture_debug_output<T>(f: impl FnOnce() -> T) -> (T, Vec<String>) {
    struct Restore(Option<Vec<String>>);
    impl Drop for Restore {
        fn drop(&mut self) {
            let outer = self.0.take();
            CAPTURE.with(|c| *c.borrow_mut() = outer);
        }
    }
    let outer = CAPTURE.with(|c| c.borrow_mut().replace(Vec::new()));
    let restore = Restore(outer);
    let out = f();
    let lines = CAPTURE.with(|c| c.borrow_mut().take()).unwrap_or_default();
    drop(restore);
    (out, lines)
}

/// Python's `s[:n]` for a display string (characters, not bytes).
fn head(s: &str, n: usize) -> String {
    s.chars().take(n).collect()
}

/// The figures of one executed item, for [`exec_line`].
pub struct ExecStats<'a> {
    pub device: &'a str,
    pub display_name: &'a str,
    pub kernel_count: i64,
    pub nbufs: usize,
    pub mem_used: i64,
    pub op_estimate: i64,
    pub mem_estimate: i64,
    /// Seconds this item took (`None` when it was not timed).
    pub et: Option<f64>,
    /// `GlobalCounters.time_sum_s` after this item.
    pub time_sum_s: f64,
    pub jit: bool,
    pub first_run: bool,
}

/// The `DEBUG>=2` line of one executed item (see the module doc for the format).
pub fn exec_line(s: &ExecStats<'_>) -> String {
    let header_color = if s.jit {
        Some("magenta")
    } else if s.first_run {
        Some("green")
    } else {
        None
    };
    let header = format!("*** {:<7} {:4}", head(s.device, 7), s.kernel_count);
    let pad = 38usize.saturating_sub(ansilen(s.display_name));
    let mut line = format!(
        "{} {}{} arg {:3} mem {:5.2} GB ",
        colored(&header, header_color),
        s.display_name,
        " ".repeat(pad),
        s.nbufs,
        s.mem_used as f64 / 1e9
    );
    if let Some(et) = s.et {
        let ptm = if et > 0.01 {
            colored(&format!("{:9.2}ms", et * 1e3), Some("yellow"))
        } else {
            format!("{:9.2}us", et * 1e6)
        };
        let t = if et == 0.0 { 1e-20 } else { et };
        line.push_str(&format!(
            "tm {ptm}/{:9.2}ms ({:8.2} GFLOPS, {:7.2} GB/s)",
            s.time_sum_s * 1e3,
            s.op_estimate as f64 / (t * 1e9),
            s.mem_estimate as f64 / (t * 1e9)
        ));
    }
    line
}

/// The kernel name as tinygrad's linearizer colors it: the kind prefix (`r`, `C`, `E`, with the
/// output count), each dim of `full_shape` in its axis color joined by grey `_`, then the dedup
/// suffix (`n1`, ...) in grey (an empty grey span when there is none).
pub fn colored_kernel_name(
    prefix: &str,
    full_shape: &[Sint],
    colors: &[&str],
    suffix: &str,
) -> String {
    let dims: Vec<String> = full_shape
        .iter()
        .zip(colors)
        .map(|(s, c)| colored(&format!("{s:?}"), Some(c)))
        .collect();
    format!(
        "{prefix}{}{}",
        dims.join(&colored("_", Some("BLACK"))),
        colored(suffix, Some("BLACK"))
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::helpers::ansistrip;
    use crate::shape::Node;

    fn stats(et: Option<f64>) -> ExecStats<'static> {
        ExecStats {
            device: "CLANG",
            display_name: "E_4_4",
            kernel_count: 1,
            nbufs: 3,
            mem_used: 0,
            op_estimate: 16,
            mem_estimate: 192,
            et,
            time_sum_s: 0.0,
            jit: false,
            first_run: false,
        }
    }

    #[test]
    fn line_matches_tinygrad_format() {
        let mut s = stats(Some(2e-6));
        s.time_sum_s = 1e-5;
        let want = format!(
            "*** CLANG      1 E_4_4{} arg   3 mem  0.00 GB tm      2.00us/     0.01ms (    0.01 GFLOPS,    0.10 GB/s)",
            " ".repeat(33)
        );
        assert_eq!(exec_line(&s), want);
        // Untimed: the line ends after the memory field (with its trailing space).
        let line = exec_line(&stats(None));
        assert!(line.ends_with("arg   3 mem  0.00 GB "), "{line:?}");
    }

    #[test]
    fn header_colors_and_long_names() {
        let mut s = stats(Some(0.02));
        s.first_run = true;
        s.device = "AMD:12345";
        let line = exec_line(&s);
        assert!(
            line.starts_with("\x1b[32m*** AMD:123    1\x1b[0m "),
            "{line:?}"
        );
        assert!(line.contains("tm \x1b[33m    20.00ms\x1b[0m/"), "{line:?}");
        s.jit = true;
        assert!(exec_line(&s).starts_with("\x1b[35m*** "));
        let long = "x".repeat(45);
        s.display_name = &long;
        let plain = ansistrip(&exec_line(&s));
        assert!(plain.contains(&format!("{long} arg ")), "{plain:?}");
    }

    #[test]
    fn kernel_names_are_colored_per_axis() {
        let shape = [Node::Num(4), Node::Num(16)];
        let name = colored_kernel_name("r_", &shape, &["blue", "red"], "n1");
        assert_eq!(
            name,
            "r_\x1b[34m4\x1b[0m\x1b[90m_\x1b[0m\x1b[31m16\x1b[0m\x1b[90mn1\x1b[0m"
        );
        assert_eq!(ansistrip(&name), "r_4_16n1");
        assert_eq!(
            ansilen(&colored_kernel_name("E_", &shape, &["blue", "blue"], "")),
            6
        );
    }

    #[test]
    fn capture_collects_and_nests() {
        let ((), outer) = capture_debug_output(|| {
            debug_print("a");
            let ((), inner) = capture_debug_output(|| debug_print("b"));
            assert_eq!(inner, vec!["b".to_string()]);
            debug_print("c");
        });
        assert_eq!(outer, vec!["a".to_string(), "c".to_string()]);
    }
}
