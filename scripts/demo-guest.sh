#!/usr/bin/env bash
# Run by scripts/demo.sh inside the VM (as root, the module loaded): profile
# examples/demo_workload with sframe-prof, perf --call-graph fp and perf
# --call-graph dwarf, and leave the results in $SFRAME_VM_RESULTS/demo.
set -uo pipefail

BUILD=${1:?usage: demo-guest.sh BUILD_DIR}
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
OUT=${SFRAME_VM_RESULTS:?not in the VM rig}/demo
WORKLOAD=$BUILD/examples/demo_workload
PROF=$BUILD/userlib/sframe-prof
ROUNDS=${DEMO_ROUNDS:-3000}
HZ=${DEMO_HZ:-1000}
mkdir -p "$OUT"
cd "$OUT" || exit 1

step() { echo "demo: $*" >&2; }

step "baseline: $WORKLOAD $ROUNDS, 3 runs without profiling"
for _ in 1 2 3; do "$WORKLOAD" "$ROUNDS"; done > baseline.out

step "sframe-prof record -F $HZ"
"$PROF" record -F "$HZ" -o sframe-prof.data -- "$WORKLOAD" "$ROUNDS" \
	> sframe-prof.out 2> sframe-prof.err
cat sframe-prof.err >&2
"$PROF" report -i sframe-prof.data --folded > sframe-prof.folded
"$PROF" report -i sframe-prof.data --svg flamegraph.svg
"$PROF" report -i sframe-prof.data --top 15 > top.txt
"$PROF" report -i sframe-prof.data --format pprof -o sframe-prof.pb.gz

if command -v perf > /dev/null; then
	for mode in fp dwarf; do
		step "perf record --call-graph $mode -F $HZ"
		perf record -q -e cpu-clock -F "$HZ" --call-graph "$mode" -o "perf-$mode.data" \
			-- "$WORKLOAD" "$ROUNDS" > "perf-$mode.out" 2> "perf-$mode.err"
		step "perf script ($mode)"
		perf script -i "perf-$mode.data" -F comm,tid,ip,sym > "perf-$mode.script" \
			2> /dev/null
	done
else
	step "perf is not installed (linux-perf): no perf comparison"
fi

python3 "$ROOT/scripts/demo_table.py" "$OUT" > comparison.md
cat comparison.md
