#!/usr/bin/env bash
# Issue 31's figures for the other readers of the kernel's user callchains,
# in one VM boot with sframe-coverd running: BPF's bpf_get_stack() (the
# same get_perf_callchain() -> perf_callchain_user() as perf's samples)
# as bpftrace's ustack and bcc's profile ask it, beside perf record -g,
# and the perf tool's own test suite with perf_callchain on and off.
#
#   tests/vm/run-vm.sh --run "$PWD/bench/perf_tools_guest.sh $PWD/build" build vm-out/perf-tools
#   bench/perf_tools_table.py vm-out/perf-tools/results/perf-tools
#
# Runs as root in the guest, the module loaded by the rig.  Per program
# (python3 and perl by default: both run one long process, so that the
# three profilers look at the same one), the program is started once and
# then, with perf_callchain=Y and again with N, for SECONDS each:
#   perf      perf record -g -p PID, its perf script kept
#   bpftrace  bpftrace -e 'profile:hz:HZ /pid == PID/ { @[ustack] = count(); }'
#   bcc       profile-bpfcc -U -f -F HZ -p PID SECONDS (folded user stacks)
# (bpftrace and bcc sample only once their probes are attached: their
# start-up, long under emulation, is not in their SECONDS.)  Then
# `perf test` twice, N first, then Y; each case's verdict kept.
#
# Files in $SFRAME_VM_RESULTS/perf-tools: info.txt, phases.txt, coverd.*,
# NAME.SWITCH.{perf.script,bpftrace,bcc} and their .log (stderr),
# NAME.SWITCH.stats0/.stats1 (the module's counters around the three),
# perftest.SWITCH (perf test's output) and perftest.SWITCH.time.
#
# PROGRAM "none" runs perf test alone; PERF_TEST_TIMEOUT (seconds, 1800 by
# default) is each perf test run's limit (6.1's suite takes about 1,750 s
# under TCG with nothing else on the host).
set -uo pipefail

BUILD=${1:?usage: perf_tools_guest.sh BUILD_DIR [HZ [SECONDS [PROGRAM...]]]}
HZ=${2:-499}
SECONDS_EACH=${3:-15}
PROGRAMS=("${@:4}")
[ ${#PROGRAMS[@]} = 0 ] && PROGRAMS=(python3 perl)
[ "${PROGRAMS[*]}" = none ] && PROGRAMS=()
PERF_TEST_TIMEOUT=${PERF_TEST_TIMEOUT:-1800}
CLIENT=$BUILD/userlib/sframe-client
COVERD=$BUILD/userlib/sframe-coverd
PARAM=/sys/module/sframe_unwind/parameters/perf_callchain
OUT=${SFRAME_VM_RESULTS:-/tmp}/perf-tools
W=/tmp/perf-tools-work
mkdir -p "$OUT" "$W"
log() { echo "perf_tools: $(date +%T) $*" | tee -a "$OUT/phases.txt"; }
# shellcheck source=guest_common.sh
. "$(dirname "${BASH_SOURCE[0]}")/guest_common.sh"

# One process that runs until the three profilers are done with it (then
# killed): the loops of bench/guest_common.sh's python3 and perl
# workloads, repeated.
long_command() { # NAME
	case $1 in
	python3) echo "/usr/bin/python3 -c 'while True: sum(i*i for i in range(1500000))'" ;;
	perl) echo "/usr/bin/perl -e 'while (1) { \$s=0; for \$i (1..1500000) { \$s += \$i*\$i } }'" ;;
	esac
}

{
	echo "date $(date -u +%FT%TZ)"
	echo "kernel $(uname -r)"
	echo "perf $(perf --version 2>&1)"
	echo "bpftrace $(bpftrace --version 2>&1)"
	echo "bcc $(dpkg-query -W -f '${Version}' bpfcc-tools 2>&1)"
	echo "hz $HZ"
	echo "seconds $SECONDS_EACH"
	echo "cpus $(nproc)"
	echo "programs ${PROGRAMS[*]}"
	echo "perf test timeout $PERF_TEST_TIMEOUT"
} > "$OUT/info.txt"

