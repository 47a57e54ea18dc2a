//! tinygrad's `nn.state`: state dicts of models ([`get_state_dict`], [`get_parameters`],
//! [`load_state_dict`]) and safetensors files ([`safe_load`], [`safe_save`]).
//!
//! `safe_load` maps the file (`driver::filemap`), checks the whole header against it
//! (`safetensors.rs`) before any tensor is made, then copies each tensor's bytes straight from
//! the map into a device buffer. `load_state_dict` checks every key and shape first and changes
//! the model only when all of them fit: strict mode refuses missing and unexpected keys,
//! non-strict mode skips missing keys and ignores unexpected ones; a shape mismatch is an error
//! in both (as tinygrad's `replace`). The model's tensors take the loaded tensors' data (and
//! dtype, as in tinygrad) on the model tensor's device.
//!
//! Not guaranteed: tinygrad's `torch_load` (pickled checkpoints) is not provided; bool tensors
//! must hold bytes 0 or 1.

use std::path::Path;

use indexmap::IndexMap;

use super::safetensors::{parse_header, safe_name, write_header};
use super::Module;
use crate::driver::filemap::MappedFile;
use crate::dtype::dtypes;
use crate::runtime::builtin::default_device;
use crate::tensor::{fmt_shape, Tensor};
use crate::{bail, ensure, Error, Result};

/// tinygrad's `get_state_dict`: every tensor of `model` by its state-dict name, in visiting
/// order (a name met twice keeps its first position and its last tensor, like a dict update).
pub fn get_state_dict<M: Module + ?Sized>(model: &M) -> IndexMap<String, Tensor> {
    let mut out = IndexMap::new();
    model.visit("", &mut |name, t| {
        out.insert(name, t.clone());
    });
    out
}

/// tinygrad's `get_parameters`: the tensors of the state dict (buffers included; optimizers
/// sort them by `requires_grad`).
pub fn get_parameters<M: Module + ?Sized>(model: &M) -> Vec<Tensor> {
    get_state_dict(model).into_values().collect()
}

/// tinygrad's `load_state_dict` (see the module doc for strict and non-strict modes).
pub fn load_state_dict<M: Module + ?Sized>(
    model: &M,
    state_dict: &IndexMap<String, Tensor>,
    strict: bool,
) -> Result<()> {
    let mine = get_state_dict(model);
    let missing: Vec<&String> = mine
        .keys()
        .filter(|k| !state_dict.contains_key(*k))
        .collect();
    let unexpected: Vec<&String> = (state_dict.keys())
        .filter(|k| !mine.contains_key(*k))
        .collect();
    if strict && (!missing.is_empty() || !unexpected.is_empty()) {
        bail!(
            InvalidArgument,
            "load_state_dict: missing keys {missing:?}, unexpected keys {unexpected:?} (strict)"
        );
    }
    let mut bad = Vec::new();
    for (k, v) in &mine {
        if let Some(new) = state_dict.get(k) {
            if new.shape() != v.shape() {
                bad.push(format!(
                    "{k}: model {} vs state dict {}",
                    fmt_shape(&v.shape()),
                    fmt_shape(&new.shape())
                ));
            }
        }
    }
    ensure!(
        bad.is_empty(),
        InvalidArgument,
        "load_state_dict: shape mismatch for {}",
        bad.join("; ")
    );
    for (k, v) in &mine {
        if let Some(new) = state_dict.get(k) {
            v.replace(&new.detach().to(&v.device())?)?;
            v.realize()?;
        }
    }
    Ok(())
}

/// A tensor of `dtype` and `shape` holding `bytes` (little-endian, as in the file).
fn from_le_bytes(bytes: &[u8], dtype: crate::DType, shape: &[usize], dev: &str) -> Result<Tensor> {
    if dtype == dtypes::bool {
        if let Some(i) = bytes.iter().position(|&b| b > 1) {
            bail!(
                InvalidArgument,
                "safetensors: BOOL element {i} is the byte {}, not 0 or 1",
                bytes[i]
            );
        }
    }
    if cfg!(target_endian = "little") {
        return Tensor::from_bytes_on(bytes, shape, dtype, dev);
    }
    let mut ne = bytes.to_vec();
    for c in ne.chunks_exact_mut(dtype.itemsize()) {
        c.reverse();
    }
    Tensor::from_bytes_on(&ne, shape, dtype, dev)
}

/// tinygrad's `safe_load` on the default device.
pub fn safe_load(path: impl AsRef<Path>) -> Result<IndexMap<String, Tensor>> {
    Ok(safe_load_with_metadata(path, &default_device()?)?.0)
}

/// `safe_load` onto `device`, with the file's `__metadata__`.
pub fn safe_load_with_metadata(
    path: impl AsRef<Path>,
    device: &str,
) -> Result<(IndexMap<String, Tensor>, IndexMap<String, String>)> {
    let path = path.as_ref();
    let map = MappedFile::open(path)?;
    safe_load_bytes(map.bytes(), device).map_err(|e| e.with_context(&path.display().to_string()))
}

/// `safe_load` of a whole safetensors file held in memory, onto `device`, with its metadata.
pub fn safe_load_bytes(
    file: &[u8],
    device: &str,
) -> Result<(IndexMap<String, Tensor>, IndexMap<String, String>)> {
    let header = parse_header(file)?;
    let data = &file[header.data_start..];
    let mut out = IndexMap::with_capacity(header.tensors.len());
    for (name, e) in &header.tensors {
        let t = from_le_bytes(&data[e.begin..e.end], e.dtype, &e.shape, device)
            .map_err(|err| err.with_context(&format!("tensor {name:?}")))?;
        out.insert(name.clone(), t);
    }
    Ok((out, header.metadata))
}

/// tinygrad's `safe_save`: write `tensors` (in order) and optional metadata to `path`.
pub fn safe_save(
    tensors: &IndexMap<String, Tensor>,
    path: impl AsRef<Path>,
    metadata: Option<&IndexMap<String, String>>,
) -> Result<()> {
    let path = path.as_ref();
    let descr: Vec<(&str, crate::DType, Vec<usize>)> = (tensors.iter())
        .map(|(k, t)| (k.as_str(), t.dtype(), t.shape()))
        .collect();
    for (k, dt, _) in &descr {
        safe_name(*dt).map_err(|e| e.with_context(k))?;
    }
    let mut out = write_header(&descr, metadata)?;
    for t in tensors.values() {
        let mut b = t.to_bytes()?;
        if cfg!(target_endian = "big") {
            for c in b.chunks_exact_mut(t.dtype().itemsize()) {
                c.reverse();
            }
        }
        out.extend_from_slice(&b);
    }
    std::fs::write(path, &out).map_err(|e| Error::Io(format!("write {}: {e}", path.display())))
}
