#!/bin/bash
# The reproducer of an emulator fault, not a test: stock ftrace's function
# tracer switched on and off on perf_callchain_user() N times while
# `perf record -a -g` samples a spinning workload, no module loaded.
#
#   tests/vm/run-vm.sh --no-module --run \
#     "N=1000 bash $PWD/tests/vm/rig/mttcg-ftrace-int3.sh $PWD/build" build OUT
#
# Measured on 2026-12-06 with Debian's 7.3.4+deb13 guest: under Debian 12's
# qemu 7.2 with multi-threaded TCG the guest oopses within seconds ("Oops:
# int3" at perf_callchain_user+0x5, from perf's hrtimer sample: an int3 of
# an ftrace text patch executed after the patch was done, not claimed by
# the kernel's text_poke int3 handler); with SFRAME_VM_TCG_THREAD=single
# (1000 switches in 167 s) and with trixie's qemu 10.0.13 (117 s) it does
# not.  6.1's guest passes under qemu 7.2 with either.  So the VM suite's
# tests that switch ftrace ops under sampling (perf_callchain_vmtest) get a
# boot of their own with single-threaded TCG (scripts/run-tests.sh).
set -u
build=${1:?usage: mttcg-ftrace-int3.sh BUILD_DIR}
T=/sys/kernel/tracing
[[ -d $T/events ]] || mount -t tracefs nodev $T
cd /tmp || exit 1
SFRAME_WORKLOAD_NO_REGISTER=1 "$build/tests/vm/session_workload" spin 600 > /dev/null & w=$!
perf record -q -B -a -g -e cpu-clock -F 2000 -o ftrace-int3.data & p=$!
sleep 2
echo perf_callchain_user > $T/set_ftrace_filter
t0=$(date +%s)
for _ in $(seq "${N:-1000}"); do
	echo function > $T/current_tracer
	echo nop > $T/current_tracer
done
echo "${N:-1000} switches in $(($(date +%s) - t0)) s"
echo > $T/set_ftrace_filter
kill -INT $p
wait $p
kill $w
