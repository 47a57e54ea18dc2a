//! tinygrad 0.9.1's optimizers (`nn/optim.py`): [`LARS`] (SGD is LARS with trust coefficient 0),
//! [`LAMB`] (Adam and AdamW are LAMB without the trust ratio), and [`OptimizerGroup`].
//!
//! Each builds exactly 0.9.1's tensor graph: the learning rate is a one-element float32 tensor,
//! the new parameters and states are written with `assign`, so `step()` is one scheduled batch
//! of kernels whose count equals 0.9.1's (pinned in `tests/nn_optim.rs`). Constructing an
//! optimizer turns parameters whose `requires_grad` is unknown into `Some(true)`; tensors with
//! `Some(false)` (batch-norm statistics) are buffers that are realized with each step.
//!
//! Not guaranteed: `CONST_LR` (a constant learning rate) is not read; as in tinygrad, stepping
//! needs `Tensor::train(true)`.

use super::super::Tensor;
use crate::dtype::dtypes;
use crate::{bail, ensure, Error, Result};

/// What every optimizer does (tinygrad's `Optimizer` base class).
pub trait Optimizer {
    /// The tensors being optimized.
    fn params(&self) -> Vec<Tensor>;
    /// Tensors that do not need gradients but are realized with each step (tinygrad's
    /// `buffers`).
    fn buffers(&self) -> Vec<Tensor>;
    /// tinygrad's `_step`: assign the new parameters and return the optimizer state tensors.
    fn update(&self) -> Result<Vec<Tensor>>;

    /// Drop every parameter's gradient.
    fn zero_grad(&self) {
        for p in self.params() {
            p.set_grad(None);
        }
    }

    /// The tensors to realize for one step: the state, the parameters and the buffers.
    fn schedule_step(&self) -> Result<Vec<Tensor>> {
        ensure!(
            Tensor::is_training(),
            InvalidArgument,
            "optimizer: Tensor.training=False, Tensor.training must be enabled to use the \
             optimizer (use Tensor::train(true) before stepping)"
        );
        let mut out = self.update()?;
        out.extend(self.params());
        out.extend(self.buffers());
        Ok(out)
    }

    /// One optimization step: realize [`Optimizer::schedule_step`].
    fn step(&self) -> Result<()> {
        let ts = self.schedule_step()?;
        let Some((first, rest)) = ts.split_first() else {
            return Ok(());
        };
        let rest: Vec<&Tensor> = rest.iter().collect();
        first.realize_all(&rest)?;
        Ok(())
    }
}

/// The state every optimizer shares: the parameters, the buffers and the learning rate.
#[derive(Clone, Debug)]
struct Base {
    params: Vec<Tensor>,
    buffers: Vec<Tensor>,
    lr: Tensor,
}

fn dedup(ts: impl Iterator<Item = Tensor>) -> Vec<Tensor> {
    let mut seen = std::collections::HashSet::new();
    ts.filter(|t| seen.insert(t.id())).collect()
}

impl Base {
    fn new(params: &[Tensor], lr: f64) -> Result<Base> {
        for p in params {
            if p.requires_grad().is_none() {
                p.set_requires_grad(Some(true));
            }
        }
        let trainable = |p: &&Tensor| p.requires_grad() == Some(true);
        let ps = dedup(params.iter().filter(trainable).cloned());
        let Some(first) = ps.first() else {
            bail!(
                InvalidArgument,
                "optimizer: optimizer must have at least one param"
            );
        };
        let buffers = dedup(params.iter().filter(|p| !trainable(p)).cloned());
        let lr = Tensor::from_slice_on(&[lr as f32], &[1], &first.device())?.requires_grad_(false);
        Ok(Base {
            params: ps,
            buffers,
            lr,
        })
    }

    fn grad(t: &Tensor) -> Result<Tensor> {
        t.grad().ok_or_else(|| {
            Error::InvalidArgument(format!(
                "optimizer: parameter {t:?} has no gradient (call backward first)"
            ))
        })
    }
}

/// The hyperparameters of [`LARS`] (and of SGD, which is LARS with `tcoef = 0`).
#[derive(Clone, Debug, PartialEq)]
pub struct LarsArgs {
    pub lr: f64,
    pub momentum: f64,
    pub weight_decay: f64,
    pub nesterov: bool,
    /// Classic momentum applies the learning rate before the momentum update.
    pub classic: bool,
    /// The trust coefficient (0: plain SGD).
    pub tcoef: f64,
}

impl Default for LarsArgs {
    /// tinygrad's `LARS` defaults: lr 0.001, momentum 0.9, weight decay 1e-4, classic, tcoef
    /// 0.001.
    fn default() -> Self {
        LarsArgs {
            lr: 0.001,
            momentum: 0.9,
            weight_decay: 1e-4,
            nesterov: false,
            classic: true,
            tcoef: 0.001,
        }
    }
}

