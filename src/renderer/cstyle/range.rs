//! The C rendering of a RANGE loop header, and the choice of the loop the CPU devices split
//! across cores (`ncores` threads each run `[n*core/ncores, n*(core+1)/ncores)` of it).
//!
//! Not guaranteed: a kernel without such a loop runs on one core.

use super::{CStyle, State};
use crate::codegen::uops::{UOp, UOps};
use crate::renderer::text::cat;
use crate::Result;

/// The position of the RANGE to split across cores: the first non-reduce RANGE at nesting 0 whose
/// body holds every STORE of the kernel.
pub fn split_range(uops: &[UOp]) -> Option<usize> {
    let mut nest = 0usize;
    let mut found = None;
    for (i, u) in uops.iter().enumerate() {
        match u.op() {
            UOps::RANGE => {
                if nest == 0 && found.is_none() && u.range_arg().is_some_and(|(_, _, red)| !red) {
                    found = Some(i);
                }
                nest += 1;
            }
            UOps::IF => nest += 1,
            UOps::ENDRANGE | UOps::ENDIF => nest = nest.saturating_sub(1),
            _ => {}
        }
    }
    let start = found?;
    let range = &uops[start];
    let end = uops
        .iter()
        .position(|u| u.op() == UOps::ENDRANGE && u.src().first() == Some(range))?;
    let all_inside = uops
        .iter()
        .enumerate()
        .filter(|(_, u)| u.op() == UOps::STORE)
        .all(|(i, _)| i > start && i < end);
    all_inside.then_some(start)
}

pub(super) fn render_range<L: CStyle + ?Sized>(
    st: &mut State,
    u: &UOp,
    split: bool,
    _l: &L,
) -> Result<()> {
    let (start, end) = (st.src(u, 0)?, st.src(u, 1)?);
    let x = st.ssa("ridx", Some(u));
    let (lo, hi) = if split {
        let n = if start == "0" {
            end.clone()
        } else {
            cat!("(", end, "-", start, ")")
        };
        let base = if start == "0" {
            String::new()
        } else {
            cat!(start, "+")
        };
        (
            cat!(base, "(int)(((long long)", n, "*core)/ncores)"),
            cat!(base, "(int)(((long long)", n, "*(core+1))/ncores)"),
        )
    } else {
        (start, end)
    };
    kk!(st; "for (int ", x, " = ", lo, "; ", x, " < ", hi, "; ", x, "++) {");
    st.depth += 1;
    Ok(())
}
