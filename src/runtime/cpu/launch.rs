//! The CPU launch policy: how many cores a CPU kernel (CLANG, LLVM: no launch dims) is split
//! over, and how much of it a BEAM test-size run times.
//!
//! The C and LLVM renderers split one loop across cores: the outermost non-reduce RANGE whose
//! body holds every store (`renderer::cstyle::split_range`). A [`CpuLaunch`] is built from the
//! program once, when the runtime loads it, and answers per call from the kernel's variable
//! values (in the kernel's variable order, as the engine passes them):
//!
//! - [`CpuLaunch::dims`]: `[n, 1, 1]`, `n` the cores worth using: the extent of the split loop,
//!   capped so that each core gets at least [`MIN_WORK_PER_CORE`] units of work (flops plus bytes
//!   of the program's estimates); `[1, 1, 1]` when the kernel has no splittable loop; `None` when
//!   a bound of the loop is not known (then the program uses every core the knob allows).
//! - [`CpuLaunch::test_part`]: for BEAM (beyond tinygrad 0.9.1, which times CPU kernels whole),
//!   the fraction `1/f` of the split loop to run, `f` chosen so the timed work is near the test
//!   size, with the loop's extent to scale the time back to the whole loop.
//!
//! Not guaranteed: the work estimate is the program's static one (the cap is a heuristic, not a
//! measurement).

use crate::codegen::program::ProgramSpec;
use crate::codegen::uops::{UArg, UOp, UOps};
use crate::device::LaunchDims;
use crate::dtype::ConstValue;
use crate::renderer::cstyle::split_range;
use crate::shape::{sym_infer, Node, Sint, VarVals};
use crate::Result;

/// The least work (flops + bytes) worth handing one more CPU core.
pub const MIN_WORK_PER_CORE: i64 = 1 << 16;

/// A bound of the split loop.
#[derive(Clone, Debug)]
enum Bound {
    Const(i64),
    /// A kernel variable, by its position in the kernel's variable order.
    Var(usize),
    Unknown,
}

/// The launch policy of one CPU program (see the module doc).
#[derive(Clone, Debug)]
pub struct CpuLaunch {
    /// The split loop's (start, end); `None` when no loop can be split.
    split: Option<(Bound, Bound)>,
    vars: Vec<Node>,
    op_estimate: Sint,
    mem_estimate: Sint,
}

/// A test-size run: `parts` shares of `of` run, of a split loop of `extent` iterations.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TestPart {
    /// The launch dims of a whole run.
    pub global: LaunchDims,
    /// How many times more shares than a whole run the loop is cut into.
    pub fraction: usize,
    /// The split loop's extent.
    pub extent: i64,
}

fn bound_of(u: Option<&UOp>, vars: &[Node]) -> Bound {
    let Some(u) = u else { return Bound::Unknown };
    match (u.op(), u.arg()) {
        (UOps::CONST, UArg::Const(ConstValue::Int(v))) => {
            i64::try_from(*v).map_or(Bound::Unknown, Bound::Const)
        }
        (UOps::DEFINE_VAR, UArg::Var { name, .. }) => vars
            .iter()
            .position(|v| v.expr() == Some(name.as_str()))
            .map_or(Bound::Unknown, Bound::Var),
        _ => Bound::Unknown,
    }
}

impl CpuLaunch {
    /// The policy of a program without launch dims.
    pub fn of(p: &ProgramSpec) -> CpuLaunch {
        let split = split_range(&p.uops).and_then(|i| p.uops.get(i)).map(|r| {
            (
                bound_of(r.src().first(), &p.vars),
                bound_of(r.src().get(1), &p.vars),
            )
        });
        CpuLaunch {
            split,
            vars: p.vars.clone(),
            op_estimate: p.op_estimate.clone(),
            mem_estimate: p.mem_estimate.clone(),
        }
    }

    /// The extent of the split loop for these variable values (`None` when the kernel has no
    /// split loop or a bound is unknown).
    fn extent(&self, vals: &[i64]) -> Option<i64> {
        let (start, end) = self.split.as_ref()?;
        let value = |b: &Bound| -> Option<i64> {
            match b {
                Bound::Const(v) => Some(*v),
                Bound::Var(i) => vals.get(*i).copied(),
                Bound::Unknown => None,
            }
        };
        value(end)?.checked_sub(value(start)?)
    }

    /// The estimated work (flops + bytes) of one run.
    fn work(&self, vals: &[i64]) -> Result<i64> {
        let var_vals: VarVals = self
            .vars
            .iter()
            .cloned()
            .zip(vals.iter().copied())
            .collect();
        Ok(sym_infer(&self.op_estimate, &var_vals)?
            .saturating_add(sym_infer(&self.mem_estimate, &var_vals)?))
    }

