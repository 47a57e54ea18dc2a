//! The LLVM form of transposed row accumulators (`llvmir/rows.rs` chooses the loops): the group's
//! 8 float accumulators ride the loop as one `<8 x float>` header phi instead of 8 float phis,
//! built from their values on entry; at the group's last PHI the 8 float4 become 4 transposed
//! vectors (`shufflevector`) added to it in order; after the loop each accumulator, and every
//! PHI of it, is its lane (`extractelement`). The chains' own ADDs and GEPs are not written.
//!
//! Why: the scalar chains made LLVM's SLP vectorizer build the same transpose, and instruction
//! selection spend a quarter of the compile simplifying its shuffles. Under LLVM 14 (`bench
//! llvmc`): W10's variance kernel 6.49-6.51 -> 5.00-5.01 ms, its mean 5.44-5.63 -> 4.15-4.23,
//! W2's row sum 5.47-5.66 -> 4.07-4.24; W10 steady 5.26-5.36 -> 4.79-4.80 ms on one thread.
//!
//! Not guaranteed: any other loop shape keeps the scalar phis.

use std::rc::Rc;

use super::{emit, Walk};
use crate::codegen::uops::UOp;
use crate::renderer::llvmir::rows::{transpose_masks, LANES, ROWS};
use crate::renderer::text::cat;
use crate::{Error, Result};

/// A group's vector accumulator in an open loop.
pub(super) struct VAcc {
    pub group: usize,
    /// The header phi's name.
    pub phi: String,
    /// The vector on entry.
    pub entry: Rc<str>,
    /// The vector at the latch, once the group's last PHI was written.
    pub next: Option<Rc<str>>,
}

const V8: &str = "<8 x float>";

fn mask(lanes: &[u32; 8]) -> String {
    let l: Vec<String> = lanes.iter().map(|i| cat!("i32 ", i)).collect();
    cat!("<8 x i32> <", l.join(", "), ">")
}

impl Walk<'_> {
    /// At the RANGE `u` (loop number `n`), before its header: the vector accumulator of its
    /// group, and the group's accumulators taken out of the loop's scalar ones (`accs`).
    pub(super) fn open_rows(
        &mut self,
        u: &UOp,
        n: usize,
        accs: &mut Vec<(UOp, String, Rc<str>)>,
    ) -> Result<Option<VAcc>> {
        let Some(&g) = self.rows.by_range.get(u) else {
            return Ok(None);
        };
        let group = &self.rows.groups[g];
        let members = group.accs.clone();
        accs.retain(|(a, ..)| !members.contains(a));
        let mut cur: Rc<str> = Rc::from("poison");
        for (r, a) in members.iter().enumerate() {
            let v = self.val(a)?;
            let name = self.ssa("rows");
            emit!(self; "  ", name, " = insertelement ", V8, " ", cur, ", float ", v, ", i32 ", r);
            cur = name;
        }
        let phi = cat!("%rows.acc", n);
        self.rows.groups[g].vacc = phi.clone();
        Ok(Some(VAcc {
            group: g,
            phi,
            entry: cur,
            next: None,
        }))
    }

    /// A group PHI: noted for after the loop; at the group's last, the transpose and the adds.
    pub(super) fn row_phi(&mut self, u: &UOp, g: usize, root: UOp) -> Result<()> {
        self.acc_phis.entry(root).or_default().push(u.clone());
        if self.rows.groups[g].last_phi != *u {
            return Ok(());
        }
        let group = self.rows.groups[g].clone();
        let v = group
            .vecs
            .iter()
            .map(|x| self.val(x))
            .collect::<Result<Vec<_>>>()?;
        let m = transpose_masks();
        let v4 = "<4 x float>";
        let mut w = vec![];
        for r in 0..ROWS / 2 {
            let name = self.ssa("rows");
            emit!(self; "  ", name, " = shufflevector ", v4, " ", v[r], ", ", v4, " ", v[r + 4], ", ", mask(&m.pair));
            w.push(name);
        }
        let shuffle = |s: &mut Self, a: &str, b: &str, lanes: &[u32; 8]| {
            let name = s.ssa("rows");
            emit!(s; "  ", name, " = shufflevector ", V8, " ", a, ", ", V8, " ", b, ", ", mask(lanes));
            name
        };
        let u0 = shuffle(self, &w[0], &w[1], &m.lo);
        let u1 = shuffle(self, &w[0], &w[1], &m.hi);
        let u2 = shuffle(self, &w[2], &w[3], &m.lo);
        let u3 = shuffle(self, &w[2], &w[3], &m.hi);
        let mut acc: Rc<str> = Rc::from(group.vacc.as_str());
        for k in 0..LANES {
            let (a, b) = if k < 2 { (&u0, &u2) } else { (&u1, &u3) };
            let t = shuffle(self, a, b, &m.steps[k]);
            let name = self.ssa("rows");
            let (x, y) = if group.acc_first[k] {
                (&acc, &t)
            } else {
                (&t, &acc)
            };
            let fmf = self.fmf;
            emit!(self; "  ", name, " = fadd", fmf, " ", V8, " ", x, ", ", y);
            acc = name;
        }
        let lp = self
            .loops
            .last_mut()
            .ok_or_else(|| Error::Codegen("a transposed row group outside its loop".into()))?;
        let va =
            lp.vacc.as_mut().filter(|va| va.group == g).ok_or_else(|| {
                Error::Codegen("a transposed row group's PHI in another loop".into())
            })?;
        va.next = Some(acc);
        Ok(())
    }

    /// The header phi of a vector accumulator, with the loop's `pre` and `latch` blocks.
    pub(super) fn row_header_phi(va: &VAcc, pre: &str, latch: &str) -> Result<String> {
        let next = va.next.as_ref().ok_or_else(|| {
            Error::Codegen("a transposed row group's loop ended before its last PHI".into())
        })?;
        Ok(cat!(
            "  ", va.phi, " = phi ", V8, " [ ", va.entry, ", %", pre, " ], [ ", next, ", %", latch,
            " ]"
        ))
    }

    /// After the loop: each accumulator of the group, and every PHI of it, is its lane.
    pub(super) fn close_rows(&mut self, vacc: Option<VAcc>) -> Result<()> {
        if let Some(va) = vacc {
            let accs = self.rows.groups[va.group].accs.clone();
            for (r, acc) in accs.into_iter().enumerate() {
                let name = self.ssa("acc");
                emit!(self; "  ", name, " = extractelement ", V8, " ", va.phi, ", i32 ", r);
                for p in self.acc_phis.get(&acc).cloned().unwrap_or_default() {
                    self.r.insert(p, name.clone());
                }
                self.r.insert(acc, name);
            }
        }
        Ok(())
    }
}
