#!/usr/bin/env bash
# The main job, where the host cannot load modules (`make demo`): install what
# is needed, build, install the module with DKMS for Debian's stock kernel,
# boot that kernel in a VM and profile examples/demo_workload there (threads,
# a shared library, a system call path; no frame pointers, no .sframe) with
# sframe-prof, with stock perf record -g served by the module (its
# perf_callchain switch on, sframe-coverd keeping SFrame per file), and side
# by side with perf record --call-graph fp and --call-graph dwarf without
# the switch.  Leaves in demo-out/: flamegraph.svg, the folded
# stacks, the top functions, the profile as pprof (sframe-prof.pb.gz, for
# pprof, Pyroscope, Parca) and comparison.md (share of samples whose stack
# reaches the root of the work, bytes per sample, slowdown).
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT"
BUILD=$ROOT/build
OUT=$ROOT/demo-out

scripts/install-deps.sh
cmake -S . -B "$BUILD"
cmake --build "$BUILD" -j"$(nproc)" --target sframe-prof sframe-coverd demo_workload
scripts/dkms-install.sh
rm -rf "$ROOT/vm-out/demo"
tests/vm/run-vm.sh --run "bash $ROOT/scripts/demo-guest.sh $BUILD" "$BUILD" "$ROOT/vm-out/demo"
rm -rf "$OUT"
mkdir -p "$OUT"
for f in flamegraph.svg sframe-prof.folded top.txt sframe-prof.pb.gz comparison.md; do
	cp "$ROOT/vm-out/demo/results/demo/$f" "$OUT/"
done
echo
echo "demo: results in $OUT (flame graph: $OUT/flamegraph.svg)"
cat "$OUT/comparison.md"
