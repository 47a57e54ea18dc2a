#!/usr/bin/env bash
# Regenerates the cubin test fixtures (tests/fixtures/cubin/*.cubin) from the PTX sources next to
# them with NVIDIA's ptxas. The cubins are ptxas outputs on rawgrad's own PTX; the loader tests
# (src/runtime/nv/cubin/tests.rs) read them, so the loader is tested without ptxas too.
#
# ptxas is found as $PTXAS, on PATH, or inside a Python venv / ~/.local with the PyPI wheel:
#   python3 -m venv /tmp/nvvenv && /tmp/nvvenv/bin/pip install nvidia-cuda-nvcc
#   PTXAS=$(echo /tmp/nvvenv/lib/python3*/site-packages/nvidia/cu*/bin/ptxas) tools/gen-cubin-fixtures.sh
set -euo pipefail
cd "$(dirname "$0")/../tests/fixtures/cubin"

find_ptxas() {
  if [ -n "${PTXAS:-}" ]; then echo "$PTXAS"; return; fi
  if command -v ptxas >/dev/null 2>&1; then command -v ptxas; return; fi
  for p in "${VIRTUAL_ENV:-/nonexistent}"/lib/python3*/site-packages/nvidia/cu*/bin/ptxas \
           "$HOME"/.local/lib/python3*/site-packages/nvidia/cu*/bin/ptxas \
           /tmp/nvvenv/lib/python3*/site-packages/nvidia/cu*/bin/ptxas \
           /usr/local/cuda/bin/ptxas; do
    if [ -x "$p" ]; then echo "$p"; return; fi
  done
  echo "gen-cubin-fixtures: ptxas not found (set PTXAS or install nvidia-cuda-nvcc)" >&2
  exit 1
}

PTXAS_BIN=$(find_ptxas)
"$PTXAS_BIN" --version | tail -n 2
for sm in 80 89 90 100 120; do
  "$PTXAS_BIN" -arch=sm_$sm -o add_n_sm$sm.cubin add_n.ptx
done
for sm in 80 90 120; do
  "$PTXAS_BIN" -arch=sm_$sm -o two_kernels_sm$sm.cubin two_kernels.ptx
done
for sm in 89 90; do
  "$PTXAS_BIN" -arch=sm_$sm -o fill_sm$sm.cubin fill.ptx
done
ls -l ./*.cubin
