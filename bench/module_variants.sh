#!/bin/bash
# In the VM (tests/vm/run-vm.sh --run): load each module file in turn and
# run the benchmark command with it, so that builds of the module are
# compared in one boot (ratios are comparable within a run only).
# Usage: bench/module_variants.sh 'BENCH CMD' MODULE.ko...
set -u
cmd=${1:?usage: $0 'BENCH CMD' MODULE.ko...}
shift
# sframe-client of the build this script belongs to, else the installed one.
client=$(dirname "$0")/../build/userlib/sframe-client
[ -x "$client" ] || client=$(command -v sframe-client || true)
for ko in "$@"; do
	rmmod sframe_unwind || exit 1
	insmod "$ko" || exit 1
	echo "=== module $ko ($(date +%T), load $(cut -d' ' -f1-3 /proc/loadavg))"
	bash -c "$cmd" || exit 1
	# The walks done in the interrupt, and their time (under icount:
	# instructions, from the walk's start to its end).
	p=/sys/module/sframe_unwind/parameters
	[ -r $p/irq_walks ] && echo "irq_walks $(cat $p/irq_walks) irq_walk_ns $(cat $p/irq_walk_ns)"
	# The module's counters since it was loaded (frames by method, stops,
	# registry changes): what tells an unusual run from the others.
	[ -x "$client" ] && "$client" stats
done
