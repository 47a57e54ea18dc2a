//! BEAM's candidates from kernel to binary, on the worker pool: each candidate is linearized and
//! rendered under a name of its own (`linearize_as`, so the process-wide kernel name counter is
//! untouched), candidates whose UOp programs equal one seen before in this search are dropped
//! before compiling (tinygrad drops them after compiling, by equal binaries), and the rest are
//! compiled: in batches of joined sources where the compiler allows it (C), else one by one.
//!
//! Rules of tinygrad 0.9.1's `_try_compile_linearized_w_idx`: a candidate with `BEAM_UOPS_MAX`
//! (3000) UOps or more is dropped; a compile runs at most `BEAM_TIMEOUT_SEC` (10) seconds; errors
//! drop the candidate unless `BEAM_STRICT_MODE` is set. A batch that fails or times out is
//! compiled again one candidate at a time, so one bad candidate drops only itself.
//!
//! Not guaranteed: a timed-out compile is abandoned, not stopped (see `pool.rs`).

use std::collections::HashSet;
use std::hash::{Hash, Hasher};
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::pool::{run_parallel, Job, Outcome};
use crate::codegen::kernel::Kernel;
use crate::codegen::program::ProgramSpec;
use crate::device::registry::Compiled;
use crate::helpers::{debug, getenv};
use crate::{Error, Result};

/// A compiled candidate: its program, the binary holding it, and the compile time.
pub(crate) struct Candidate {
    pub p: ProgramSpec,
    pub lib: Arc<[u8]>,
    pub compile_s: f64,
}

/// What a search has seen: a 64-bit hash of each UOp program (with its launch dims) already
/// compiled, so the memory it holds stays small however many candidates a search makes.
#[derive(Default)]
pub(crate) struct Seen {
    programs: HashSet<u64>,
}

impl Seen {
    /// Whether `p` is new (and remember it).
    fn insert(&mut self, p: &ProgramSpec) -> bool {
        let mut h = std::collections::hash_map::DefaultHasher::new();
        p.uops.hash(&mut h);
        format!("{:?} {:?}", p.global_size, p.local_size).hash(&mut h);
        self.programs.insert(h.finish())
    }
}

fn strict() -> bool {
    getenv("BEAM_STRICT_MODE", 0) != 0
}

fn timeout() -> Duration {
    Duration::from_secs(getenv("BEAM_TIMEOUT_SEC", 10).max(1) as u64)
}

/// A failed candidate: an error with `BEAM_STRICT_MODE`, else dropped (shown at `DEBUG>=4`).
fn dropped<T>(what: &str, outcome: Outcome<Result<T>>) -> Result<Option<T>> {
    let err = match outcome {
        Outcome::Done(Ok(v)) => return Ok(Some(v)),
        Outcome::Done(Err(e)) => e,
        Outcome::TimedOut => Error::Timeout(format!("{what}: over BEAM_TIMEOUT_SEC")),
        Outcome::Panicked(m) => Error::Internal(format!("{what}: panicked: {m}")),
    };
    if strict() {
        return Err(err);
    }
    if debug() >= 4 {
        println!("BEAM: dropped {what}: {}", err.message());
    }
    Ok(None)
}

/// Linearize and render one candidate as `name`.
fn program_of(mut k: Kernel, dev: &Compiled, name: &str) -> Result<ProgramSpec> {
    let n = k.linearize_as(name)?.uops.len();
    let max = getenv("BEAM_UOPS_MAX", 3000);
    if max > 0 && n as i64 >= max {
        return Err(Error::Codegen(format!("too many uops ({n})")));
    }
    k.to_program(&*dev.renderer)
}

/// Linearize, dedup and compile `kernels` (in order); `None` for a dropped or duplicate one.
pub(crate) fn compile_candidates(
    kernels: &[Kernel],
    dev: &Arc<Compiled>,
    seen: &mut Seen,
    workers: usize,
) -> Result<Vec<Option<Candidate>>> {
    let stem = format!("beam{}", std::process::id());
    let jobs: Vec<Job<Result<ProgramSpec>>> = (kernels.iter().enumerate())
        .map(|(i, k)| {
            let (k, dev, name) = (k.clone(), Arc::clone(dev), format!("{stem}_{i}"));
            Box::new(move || program_of(k, &dev, &name)) as Job<Result<ProgramSpec>>
        })
        .collect();
    let mut progs: Vec<Option<ProgramSpec>> = vec![];
    for (i, o) in run_parallel(jobs, workers, timeout())
        .into_iter()
        .enumerate()
    {
        let p = dropped(&format!("candidate {i}"), o)?;
        // tinygrad skips a program whose binary was timed before; equal UOps give equal binaries
        let fresh = p.filter(|p| seen.insert(p));
        progs.push(fresh);
    }
    compile_programs(progs, dev, workers)
}

