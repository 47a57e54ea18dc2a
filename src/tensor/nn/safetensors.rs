//! The safetensors format (Hugging Face's): an 8-byte little-endian header length `N`, `N`
//! bytes of UTF-8 JSON mapping each tensor name to `{"dtype", "shape", "data_offsets"}` (plus
//! an optional `"__metadata__"` map of strings), then the data, little-endian, each tensor at
//! its offsets relative to the data's start.
//!
//! [`parse_header`] checks a file before anything is allocated by its numbers: the header length
//! against the file and a 100 MB cap, UTF-8, strict JSON (duplicate keys refused), every field's
//! type, known dtypes, `shape` products and byte sizes with checked arithmetic, and that the
//! tensors tile the data exactly (in offset order, no overlap, no hole, nothing after the
//! last): the rules of the reference implementation. Every error names the tensor and what is
//! wrong.
//!
//! Not guaranteed: the FP8 dtypes of newer files are refused (rawgrad has no FP8).

use indexmap::IndexMap;

use crate::dtype::{dtypes, DType};
use crate::json::{self, Value};
use crate::{bail, ensure, Result};

/// The largest header accepted (the reference implementation's limit).
pub const MAX_HEADER: u64 = 100_000_000;

/// The safetensors name of each rawgrad dtype (tinygrad's `safe_dtypes`).
pub const SAFE_DTYPES: [(&str, DType); 13] = [
    ("BOOL", dtypes::bool),
    ("I8", dtypes::int8),
    ("U8", dtypes::uint8),
    ("I16", dtypes::int16),
    ("U16", dtypes::uint16),
    ("I32", dtypes::int32),
    ("U32", dtypes::uint32),
    ("I64", dtypes::int64),
    ("U64", dtypes::uint64),
    ("F16", dtypes::float16),
    ("BF16", dtypes::bfloat16),
    ("F32", dtypes::float32),
    ("F64", dtypes::float64),
];

/// One tensor's entry: dtype, shape and byte range within the data.
#[derive(Clone, Debug, PartialEq)]
pub struct Entry {
    pub dtype: DType,
    pub shape: Vec<usize>,
    pub begin: usize,
    pub end: usize,
}

/// A checked header: the tensors in file order, the metadata, and where the data starts.
#[derive(Clone, Debug, PartialEq)]
pub struct Header {
    pub tensors: IndexMap<String, Entry>,
    pub metadata: IndexMap<String, String>,
    pub data_start: usize,
}

pub fn safe_name(dt: DType) -> Result<&'static str> {
    match SAFE_DTYPES.iter().find(|(_, d)| *d == dt) {
        Some((n, _)) => Ok(n),
        None => bail!(
            InvalidArgument,
            "safetensors: no safetensors dtype for {dt:?}"
        ),
    }
}

fn usize_of(v: &Value, what: impl Fn() -> String) -> Result<usize> {
    match v.as_u64().and_then(|x| usize::try_from(x).ok()) {
        Some(x) => Ok(x),
        None => bail!(
            InvalidArgument,
            "safetensors: {} must be a non-negative integer, got {}",
            what(),
            match v {
                Value::Num(s) => s.clone(),
                other => other.kind().to_string(),
            }
        ),
    }
}

fn int_list(v: &Value, what: &str, name: &str) -> Result<Vec<usize>> {
    let Value::Arr(items) = v else {
        bail!(
            InvalidArgument,
            "safetensors: tensor {name:?}: {what} must be an array, got {}",
            v.kind()
        );
    };
    (items.iter().enumerate())
        .map(|(i, x)| usize_of(x, || format!("tensor {name:?}: {what}[{i}]")))
        .collect()
}

