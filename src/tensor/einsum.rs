//! tinygrad 0.9.1's `einsum`: each operand is permuted to the sorted letter order, reshaped and
//! expanded onto every letter of the formula, the operands are multiplied, the letters missing
//! from the output are summed away, and the result is permuted to the output's order. Without
//! `->` the output is the letters that appear once, sorted.
//!
//! Not guaranteed: a letter repeated inside one operand (a diagonal, `ii->i`) and `...` are
//! refused with an error (0.9.1 fails on them too).

use std::collections::BTreeMap;

use super::{fmt_shape, to_sints, Tensor};
use crate::dtype::DType;
use crate::{bail, ensure, Result};

/// The positions that sort `v` (Python's `argsort`).
fn argsort<T: Ord>(v: &[T]) -> Vec<usize> {
    let mut idx: Vec<usize> = (0..v.len()).collect();
    idx.sort_by(|&a, &b| v[a].cmp(&v[b]));
    idx
}

impl Tensor {
    /// tinygrad's `Tensor.einsum(formula, *xs)`.
    pub fn einsum(formula: &str, xs: &[&Tensor]) -> Result<Tensor> {
        Tensor::einsum_acc(formula, xs, None)
    }

    /// `einsum` with an accumulation dtype for the sum.
    pub fn einsum_acc(formula: &str, xs: &[&Tensor], acc_dtype: Option<DType>) -> Result<Tensor> {
        let f: String = formula.chars().filter(|c| !c.is_whitespace()).collect();
        let (inputs_str, output) = match f.split_once("->") {
            Some((i, o)) => (i.to_string(), o.to_string()),
            None => {
                let mut once: Vec<char> = (f.chars())
                    .filter(|c| c.is_alphabetic() && f.matches(*c).count() == 1)
                    .collect();
                once.sort_unstable();
                (f.clone(), once.into_iter().collect())
            }
        };
        let inputs: Vec<&str> = inputs_str.split(',').collect();
        ensure!(
            inputs.len() == xs.len(),
            InvalidArgument,
            "einsum: number of inputs doesn't match number of operands in formula, expected {}, got {}",
            inputs.len(),
            xs.len()
        );
        let mut letter_val: BTreeMap<char, usize> = BTreeMap::new();
        for (letters, x) in inputs.iter().zip(xs) {
            let shape = x.shape();
            let chars: Vec<char> = letters.chars().collect();
            ensure!(
                chars.len() == shape.len() && chars.iter().all(|c| c.is_alphabetic()),
                InvalidArgument,
                "einsum: operand {letters:?} does not match shape {}",
                fmt_shape(&shape)
            );
            for (i, c) in chars.iter().enumerate() {
                ensure!(
                    !chars[..i].contains(c),
                    InvalidArgument,
                    "einsum: letter {c:?} repeats in operand {letters:?} (diagonals are not supported)"
                );
                match letter_val.insert(*c, shape[i]) {
                    Some(prev) if prev != shape[i] => bail!(
                        InvalidArgument,
                        "einsum: letter {c:?} is {prev} in one operand and {} in another",
                        shape[i]
                    ),
                    _ => {}
                }
            }
        }
        let out: Vec<char> = output.chars().collect();
        for (i, c) in out.iter().enumerate() {
            ensure!(
                letter_val.contains_key(c) && !out[..i].contains(c),
                InvalidArgument,
                "einsum: output letter {c:?} is not an input letter or repeats"
            );
        }
        let all: Vec<(char, usize)> = letter_val.into_iter().collect();
        let full: Vec<usize> = all.iter().map(|&(_, v)| v).collect();
        let mut prod: Option<Tensor> = None;
        for (letters, x) in inputs.iter().zip(xs) {
            let chars: Vec<char> = letters.chars().collect();
            let order: Vec<isize> = argsort(&chars).into_iter().map(|i| i as isize).collect();
            let shp: Vec<usize> = (all.iter())
                .map(|&(c, v)| if chars.contains(&c) { v } else { 1 })
                .collect();
            let t = x
                .permute(&order)?
                .reshape_sints(&to_sints(&shp)?)?
                .broadcast_to(&full)?;
            prod = Some(match prod {
                None => t,
                Some(p) => p.mul(&t)?,
            });
        }
        let Some(prod) = prod else {
            bail!(InvalidArgument, "einsum: no operands");
        };
        let axes: Vec<isize> = (all.iter().enumerate())
            .filter(|(_, (c, _))| !out.contains(c))
            .map(|(i, _)| i as isize)
            .collect();
        let summed = prod.sum_acc(axes, false, acc_dtype)?;
        let rhs_order: Vec<isize> = argsort(&argsort(&out))
            .into_iter()
            .map(|i| i as isize)
            .collect();
        summed.permute(&rhs_order)
    }
}
