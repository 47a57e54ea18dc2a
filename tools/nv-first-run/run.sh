#!/usr/bin/env bash
# The first run on an NVIDIA host, from the folder prepare.sh filled (.nvrun/):
# environment facts, then nv_first_run (bring-up step by step, GR info, USERD, host semaphore,
# copy engine, two kernels with the launch-action fallbacks, a queue reset), then the NV test
# subset and the dispatch benchmark, each under a timeout; on a failure or hang it dumps the
# kernel log (Xid lines). Runs as root on the GPU host; with MOCKGPU=1 the same steps run on
# rawgrad's emulator.
#   usage: run.sh            (from .nvrun/ or the repository root)
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
if [ -x "$here/nv_first_run" ]; then RUN=$here; else RUN=$(cd "$here/../.." && pwd)/.nvrun; fi
STEP_TIMEOUT=${STEP_TIMEOUT:-60}
export HCQDEV_WAIT_TIMEOUT_MS=${HCQDEV_WAIT_TIMEOUT_MS:-5000}
export NV_BRINGUP_LOG=1
status=0

section() { printf '\n==== %s ====\n' "$*"; }
dump_on_failure() {
  section "failure diagnostics"
  if [ "${MOCKGPU:-0}" != 0 ]; then echo "(emulator: no kernel log)"; return; fi
  dmesg 2>/dev/null | tail -n 40 || echo "dmesg not readable"
  dmesg 2>/dev/null | grep -i 'xid' | tail -n 10 || true
}

section "environment"
date -u
uname -a
if [ "${MOCKGPU:-0}" != 0 ]; then
  echo "MOCKGPU=1: the emulated RM/UVM with the software NV GPU (MOCKGPU_NV_ARCH=${MOCKGPU_NV_ARCH:-hopper}, MOCKGPU_NV_DRIVER=${MOCKGPU_NV_DRIVER:-580.142}, MOCKGPU_NV_SCRUB=${MOCKGPU_NV_SCRUB:-1})"
else
  ls -l /dev/nvidia* 2>&1
  ls -l /dev/nvidia-caps 2>&1
  cat /proc/driver/nvidia/version 2>&1
  grep -i nvidia /proc/devices 2>&1
  (lsmod 2>/dev/null | grep -i '^nvidia') || echo "lsmod: not available or no nvidia modules listed"
  if command -v nvidia-smi >/dev/null 2>&1; then
    timeout 30 nvidia-smi -q 2>&1 | grep -Ei 'driver version|cuda version|gsp firmware|bar1 memory|total|persistence mode|mig mode|current|confidential|product name|pci device' | head -n 40
  else
    echo "nvidia-smi: not found"
  fi
  ls /lib/firmware/nvidia 2>&1 | tail -n 5
  (command -v ptxas >/dev/null 2>&1 && ptxas --version | tail -n 2) || echo "ptxas: not found"
  ldd --version 2>&1 | head -n 1
  echo "C compilers (CLANG device): $(command -v cc gcc clang | tr '\n' ' ')"
  nproc
fi

section "nv_first_run"
# One process: the bring-up, GR info (0x07/0x09/0x0D/0x14/0x17/0x20), local memory, both channels'
# USERD before the first submit, semaphore, copy, the fill kernel with each launch action in turn
# (Hopper: 3 INVALIDATE_COPY_SCHEDULE, then 9, then 0xA; a failed try resets the queues), add_n,
# one queue reset with the VA balance checked. One status line per step, a summary at the end.
# NV_PCAS_ACTION=<n> pins one action; NV_DRIVER_FAMILY=<570|575|580|590|595> forces the layouts
# of a driver family on a driver rawgrad does not know.
if ! timeout "$STEP_TIMEOUT" "$RUN/nv_first_run" "$RUN/fixtures"; then
  echo "nv_first_run failed or timed out (exit $?)"
  status=1
  dump_on_failure
fi