    /// `[n, 1, 1]`: the cores worth using (see the module doc).
    pub fn dims(&self, vals: &[i64]) -> Result<Option<LaunchDims>> {
        if self.split.is_none() {
            return Ok(Some([1, 1, 1]));
        }
        let Some(extent) = self.extent(vals) else {
            return Ok(None);
        };
        let cap = (self.work(vals)? / MIN_WORK_PER_CORE).max(1);
        let n = extent.clamp(1, cap);
        Ok(Some([usize::try_from(n).unwrap_or(1), 1, 1]))
    }

    /// The part of the kernel a BEAM test-size run of about `max_work` units times; `None` when
    /// the kernel is timed whole.
    pub fn test_part(&self, vals: &[i64], max_work: i64) -> Result<Option<TestPart>> {
        let (Some(extent), Some(global)) = (self.extent(vals), self.dims(vals)?) else {
            return Ok(None);
        };
        let threads = i64::try_from(global[0].max(1)).unwrap_or(i64::MAX);
        let f = (self.work(vals)? / max_work.max(1)).clamp(1, (extent / threads).max(1));
        if f <= 1 {
            return Ok(None);
        }
        Ok(Some(TestPart {
            global,
            fraction: usize::try_from(f).unwrap_or(1),
            extent,
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::codegen::uopgraph::linearize;
    use crate::dtype::dtypes;

    /// `out[i*3 + j] = j` over i in [0, end), j in [0, 3): the i loop is the split one.
    fn spec(end: UOp, vars: Vec<Node>, work: i64) -> ProgramSpec {
        let d0 = UOp::define_global(dtypes::int32, 0, true);
        let r0 = UOp::range(UOp::cnst(dtypes::int32, 0), end, 0, 0, false);
        let r1 = UOp::range_const(0, 3, 1, 1, false);
        let st = UOp::store(&d0, &r0.mul(3).add(&r1), &r1);
        ProgramSpec {
            name: "k".into(),
            function_name: "k".into(),
            device: "CLANG".into(),
            src: String::new(),
            uops: linearize(&[st], None, true).unwrap(),
            global_size: None,
            local_size: None,
            vars,
            outs: vec![0],
            op_estimate: Node::Num(work),
            mem_estimate: Node::Num(0),
            applied_opts: vec![],
        }
    }

    #[test]
    fn cores_follow_the_loop_extent_and_the_work() {
        let n = |end: i64, work: i64| {
            CpuLaunch::of(&spec(UOp::cnst(dtypes::int32, end), vec![], work))
                .dims(&[])
                .unwrap()
        };
        // work for 3 cores, a loop of 10: 3 cores; plenty of work: the loop's extent bounds it
        assert_eq!(n(10, 3 * MIN_WORK_PER_CORE), Some([3, 1, 1]));
        assert_eq!(n(10, 1000 * MIN_WORK_PER_CORE), Some([10, 1, 1]));
        assert_eq!(n(10, 1), Some([1, 1, 1]));
    }

    #[test]
    fn a_variable_bound_is_read_from_the_values() {
        let v = Node::var("n", 1, 100).unwrap();
        let p = spec(UOp::define_var("n", 1, 100), vec![v], 1 << 40);
        let l = CpuLaunch::of(&p);
        assert_eq!(l.dims(&[40]).unwrap(), Some([40, 1, 1]));
        // no value for the bound: unknown, the program's knob decides
        assert_eq!(l.dims(&[]).unwrap(), None);
        // one share per core already: nothing smaller to time
        assert_eq!(l.test_part(&[40], 1).unwrap(), None);
        // work for 4 cores: BEAM times about 1/5 of the loop (the work over the test size)
        let w = 4 * MIN_WORK_PER_CORE;
        let v = Node::var("n", 1, 100).unwrap();
        let l = CpuLaunch::of(&spec(UOp::define_var("n", 1, 100), vec![v], w));
        let part = l.test_part(&[40], w / 5).unwrap().unwrap();
        assert_eq!(
            (part.global, part.fraction, part.extent),
            ([4, 1, 1], 5, 40)
        );
        // a test size above the work: timed whole
        assert_eq!(l.test_part(&[40], 2 * w).unwrap(), None);
    }

    #[test]
    fn a_kernel_without_a_split_loop_runs_on_one_core() {
        let d0 = UOp::define_global(dtypes::int32, 0, true);
        let rr = UOp::range_const(0, 10, 2, 0, true);
        let acc = UOp::define_acc(dtypes::int32, 0, std::slice::from_ref(&rr), 0, 0);
        let st = UOp::store(
            &d0,
            &UOp::cnst(dtypes::int32, 0),
            &UOp::phi(&acc, &rr.add(&acc)),
        );
        let mut p = spec(UOp::cnst(dtypes::int32, 1), vec![], 1 << 40);
        p.uops = linearize(&[st], None, true).unwrap();
        let l = CpuLaunch::of(&p);
        assert_eq!(l.dims(&[]).unwrap(), Some([1, 1, 1]));
        assert_eq!(l.test_part(&[], 1).unwrap(), None);
    }
}