impl LarsArgs {
    /// tinygrad's `SGD` defaults: lr 0.001, no momentum, no weight decay, not classic, tcoef 0.
    pub fn sgd(lr: f64) -> LarsArgs {
        LarsArgs {
            lr,
            momentum: 0.0,
            weight_decay: 0.0,
            nesterov: false,
            classic: false,
            tcoef: 0.0,
        }
    }
    pub fn momentum(mut self, m: f64) -> Self {
        self.momentum = m;
        self
    }
    pub fn weight_decay(mut self, wd: f64) -> Self {
        self.weight_decay = wd;
        self
    }
    pub fn nesterov(mut self, n: bool) -> Self {
        self.nesterov = n;
        self
    }
    pub fn classic(mut self, c: bool) -> Self {
        self.classic = c;
        self
    }
}

/// tinygrad's `LARS`: SGD with momentum, weight decay and a layer-wise trust ratio.
#[derive(Clone, Debug)]
pub struct LARS {
    base: Base,
    pub args: LarsArgs,
    /// The momentum buffers (empty without momentum).
    pub b: Vec<Tensor>,
}

/// tinygrad's `SGD(params, lr)` (no momentum, no weight decay); see [`LarsArgs::sgd`] for the
/// other options.
pub fn sgd(params: &[Tensor], lr: f64) -> Result<LARS> {
    LARS::new(params, LarsArgs::sgd(lr))
}

impl LARS {
    pub fn new(params: &[Tensor], args: LarsArgs) -> Result<LARS> {
        let base = Base::new(params, args.lr)?;
        let b = if args.momentum != 0.0 {
            (base.params.iter())
                .map(|t| {
                    Tensor::full_on(&t.shape(), 0i64, t.dtype(), &t.device())
                        .map(|z| z.requires_grad_(false))
                })
                .collect::<Result<Vec<_>>>()?
        } else {
            vec![]
        };
        Ok(LARS { base, args, b })
    }

    /// The learning rate tensor (assign to it to change the rate).
    pub fn lr(&self) -> &Tensor {
        &self.base.lr
    }

    /// The trust ratio `tcoef * |w| / (|g| + wd * |w|)` (1 where a norm is 0).
    fn trust_ratio(&self, t: &Tensor, g: &Tensor) -> Result<Tensor> {
        let r1 = t.detach().square()?.sum()?.sqrt()?;
        let r2 = g.square()?.sum()?.sqrt()?;
        let inner = r1
            .rmul(self.args.tcoef)?
            .div(&r2.add(&r1.rmul(self.args.weight_decay)?)?)?;
        r1.gt(0i64)?.where_(&r2.gt(0i64)?.where_(&inner, 1.0)?, 1.0)
    }
}

impl Optimizer for LARS {
    fn params(&self) -> Vec<Tensor> {
        self.base.params.clone()
    }
    fn buffers(&self) -> Vec<Tensor> {
        self.base.buffers.clone()
    }
    fn update(&self) -> Result<Vec<Tensor>> {
        let a = &self.args;
        for (i, t) in self.base.params.iter().enumerate() {
            let mut g = Base::grad(t)?.contiguous()?;
            let r = if a.tcoef != 0.0 {
                Some(self.trust_ratio(t, &g)?)
            } else {
                None
            };
            let scale = |g: &Tensor| -> Result<Tensor> {
                match &r {
                    Some(r) => g.mul(r)?.mul(&self.base.lr),
                    None => g.mul(1.0)?.mul(&self.base.lr),
                }
            };
            g = g.add(&t.detach().rmul(a.weight_decay)?)?;
            if a.classic {
                g = scale(&g)?;
            }
            if a.momentum != 0.0 {
                let b = &self.b[i];
                b.assign(&b.rmul(a.momentum)?.add(&g)?)?;
                g = if a.nesterov {
                    g.add(&b.rmul(a.momentum)?)?
                } else {
                    b.clone()
                };
            }
            if !a.classic {
                g = scale(&g)?;
            }
            t.assign(&t.detach().sub(&g)?.cast(t.dtype())?)?;
        }
        Ok(self.b.clone())
    }
}

/// The hyperparameters of [`LAMB`] (and of Adam/AdamW, which set `adam`).
#[derive(Clone, Debug, PartialEq)]
pub struct LambArgs {
    pub lr: f64,
    pub b1: f64,
    pub b2: f64,
    pub eps: f64,
    pub weight_decay: f64,
    /// No trust ratio (Adam/AdamW).
    pub adam: bool,
}

impl Default for LambArgs {
    /// tinygrad's `LAMB` defaults: lr 0.001, b1 0.9, b2 0.999, eps 1e-6, no weight decay.
    fn default() -> Self {
        LambArgs {
            lr: 0.001,
            b1: 0.9,
            b2: 0.999,
            eps: 1e-6,
            weight_decay: 0.0,
            adam: false,
        }
    }
}

impl LambArgs {
    /// tinygrad's `Adam(params, lr)`: b1 0.9, b2 0.999, eps 1e-8.
    pub fn adam(lr: f64) -> LambArgs {
        LambArgs {
            lr,
            eps: 1e-8,
            adam: true,
            ..LambArgs::default()
        }
    }
    /// tinygrad's `AdamW(params, lr, weight_decay=0.01)`.
    pub fn adamw(lr: f64, weight_decay: f64) -> LambArgs {
        LambArgs {
            weight_decay,
            ..LambArgs::adam(lr)
        }
    }
}