fail=0
needs=(perf)
[ ${#PROGRAMS[@]} = 0 ] || needs+=(bpftrace profile-bpfcc)
for need in "${needs[@]}"; do
	command -v $need > /dev/null || { log "no $need (scripts/install-deps.sh)"; fail=1; }
done
[ -w "$PARAM" ] || { log "no $PARAM"; fail=1; }
[ $fail = 0 ] || exit 1

switch() { # Y|N
	echo "$1" > "$PARAM"
	[ "$(cat "$PARAM")" = "$1" ] || { log "perf_callchain: wrote $1, reads $(cat "$PARAM")"; fail=1; }
}

alive() { # NAME PID SWITCH WHAT
	kill -0 "$2" 2> /dev/null && return 0
	log "$1 $3: the process is gone before $4"
	fail=1
	return 1
}

profile_three() { # NAME PID SWITCH
	local p=$OUT/$1.$3 pid=$2 t0
	switch "$3"
	rm -f "$W/perf.data"
	$CLIENT stats > "$p.stats0" 2>&1
	t0=$(now)
	perf record -g -e cpu-clock -F "$HZ" -p "$pid" -o "$W/perf.data" -- sleep "$SECONDS_EACH" \
		> /dev/null 2> "$p.perf.log" || { log "$1 $3: perf record failed"; fail=1; }
	perf script -i "$W/perf.data" -F comm,tid,ip,sym,dso --no-inline > "$p.perf.script" \
		2>> "$p.perf.log"
	cp "$W/perf.data" "$p.perf.data" 2> /dev/null
	log "$1 $3: perf record -g $(since "$t0") s"
	alive "$1" "$pid" "$3" bpftrace
	t0=$(now)
	bpftrace -e "profile:hz:$HZ /pid == $pid/ { @[ustack] = count(); }
		interval:s:$SECONDS_EACH { exit(); }" > "$p.bpftrace" 2> "$p.bpftrace.log" ||
		{ log "$1 $3: bpftrace failed"; fail=1; }
	log "$1 $3: bpftrace $(since "$t0") s"
	alive "$1" "$pid" "$3" profile-bpfcc
	t0=$(now)
	profile-bpfcc -U -f -F "$HZ" -p "$pid" "$SECONDS_EACH" > "$p.bcc" 2> "$p.bcc.log" ||
		{ log "$1 $3: profile-bpfcc failed"; fail=1; }
	log "$1 $3: profile-bpfcc $(since "$t0") s"
	alive "$1" "$pid" "$3" "the end"
	$CLIENT stats > "$p.stats1" 2>&1
	switch N
}

log "sframe-coverd"
switch N
start_coverd coverd.log "sframe-coverd idle" coverd.txt

for name in "${PROGRAMS[@]}"; do
	cmd=$(long_command "$name")
	[ -n "$cmd" ] || { log "$name: no long-running command"; fail=1; continue; }
	bash -c "exec $cmd" > /dev/null 2> "$OUT/$name.err" &
	pid=$!
	# Its start-up over (sframe-coverd covers it at its exec).
	sleep 3
	for on in Y N; do
		profile_three "$name" "$pid" "$on"
	done
	kill "$pid"
	wait "$pid" 2> /dev/null
done

# perf's own test suite, N first: its cases that need what the VM lacks
# (a PMU, hardware events) skip or fail the same way both times.  One case
# at a time, as 6.1's perf always runs them: newer perf runs them in
# parallel, and on 7.3 under TCG that starved a preempted RCU reader
# (khugepaged) past the stall timeout, with the switch off.
perf_test_args=()
case $(perf test -h 2>&1) in *--sequential*) perf_test_args=(--sequential) ;; esac
echo "perf test ${perf_test_args[*]}" >> "$OUT/info.txt"
for on in N Y; do
	switch "$on"
	t0=$(now)
	timeout "$PERF_TEST_TIMEOUT" perf test "${perf_test_args[@]}" > "$OUT/perftest.$on" 2>&1
	echo "exit $? after $(since "$t0") s" > "$OUT/perftest.$on.time"
	log "perf test with perf_callchain=$on: $(cat "$OUT/perftest.$on.time")"
	switch N
done

kill -TERM "$coverd"
wait "$coverd"
$CLIENT stats > "$OUT/stats-final.txt" 2>&1
log "done"
exit $fail
