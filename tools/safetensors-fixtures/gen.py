#!/usr/bin/env python3
"""Safetensors fixtures written by another implementation (Hugging Face's `safetensors` Python
package, its Rust core underneath), for tests/nn/state.rs: one tensor of each dtype rawgrad has,
with edge values (integer extremes, NaN, infinities, -0.0, subnormals), a 0-d tensor, a
zero-size tensor, and string metadata. The test holds the same values as literals.

Run: pip install safetensors numpy; python3 tools/safetensors-fixtures/gen.py
Writes tests/fixtures/safetensors/all_dtypes.safetensors (committed).
"""
import os

import numpy as np
from safetensors import TensorSpec, serialize_file

KEEP = []  # the buffers behind the specs' data pointers

def spec(dtype, arr):
    """A TensorSpec over a little-endian contiguous copy of `arr`, tagged `dtype`."""
    a = np.array(arr, dtype=arr.dtype.newbyteorder("<"), copy=True, order="C")
    KEEP.append(a)
    return TensorSpec(dtype=dtype, shape=a.shape, data_ptr=a.ctypes.data, data_len=a.nbytes)

def np_t(arr):
    return spec(arr.dtype.name, arr)

tensors = {
    "bool": np_t(np.array([True, False, True])),
    "i8": np_t(np.array([[-128, -1], [0, 127]], dtype=np.int8)),
    "u8": np_t(np.array([0, 1, 255], dtype=np.uint8)),
    "i16": np_t(np.array([-32768, 0, 32767], dtype=np.int16)),
    "u16": np_t(np.array([0, 65535, 12345], dtype=np.uint16)),
    "i32": np_t(np.array([[-2147483648, 0], [2147483647, 7]], dtype=np.int32)),
    "u32": np_t(np.array([0, 4294967295, 3], dtype=np.uint32)),
    "i64": np_t(np.array([-(2**63), 0, 2**63 - 1], dtype=np.int64)),
    "u64": np_t(np.array([0, 2**64 - 1, 5], dtype=np.uint64)),
    "f16": np_t(np.array([0.0, -0.0, 1.5, -2.0, np.inf, 65504.0, 2.0**-24, np.nan], dtype=np.float16)),
    # numpy has no bfloat16: the bits of 1.0, -2.5, inf, -0.0 and 2**-133 (a subnormal)
    "bf16": spec("bfloat16", np.array([0x3F80, 0xC020, 0x7F80, 0x8000, 0x0001], dtype=np.uint16)),
    "f32": np_t(np.array([1.5, -0.0, np.inf, -np.inf, np.nan, 1e-45, 3.4028235e38], dtype=np.float32)),
    "f64": np_t(np.array([0.1, -1e300, 5e-324], dtype=np.float64)),
    "scalar": np_t(np.array(42.0, dtype=np.float32)),
    "empty": np_t(np.zeros((0, 3), dtype=np.float32)),
}

out = os.path.join(os.path.dirname(__file__), "../../tests/fixtures/safetensors/all_dtypes.safetensors")
serialize_file(tensors, os.path.normpath(out), metadata={"format": "pt", "source": "safetensors-python"})
print("wrote", os.path.normpath(out), os.path.getsize(out), "bytes")
