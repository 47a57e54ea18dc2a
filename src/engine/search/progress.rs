//! What a BEAM search reports while it runs and when it is done.
//!
//! - `DEBUG>=1` (beyond tinygrad, which is silent there): one progress line on stderr, rewritten in
//!   place after every timed candidate: kernel, round, candidates tried and timed, the best time
//!   so far and the elapsed time; it ends with a newline when the search is done.
//! - `DEBUG>=2`: tinygrad 0.9.1's lines instead (also on stderr, so they never mix with a
//!   program's output): one per candidate, rewritten in place (elapsed, time, timed/tried,
//!   shape), and one per round (elapsed, the best time, green on the last round, candidates
//!   tried -> timed, the shape).
//! - `BEAM_DEBUG>1`: one line per timed candidate (uops, compile and run time).
//!
//! [`BeamStats`] gives the same counts to callers (`bench beam`, the tests).

use std::io::Write;
use std::time::Instant;

use super::candidates::Candidate;
use crate::codegen::kernel::Kernel;
use crate::helpers::{colored, debug, getenv};

/// The counts of one search.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct BeamStats {
    /// Whether the answer came from the disk cache (nothing was searched).
    pub cached: bool,
    pub rounds: usize,
    /// Candidates generated (every beam entry's actions, each round).
    pub tried: usize,
    /// Candidates compiled and timed.
    pub timed: usize,
    /// The best time found (seconds; infinity when nothing was timed).
    pub best_s: f64,
    pub elapsed_s: f64,
}

/// The state of the lines of one search.
pub(crate) struct Progress {
    st: Instant,
    name: String,
    pub stats: BeamStats,
    /// Tried and timed in the current round.
    round_tried: usize,
    round_timed: usize,
}

/// The `DEBUG>=1` line: `BEAM 2 r_64_64_64: round 3, 296 tried, 201 timed, best 12.34 us, 1.52 s`.
pub fn progress_line(name: &str, amt: usize, s: &BeamStats) -> String {
    let best = if s.best_s.is_finite() {
        format!("{:.2} us", s.best_s * 1e6)
    } else {
        "-".to_string()
    };
    format!(
        "BEAM {amt} {name}: round {}, {} tried, {} timed, best {best}, {:.2} s",
        s.rounds, s.tried, s.timed, s.elapsed_s
    )
}

impl Progress {
    pub(crate) fn start(k: &Kernel) -> Progress {
        if getenv("BEAM_DEBUG", 0) != 0 {
            eprintln!("BEAM_SEARCH:\n{:?}", k.ast);
        }
        if debug() >= 2 {
            eprintln!(
                "   0.00s:                 from   1 ->   1 actions {}",
                k.colored_shape(None, false)
            );
        }
        Progress {
            st: Instant::now(),
            name: k.base_name(),
            stats: BeamStats {
                best_s: f64::INFINITY,
                ..BeamStats::default()
            },
            round_tried: 0,
            round_timed: 0,
        }
    }

    fn elapsed(&self) -> f64 {
        self.st.elapsed().as_secs_f64()
    }

    /// A new round of `tried` candidates.
    pub(crate) fn round_start(&mut self, tried: usize) {
        self.stats.rounds += 1;
        self.stats.tried += tried;
        (self.round_tried, self.round_timed) = (tried, 0);
    }

    /// Candidate `i` (of this round) ran in `tm` seconds.
    pub(crate) fn candidate(&mut self, i: usize, c: &Candidate, tm: f64, k: &Kernel, amt: usize) {
        self.stats.timed += 1;
        self.round_timed += 1;
        self.stats.best_s = self.stats.best_s.min(tm);
        self.stats.elapsed_s = self.elapsed();
        let (timed, tried) = (self.round_timed, self.round_tried);
        if getenv("BEAM_DEBUG", 0) > 1 {
            eprintln!(
                "{:7.2}s: {i:5} {:5} uops {:12.2} us compile/{:12.2} us run       {timed:4}/{tried:4}         {}",
                self.stats.elapsed_s,
                c.p.uops.len(),
                c.compile_s * 1e6,
                tm * 1e6,
                k.colored_shape(None, false)
            );
        } else if debug() >= 2 {
            eprint!(
                "\r{:7.2}s: {:12.2} us       {timed:4}/{tried:4}         {}\x1b[K",
                self.stats.elapsed_s,
                tm * 1e6,
                k.colored_shape(None, false)
            );
        } else if debug() >= 1 {
            eprint!("\r{}\x1b[K", progress_line(&self.name, amt, &self.stats));
        }
        let _ = std::io::stderr().flush();
    }

    /// The round ended with `best` (its time in seconds) after `timed` candidates.
    pub(crate) fn round_end(&mut self, best: (&Kernel, f64), exiting: bool) {
        self.stats.elapsed_s = self.elapsed();
        if debug() >= 2 {
            let tm = format!("{:12.2} us", best.1 * 1e6);
            eprintln!(
                "\r{:7.2}s: {} from {:3} -> {:3} actions\x1b[K {}",
                self.stats.elapsed_s,
                colored(&tm, exiting.then_some("green")),
                self.round_tried,
                self.round_timed,
                best.0.colored_shape(None, false)
            );
        }
    }

    /// The search is done: the best kernel and its time.
    pub(crate) fn finish(&mut self, best: (&Kernel, f64), amt: usize) -> BeamStats {
        self.stats.elapsed_s = self.elapsed();
        self.stats.best_s = best.1;
        if debug() == 1 && getenv("BEAM_DEBUG", 0) <= 1 {
            eprintln!("\r{}\x1b[K", progress_line(&self.name, amt, &self.stats));
        }
        if getenv("BEAM_DEBUG", 0) != 0 {
            let opts: Vec<String> = best.0.applied_opts.iter().map(|o| o.to_string()).collect();
            eprintln!(
                "BEAM_SEARCH: final tm={:0.2} us, applied_opts=[{}]",
                best.1 * 1e6,
                opts.join(", ")
            );
        }
        self.stats.clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_progress_line_says_what_was_done() {
        let mut s = BeamStats {
            rounds: 3,
            tried: 296,
            timed: 201,
            best_s: 12.5e-6,
            elapsed_s: 1.5,
            cached: false,
        };
        assert_eq!(
            progress_line("r_64_64_64", 2, &s),
            "BEAM 2 r_64_64_64: round 3, 296 tried, 201 timed, best 12.50 us, 1.50 s"
        );
        s.best_s = f64::INFINITY;
        assert!(progress_line("E_4", 1, &s).contains("best -,"));
    }
}