/// One tensor's entry from its JSON object.
fn entry(name: &str, v: &Value) -> Result<Entry> {
    let Value::Obj(fields) = v else {
        bail!(
            InvalidArgument,
            "safetensors: tensor {name:?} must be an object, got {}",
            v.kind()
        );
    };
    let (mut dtype, mut shape, mut offsets) = (None, None, None);
    for (k, fv) in fields {
        match k.as_str() {
            "dtype" => dtype = Some(fv),
            "shape" => shape = Some(fv),
            "data_offsets" => offsets = Some(fv),
            other => bail!(
                InvalidArgument,
                "safetensors: tensor {name:?}: unknown field {other:?}"
            ),
        }
    }
    let missing = |f: &str| format!("safetensors: tensor {name:?}: missing field {f:?}");
    let dtype = match dtype {
        Some(Value::Str(s)) => match SAFE_DTYPES.iter().find(|(n, _)| n == s) {
            Some((_, d)) => *d,
            None => bail!(
                InvalidArgument,
                "safetensors: tensor {name:?}: unsupported dtype {s:?}"
            ),
        },
        Some(other) => bail!(
            InvalidArgument,
            "safetensors: tensor {name:?}: dtype must be a string, got {}",
            other.kind()
        ),
        None => bail!(InvalidArgument, "{}", missing("dtype")),
    };
    let shape = int_list(
        shape.ok_or_else(|| crate::Error::InvalidArgument(missing("shape")))?,
        "shape",
        name,
    )?;
    let off = offsets.ok_or_else(|| crate::Error::InvalidArgument(missing("data_offsets")))?;
    let off = int_list(off, "data_offsets", name)?;
    let [begin, end] = off[..] else {
        bail!(
            InvalidArgument,
            "safetensors: tensor {name:?}: data_offsets must hold 2 integers, got {}",
            off.len()
        );
    };
    let nbytes = (shape.iter())
        .try_fold(dtype.itemsize(), |a, &s| a.checked_mul(s))
        .ok_or_else(|| {
            crate::Error::InvalidArgument(format!(
                "safetensors: tensor {name:?}: shape {shape:?} overflows"
            ))
        })?;
    ensure!(
        begin <= end && end - begin == nbytes,
        InvalidArgument,
        "safetensors: tensor {name:?}: data_offsets [{begin}, {end}] do not hold the {nbytes} \
         bytes of {} {shape:?}",
        safe_name(dtype)?
    );
    Ok(Entry {
        dtype,
        shape,
        begin,
        end,
    })
}

fn metadata(v: &Value) -> Result<IndexMap<String, String>> {
    let Value::Obj(fields) = v else {
        bail!(
            InvalidArgument,
            "safetensors: __metadata__ must be an object, got {}",
            v.kind()
        );
    };
    (fields.iter())
        .map(|(k, v)| match v {
            Value::Str(s) => Ok((k.clone(), s.clone())),
            other => bail!(
                InvalidArgument,
                "safetensors: __metadata__ {k:?} must be a string, got {}",
                other.kind()
            ),
        })
        .collect()
}

/// The tensors must tile `[0, data_len)` in offset order.
fn check_tiling(tensors: &IndexMap<String, Entry>, data_len: usize) -> Result<()> {
    let mut order: Vec<(&String, &Entry)> = tensors.iter().collect();
    order.sort_by_key(|(_, e)| (e.begin, e.end));
    let mut at = 0usize;
    let mut prev: Option<&String> = None;
    for (name, e) in order {
        if e.begin < at {
            bail!(
                InvalidArgument,
                "safetensors: tensor {name:?} (bytes {}..{}) overlaps tensor {:?}",
                e.begin,
                e.end,
                prev.map(String::as_str).unwrap_or("")
            );
        }
        ensure!(
            e.begin == at,
            InvalidArgument,
            "safetensors: a hole of {} bytes before tensor {name:?} (bytes {}..{})",
            e.begin - at,
            e.begin,
            e.end
        );
        ensure!(
            e.end <= data_len,
            InvalidArgument,
            "safetensors: tensor {name:?} (bytes {}..{}) runs past the end of the data ({data_len} \
             bytes): the file is truncated",
            e.begin,
            e.end
        );
        at = e.end;
        prev = Some(name);
    }
    ensure!(
        at == data_len,
        InvalidArgument,
        "safetensors: {} bytes after the last tensor are not indexed by the header",
        data_len - at
    );
    Ok(())
}