/// One compile job: the candidates (by position) and their joined source.
struct Batch {
    members: Vec<usize>,
    src: String,
}

fn batches(progs: &[Option<ProgramSpec>], joins: bool, workers: usize) -> Vec<Batch> {
    let live: Vec<usize> = (0..progs.len()).filter(|&i| progs[i].is_some()).collect();
    let size = if joins {
        live.len().div_ceil(workers.max(1)).clamp(1, 24)
    } else {
        1
    };
    live.chunks(size)
        .map(|c| Batch {
            members: c.to_vec(),
            src: (c.iter())
                .filter_map(|&i| progs[i].as_ref().map(|p| p.src.as_str()))
                .collect::<Vec<_>>()
                .join("\n"),
        })
        .collect()
}

/// A compiled batch: the binary and the compile time in seconds.
type BatchResult = Result<(Vec<u8>, f64)>;

fn compile_jobs(batches: &[Batch], dev: &Arc<Compiled>) -> Vec<Job<BatchResult>> {
    (batches.iter())
        .map(|b| {
            let (src, dev) = (b.src.clone(), Arc::clone(dev));
            Box::new(move || {
                let st = Instant::now();
                let lib = dev.compiler.compile(&src)?;
                Ok((lib, st.elapsed().as_secs_f64()))
            }) as Job<BatchResult>
        })
        .collect()
}

/// Compile the programs (batched where the compiler joins sources); a failed batch is retried one
/// program at a time.
fn compile_programs(
    progs: Vec<Option<ProgramSpec>>,
    dev: &Arc<Compiled>,
    workers: usize,
) -> Result<Vec<Option<Candidate>>> {
    let joins = dev.compiler.joins_sources();
    let first = batches(&progs, joins, workers);
    let mut libs: Vec<Option<(Arc<[u8]>, f64)>> = vec![None; progs.len()];
    let mut retry: Vec<usize> = vec![];
    let outcomes = run_parallel(compile_jobs(&first, dev), workers, timeout());
    for (b, o) in first.iter().zip(outcomes) {
        match o {
            Outcome::Done(Ok((lib, t))) => {
                let lib: Arc<[u8]> = lib.into();
                let per = t / b.members.len() as f64;
                for &i in &b.members {
                    libs[i] = Some((Arc::clone(&lib), per));
                }
            }
            o if b.members.len() > 1 => {
                if debug() >= 4 {
                    println!(
                        "BEAM: a batch of {} failed ({o:?}); one by one",
                        b.members.len()
                    );
                }
                retry.extend(&b.members);
            }
            o => {
                let what = format!("compile of candidate {}", b.members[0]);
                if let Some((lib, t)) = dropped(&what, o)? {
                    libs[b.members[0]] = Some((lib.into(), t));
                }
            }
        }
    }
    if !retry.is_empty() {
        let single: Vec<Batch> = (retry.iter())
            .filter_map(|&i| {
                let p = progs[i].as_ref()?;
                Some(Batch {
                    members: vec![i],
                    src: p.src.clone(),
                })
            })
            .collect();
        let outcomes = run_parallel(compile_jobs(&single, dev), workers, timeout());
        for (b, o) in single.iter().zip(outcomes) {
            let what = format!("compile of candidate {}", b.members[0]);
            if let Some((lib, t)) = dropped(&what, o)? {
                libs[b.members[0]] = Some((lib.into(), t));
            }
        }
    }
    Ok(progs
        .into_iter()
        .zip(libs)
        .map(|(p, l)| {
            let (p, (lib, compile_s)) = (p?, l?);
            Some(Candidate { p, lib, compile_s })
        })
        .collect())
}
