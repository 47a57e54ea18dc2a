//! tinygrad 0.9.1's `nn`: layers with its parameter shapes and initialisation (`layers.rs`,
//! `norm.rs`), optimizers (`optim.rs`), state dicts and safetensors files (`state.rs`,
//! `safetensors.rs`).
//!
//! tinygrad discovers a model's tensors by walking object attributes; here a model says what it
//! holds through the [`Module`] trait (the layers implement it; a user struct lists its fields
//! with [`module!`](crate::module)). Names are tinygrad's state-dict keys: the field path joined
//! by dots, list items by their index (`l1.weight`, `layers.0.bias`). [`Forward`] is tinygrad's
//! `__call__`: layers and closures both implement it, so both go into `Tensor::sequential`.
//!
//! Not guaranteed: tinygrad's `Embedding` caches its `arange` as an attribute, which then shows
//! up in its state dict after the first call; rawgrad's does not.

mod layers;
mod norm;
pub mod optim;
mod safetensors;
pub mod state;

use indexmap::IndexMap;

use super::Tensor;
use crate::Result;

pub use layers::{Conv2d, ConvTranspose2d, Embedding, Linear};
pub use norm::{
    BatchNorm, BatchNorm1d, BatchNorm2d, GroupNorm, InstanceNorm, LayerNorm, LayerNorm2d,
};
pub use optim::{LambArgs, LarsArgs, Optimizer, OptimizerGroup, LAMB, LARS};
pub use state::{
    get_parameters, get_state_dict, load_state_dict, safe_load, safe_load_bytes,
    safe_load_with_metadata, safe_save,
};

/// Something that maps a tensor to a tensor: tinygrad's `__call__` on a layer, or any closure.
pub trait Forward {
    fn forward(&self, x: &Tensor) -> Result<Tensor>;
}

impl<F: Fn(&Tensor) -> Result<Tensor>> Forward for F {
    fn forward(&self, x: &Tensor) -> Result<Tensor> {
        self(x)
    }
}

/// A model's tensors with their state-dict names (tinygrad's attribute walk in
/// `get_state_dict`).
pub trait Module {
    /// Call `f` with every tensor and its name; `prefix` is the path so far (empty or ending in
    /// a dot).
    fn visit(&self, prefix: &str, f: &mut dyn FnMut(String, &Tensor));
}

impl Module for Tensor {
    fn visit(&self, prefix: &str, f: &mut dyn FnMut(String, &Tensor)) {
        f(prefix.trim_matches('.').to_string(), self);
    }
}

impl<T: Module> Module for Option<T> {
    fn visit(&self, prefix: &str, f: &mut dyn FnMut(String, &Tensor)) {
        if let Some(m) = self {
            m.visit(prefix, f);
        }
    }
}

impl<T: Module + ?Sized> Module for &T {
    fn visit(&self, prefix: &str, f: &mut dyn FnMut(String, &Tensor)) {
        (**self).visit(prefix, f);
    }
}

impl<T: Module + ?Sized> Module for Box<T> {
    fn visit(&self, prefix: &str, f: &mut dyn FnMut(String, &Tensor)) {
        (**self).visit(prefix, f);
    }
}

impl<T: Module> Module for [T] {
    fn visit(&self, prefix: &str, f: &mut dyn FnMut(String, &Tensor)) {
        for (i, m) in self.iter().enumerate() {
            m.visit(&format!("{prefix}{i}."), f);
        }
    }
}

impl<T: Module> Module for Vec<T> {
    fn visit(&self, prefix: &str, f: &mut dyn FnMut(String, &Tensor)) {
        self.as_slice().visit(prefix, f);
    }
}

impl<T: Module, const N: usize> Module for [T; N] {
    fn visit(&self, prefix: &str, f: &mut dyn FnMut(String, &Tensor)) {
        self.as_slice().visit(prefix, f);
    }
}

impl<T: Module> Module for IndexMap<String, T> {
    fn visit(&self, prefix: &str, f: &mut dyn FnMut(String, &Tensor)) {
        for (k, m) in self {
            m.visit(&format!("{prefix}{k}."), f);
        }
    }
}

impl<T: Module> Module for std::collections::BTreeMap<String, T> {
    fn visit(&self, prefix: &str, f: &mut dyn FnMut(String, &Tensor)) {
        for (k, m) in self {
            m.visit(&format!("{prefix}{k}."), f);
        }
    }
}

macro_rules! tuple_module {
    ($($i:tt $t:ident),*) => {
        impl<$($t: Module),*> Module for ($($t,)*) {
            fn visit(&self, prefix: &str, f: &mut dyn FnMut(String, &Tensor)) {
                $(self.$i.visit(&format!("{prefix}{}.", $i), f);)*
            }
        }
    };
}
tuple_module!(0 A, 1 B);
tuple_module!(0 A, 1 B, 2 C);
tuple_module!(0 A, 1 B, 2 C, 3 D);

/// Implement [`Module`](crate::nn::Module) for a struct by listing the fields that hold
/// tensors, layers or lists of them; each field's name is its state-dict prefix:
///
/// ```
/// use rawgrad::nn::{get_state_dict, Linear};
/// struct Net { l1: Linear, l2: Linear }
/// rawgrad::module!(Net { l1, l2 });
/// # fn main() -> rawgrad::Result<()> {
/// let net = Net { l1: Linear::new(4, 5, true)?, l2: Linear::new(5, 6, false)? };
/// let keys: Vec<String> = get_state_dict(&net).into_keys().collect();
/// assert_eq!(keys, ["l1.weight", "l1.bias", "l2.weight"]);
/// # Ok(())
/// # }
/// ```
#[macro_export]
macro_rules! module {
    ($ty:ty { $($field:ident),* $(,)? }) => {
        impl $crate::nn::Module for $ty {
            fn visit(&self, prefix: &str, f: &mut dyn FnMut(String, &$crate::Tensor)) {
                $($crate::nn::Module::visit(
                    &self.$field,
                    &format!("{prefix}{}.", stringify!($field)),
                    f,
                );)*
            }
        }
    };
}