/// Check a whole file's header against the file (see the module doc).
pub fn parse_header(file: &[u8]) -> Result<Header> {
    ensure!(
        file.len() >= 8,
        InvalidArgument,
        "safetensors: the file is truncated: {} bytes, the header length alone needs 8",
        file.len()
    );
    let mut len8 = [0u8; 8];
    len8.copy_from_slice(&file[..8]);
    let n = u64::from_le_bytes(len8);
    ensure!(
        n <= MAX_HEADER,
        InvalidArgument,
        "safetensors: header length {n} is over the {MAX_HEADER}-byte limit"
    );
    let rest = (file.len() - 8) as u64;
    ensure!(
        n <= rest,
        InvalidArgument,
        "safetensors: header length {n} runs past the end of the file ({} bytes): the file is \
         truncated or not safetensors",
        file.len()
    );
    let n = n as usize;
    let text = std::str::from_utf8(&file[8..8 + n]).map_err(|e| {
        crate::Error::InvalidArgument(format!(
            "safetensors: the header is not UTF-8 (at byte {} of the header)",
            e.valid_up_to()
        ))
    })?;
    let root = json::parse(text).map_err(|e| {
        crate::Error::InvalidArgument(format!("safetensors: header {}", e.message()))
    })?;
    let Value::Obj(members) = root else {
        bail!(
            InvalidArgument,
            "safetensors: the header must be a JSON object, got {}",
            root.kind()
        );
    };
    let mut tensors = IndexMap::new();
    let mut meta = IndexMap::new();
    for (k, v) in &members {
        if k == "__metadata__" {
            meta = metadata(v)?;
        } else {
            tensors.insert(k.clone(), entry(k, v)?);
        }
    }
    let data_start = 8 + n;
    check_tiling(&tensors, file.len() - data_start)?;
    Ok(Header {
        tensors,
        metadata: meta,
        data_start,
    })
}

/// The header bytes (length prefix included) for tensors of the given dtypes and shapes, laid
/// one after another in order; the JSON is padded with spaces to a multiple of 8 bytes.
pub fn write_header(
    tensors: &[(&str, DType, Vec<usize>)],
    metadata: Option<&IndexMap<String, String>>,
) -> Result<Vec<u8>> {
    let mut parts = Vec::with_capacity(tensors.len() + 1);
    if let Some(m) = metadata {
        let kv: Vec<String> = (m.iter())
            .map(|(k, v)| format!("{}:{}", json::quote(k), json::quote(v)))
            .collect();
        parts.push(format!("\"__metadata__\":{{{}}}", kv.join(",")));
    }
    let mut offset = 0usize;
    for (name, dt, shape) in tensors {
        ensure!(
            *name != "__metadata__",
            InvalidArgument,
            "safetensors: a tensor cannot be named \"__metadata__\""
        );
        let nbytes = (shape.iter())
            .try_fold(dt.itemsize(), |a, &s| a.checked_mul(s))
            .ok_or_else(|| {
                crate::Error::InvalidArgument(format!("safetensors: {name:?} is too large"))
            })?;
        let end = offset.checked_add(nbytes).ok_or_else(|| {
            crate::Error::InvalidArgument("safetensors: the tensors are too large".into())
        })?;
        let dims: Vec<String> = shape.iter().map(|s| s.to_string()).collect();
        parts.push(format!(
            "{}:{{\"dtype\":\"{}\",\"shape\":[{}],\"data_offsets\":[{offset},{end}]}}",
            json::quote(name),
            safe_name(*dt)?,
            dims.join(",")
        ));
        offset = end;
    }
    let mut j = format!("{{{}}}", parts.join(","));
    while j.len() % 8 != 0 {
        j.push(' ');
    }
    let mut out = Vec::with_capacity(8 + j.len());
    out.extend_from_slice(&(j.len() as u64).to_le_bytes());
    out.extend_from_slice(j.as_bytes());
    Ok(out)
}
