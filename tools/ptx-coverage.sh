#!/usr/bin/env bash
# The PTX interpreter's instruction coverage over the NV suite: runs `NV=1 MOCKGPU=1 cargo test`
# (the real code, MOCKGPU_CODE=ptx) with MOCKGPU_COVERAGE pointing at a fresh file (every launch
# of every test process appends `<opcode> <count>` lines; src/mockgpu/nvgpu/ptx/coverage.rs),
# then prints the executed opcodes with their counts and the mnemonics the interpreter knows
# (src/mockgpu/nvgpu/ptx/isa.rs, OPCODES) that the suite never executed.
# Usage: tools/ptx-coverage.sh [cargo test arguments...]   (COVERAGE_FILE=<path> keeps the raw file)
set -euo pipefail
cd "$(dirname "$0")/.."
raw="${COVERAGE_FILE:-$(mktemp "${TMPDIR:-/tmp}/ptx-coverage.XXXXXX")}"
: >"$raw"
status=0
NV=1 MOCKGPU=1 MOCKGPU_CODE=ptx MOCKGPU_COVERAGE="$raw" cargo test "$@" || status=$?
echo "== executed opcodes (executions, summed over every launch and thread)"
awk 'NF == 2 { n[$1] += $2 } END { for (op in n) printf "%14d  %s\n", n[op], op }' "$raw" | sort -k2
known=$(sed -n '/ptx-opcodes-begin/,/ptx-opcodes-end/p' src/mockgpu/nvgpu/ptx/isa.rs | grep -o '"[a-z0-9]*"' | tr -d '"')
used=$(awk 'NF == 2 { split($1, p, "."); print p[1] }' "$raw" | sort -u)
echo "== known mnemonics never executed"
comm -23 <(echo "$known" | sort -u) <(echo "$used") | tr '\n' ' '
echo
echo "== $(echo "$used" | grep -c .) of $(echo "$known" | sort -u | grep -c .) known mnemonics executed; raw counts in $raw"
if [ "$status" != 0 ]; then
  echo "(cargo test failed with status $status)"
fi
exit "$status"
