#!/usr/bin/env python3
"""Export scikit-learn's 8x8 handwritten digits (1797 images, UCI ML digits) to a safetensors
file for `cargo run --release --example digits`: "images" float32 (1797, 1, 8, 8) scaled to
[0, 1] and "labels" int32 (1797,). The file is not committed.

Run: pip install scikit-learn safetensors numpy
     python3 tools/digits/export.py [out]      (default: /tmp/rawgrad-digits.safetensors)
"""
import sys

import numpy as np
from safetensors.numpy import save_file
from sklearn.datasets import load_digits

out = sys.argv[1] if len(sys.argv) > 1 else "/tmp/rawgrad-digits.safetensors"
d = load_digits()
images = (d.images.astype(np.float32) / 16.0).reshape(-1, 1, 8, 8)
labels = d.target.astype(np.int32)
save_file({"images": images, "labels": labels}, out, metadata={"source": "sklearn.datasets.load_digits"})
print(f"wrote {out}: {images.shape[0]} images")