section "NV tests (runtime::nv, driver::nv)"
tests_failed=0
# The hardware tests first (they skip without /dev/nvidiactl), then the rest of the NV modules;
# tests that read repository files by absolute path (goldens, fixtures) are skipped here.
for filter in hw_tests runtime::nv:: driver::nv::; do
  if ! timeout "$((STEP_TIMEOUT * 5))" "$RUN/rawgrad-tests" "$filter" --test-threads=2 \
      --skip golden --skip fixture --skip live_ptxas --nocapture 2>&1 | tail -n 30; then
    tests_failed=1
  fi
done
if [ "$tests_failed" != 0 ]; then status=1; dump_on_failure; fi

section "dispatch benchmark"
if [ -x "$RUN/bench" ]; then
  timeout "$STEP_TIMEOUT" "$RUN/bench" dispatch --devices NV --n 200 --repeats 5 || { status=1; dump_on_failure; }
  # The same next to the CUDA fallback (libcuda) as the baseline, where it opens (informative).
  timeout "$STEP_TIMEOUT" "$RUN/bench" dispatch --devices NV,CUDA --baseline CUDA --n 200 --repeats 5 || echo "bench with the CUDA baseline: failed (informative only)"
else
  echo "bench: not in this build (skipped)"
fi

section "the engine on the GPU (NV=1): quickstart, opts diff, BEAM, JIT, graph fuzz, benches"
# The whole pipeline on NV: PTX rendered by rawgrad, compiled by the host's ptxas, loaded and run
# through the raw-ioctl queues; every result compared with INTERP or a float64 host reference.
# Each step under its own timeout; a failure marks the status and the run goes on.
if [ -d "$RUN/extra" ]; then
  ex=$(mktemp -d)
  for f in "$RUN"/extra/*.gz; do
    gzip -dc "$f" > "$ex/$(basename "$f" .gz)" && chmod +x "$ex/$(basename "$f" .gz)"
  done
  engine_step() {
    local limit=$1; shift
    echo "---- $* (timeout ${limit}s)"
    local t0=$SECONDS
    if ! NV=1 timeout "$limit" "$@" 2>&1 | tail -n 40; then
      echo "---- FAILED: $*"; status=1
    fi
    echo "---- $(( SECONDS - t0 )) s"
  }
  engine_step "$STEP_TIMEOUT" env STEPS=30 "$ex/quickstart"
  engine_step "$((STEP_TIMEOUT * 2))" "$ex/kernel_opts_diff" on_gpu --nocapture --test-threads=1
  engine_step "$((STEP_TIMEOUT * 2))" "$ex/beam_search" on_gpu --nocapture --test-threads=1
  engine_step "$((STEP_TIMEOUT * 2))" "$ex/jit" --test-threads=1
  engine_step "$((STEP_TIMEOUT * 2))" env GRAPH_FUZZ_CASES=40 "$ex/tensor_graph_fuzz" --nocapture
  if [ -x "$RUN/bench" ]; then
    engine_step "$STEP_TIMEOUT" "$RUN/bench" jit --devices NV,CUDA --repeats 5
    # BEAM on the emulator takes minutes (every candidate runs on the software GPU): GPU only.
    [ "${MOCKGPU:-0}" != 0 ] || engine_step "$STEP_TIMEOUT" "$RUN/bench" beam --device NV --amt 2 --repeats 3
    engine_step "$((STEP_TIMEOUT * 3))" "$RUN/bench" workloads --devices NV \
      --workloads "${NVRUN_WORKLOADS:-W1,W2,W3,W4,W5,W6,W7,W8,W9,W10,W11,W12}" \
      --threads 1 --repeats 5 --budget-s 1 --no-ceilings
  fi
  rm -rf "$ex"
  [ "$status" = 0 ] || dump_on_failure
else
  echo "no extra/ in this build (skipped)"
fi

section "done (status $status)"
exit $status