/// tinygrad's `Adam(params, lr)`.
pub fn adam(params: &[Tensor], lr: f64) -> Result<LAMB> {
    LAMB::new(params, LambArgs::adam(lr))
}

/// tinygrad's `AdamW(params, lr, weight_decay=0.01)`.
pub fn adamw(params: &[Tensor], lr: f64) -> Result<LAMB> {
    LAMB::new(params, LambArgs::adamw(lr, 0.01))
}

/// tinygrad's `LAMB`: Adam moments with a layer-wise trust ratio (none for Adam/AdamW).
#[derive(Clone, Debug)]
pub struct LAMB {
    base: Base,
    pub args: LambArgs,
    /// `b1 ** t` and `b2 ** t` (one-element float32 tensors).
    pub b1_t: Tensor,
    pub b2_t: Tensor,
    /// The first and second moments (float32).
    pub m: Vec<Tensor>,
    pub v: Vec<Tensor>,
}

impl LAMB {
    pub fn new(params: &[Tensor], args: LambArgs) -> Result<LAMB> {
        let base = Base::new(params, args.lr)?;
        let dev = base.lr.device();
        let one = || -> Result<Tensor> {
            Tensor::from_slice_on(&[1f32], &[1], &dev)?
                .requires_grad_(false)
                .realize()
        };
        let (b1_t, b2_t) = (one()?, one()?);
        let zeros = || -> Result<Vec<Tensor>> {
            (base.params.iter())
                .map(|t| {
                    Tensor::full_on(&t.shape(), 0i64, dtypes::float32, &t.device())?
                        .requires_grad_(false)
                        .contiguous()
                })
                .collect()
        };
        let (m, v) = (zeros()?, zeros()?);
        Ok(LAMB {
            base,
            args,
            b1_t,
            b2_t,
            m,
            v,
        })
    }

    /// The learning rate tensor (assign to it to change the rate).
    pub fn lr(&self) -> &Tensor {
        &self.base.lr
    }
}

impl Optimizer for LAMB {
    fn params(&self) -> Vec<Tensor> {
        self.base.params.clone()
    }
    fn buffers(&self) -> Vec<Tensor> {
        self.base.buffers.clone()
    }
    fn update(&self) -> Result<Vec<Tensor>> {
        let a = &self.args;
        self.b1_t.imul(a.b1)?;
        self.b2_t.imul(a.b2)?;
        for (i, t) in self.base.params.iter().enumerate() {
            let g = Base::grad(t)?;
            let (m, v) = (&self.m[i], &self.v[i]);
            m.assign(&m.rmul(a.b1)?.add(&g.rmul(1.0 - a.b1)?)?)?;
            v.assign(&v.rmul(a.b2)?.add(&g.mul(&g)?.rmul(1.0 - a.b2)?)?)?;
            let m_hat = m.div(&self.b1_t.rsub(1.0)?)?;
            let v_hat = v.div(&self.b2_t.rsub(1.0)?)?;
            let up = m_hat
                .div(&v_hat.sqrt()?.add(a.eps)?)?
                .add(&t.detach().rmul(a.weight_decay)?)?;
            let lr_r = if a.adam {
                self.base.lr.mul(1.0)?
            } else {
                let r1 = t.detach().square()?.sum()?.sqrt()?;
                let r2 = up.square()?.sum()?.sqrt()?;
                let r = r1
                    .gt(0i64)?
                    .where_(&r2.gt(0i64)?.where_(&r1.div(&r2)?, 1.0)?, 1.0)?;
                self.base.lr.mul(&r)?
            };
            t.assign(&t.detach().sub(&lr_r.mul(&up)?)?.cast(t.dtype())?)?;
        }
        let mut out = vec![self.b1_t.clone(), self.b2_t.clone()];
        out.extend(self.m.iter().cloned());
        out.extend(self.v.iter().cloned());
        Ok(out)
    }
}

/// tinygrad's `OptimizerGroup`: several optimizers stepped as one.
pub struct OptimizerGroup {
    pub optimizers: Vec<Box<dyn Optimizer>>,
}

impl OptimizerGroup {
    pub fn new(optimizers: Vec<Box<dyn Optimizer>>) -> OptimizerGroup {
        OptimizerGroup { optimizers }
    }
}

impl Optimizer for OptimizerGroup {
    fn params(&self) -> Vec<Tensor> {
        self.optimizers.iter().flat_map(|o| o.params()).collect()
    }
    fn buffers(&self) -> Vec<Tensor> {
        self.optimizers.iter().flat_map(|o| o.buffers()).collect()
    }
    fn zero_grad(&self) {
        for o in &self.optimizers {
            o.zero_grad();
        }
    }
    fn update(&self) -> Result<Vec<Tensor>> {
        let mut out = Vec::new();
        for o in &self.optimizers {
            out.extend(o.update()?);
        }
        Ok(out)
    }
}
