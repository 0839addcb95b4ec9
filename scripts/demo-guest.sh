#!/usr/bin/env bash
# Run by scripts/demo.sh inside the VM (as root, the module loaded): profile
# examples/demo_workload with sframe-prof; with stock `perf record -g`, its
# user stacks walked by the module (perf_callchain=1) from the sections
# sframe-coverd keeps per file; and with perf --call-graph fp and --call-graph
# dwarf without the module's switch; leave the results in
# $SFRAME_VM_RESULTS/demo.
set -uo pipefail

BUILD=${1:?usage: demo-guest.sh BUILD_DIR}
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
OUT=${SFRAME_VM_RESULTS:?not in the VM rig}/demo
WORKLOAD=$BUILD/examples/demo_workload
PROF=$BUILD/userlib/sframe-prof
COVERD=$BUILD/userlib/sframe-coverd
PARAM=/sys/module/sframe_unwind/parameters/perf_callchain
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
	# The way a user of stock perf gets SFrame stacks: the coverage service
	# running (the files mapped now at its start; each new one at its first
	# mapping, the workload's own among them), and the switch on.
	step "sframe-coverd, then perf record -g -F $HZ with perf_callchain=1"
	"$COVERD" --no-libraries --state-dir coverd --cache-dir coverd-cache -v \
		> coverd.log 2>&1 &
	coverd=$!
	for _ in $(seq 600); do
		grep -q "the files mapped at start are covered" coverd.log && break
		kill -0 "$coverd" 2> /dev/null || break
		sleep 0.5
	done
	grep "the files mapped at start are covered" coverd.log >&2 ||
		{ step "sframe-coverd did not start:"; cat coverd.log >&2; }
	echo 1 > "$PARAM"
	perf record -q -e cpu-clock -F "$HZ" -g -o perf-g-module.data \
		-- "$WORKLOAD" "$ROUNDS" > perf-g-module.out 2> perf-g-module.err
	echo 0 > "$PARAM"
	kill -TERM "$coverd"
	wait "$coverd"
	perf script -i perf-g-module.data -F comm,tid,ip,sym > perf-g-module.script 2> /dev/null
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
