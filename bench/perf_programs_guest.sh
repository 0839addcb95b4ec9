#!/usr/bin/env bash
# Issue 31's acceptance figures in one VM boot: stock perf on Debian's own
# programs (python3, perl, xz, zstd -T2, sqlite3, openssl speed, g++ -O2 -c;
# stripped, no frame pointers), with sframe-coverd running.
#
#   tests/vm/run-vm.sh --run "$PWD/bench/perf_programs_guest.sh $PWD/build" build vm-out/perf-programs
#   bench/perf_programs_table.py vm-out/perf-programs/results/perf-programs
#
# Runs as root in the guest, the module loaded by the rig.  sframe-coverd
# is started with its defaults and waited for as bench/coverd_guest.sh does
# (bench/guest_common.sh, which also has the workloads).  Then, program by
# program: one run to warm up (the service covers the program at its first
# exec; the page cache), then RUNS rounds of
#   base   the workload without perf
#   g      perf record -g, perf_callchain=Y (the module walks perf's user
#          callchains)
#   fp     perf record --call-graph fp, perf_callchain=N (perf's own walk)
#   dwarf  perf record --call-graph dwarf, perf_callchain=N
#   defer  perf record --call-graph fp,defer, perf_callchain=Y: only where
#          the kernel has unwind_user (7.x: deferred user callchains)
# all sampling cpu-clock at HZ (TCG has no PMU).  Each run's wall time is
# measured around the workload itself (bash's time, inside perf record for
# the perf rows), its stderr kept (openssl speed's counts).  Per perf run:
# the data file's size and perf's own report; of the first round, perf
# script's output (comm, tid, ip, sym, dso; no inlined frames), which the
# table judges on the host; on the rows with the switch on, the module's
# counters (sframe-client stats) before and after each run.
#
# Files in $SFRAME_VM_RESULTS/perf-programs: info.txt, phases.txt,
# coverd.txt, coverd.log, and per program NAME and row ROW, round R:
#   NAME.ROW.R.time   wall seconds      NAME.ROW.R.err    the workload's stderr
#   NAME.ROW.R.size   data file bytes   NAME.ROW.R.perf   perf record's stderr
#   NAME.ROW.R.stats0, .stats1          sframe-client stats before/after (Y rows)
#   NAME.ROW.script                     perf script of round 1
set -uo pipefail

BUILD=${1:?usage: perf_programs_guest.sh BUILD_DIR [HZ [RUNS [PROGRAM...]]]}
HZ=${2:-499}
RUNS=${3:-3}
# Which programs: names of bench/guest_common.sh's workloads.
PROGRAMS=("${@:4}")
[ ${#PROGRAMS[@]} = 0 ] && PROGRAMS=(python3 perl xz zstd sqlite3 openssl gxx)
CLIENT=$BUILD/userlib/sframe-client
COVERD=$BUILD/userlib/sframe-coverd
PARAM=/sys/module/sframe_unwind/parameters/perf_callchain
OUT=${SFRAME_VM_RESULTS:-/tmp}/perf-programs
W=/tmp/perf-programs-work
mkdir -p "$OUT" "$W"
log() { echo "perf_programs: $(date +%T) $*" | tee -a "$OUT/phases.txt"; }
# shellcheck source=guest_common.sh
. "$(dirname "${BASH_SOURCE[0]}")/guest_common.sh"

# The g++ workload without <regex>: with it, cc1plus alone takes over a
# minute a run under emulation, and its dwarf data some 300 MB.
workloads_prepare "$W" -DNO_REGEX

# row name, perf record's call-graph option, the switch.
ROWS=("g|-g|Y" "fp|--call-graph fp|N" "dwarf|--call-graph dwarf|N")
if grep -qw unwind_user /sys/kernel/tracing/available_filter_functions 2> /dev/null; then
	ROWS+=("defer|--call-graph fp,defer|Y")
fi

{
	echo "date $(date -u +%FT%TZ)"
	echo "kernel $(uname -r)"
	echo "perf $(perf --version 2>&1)"
	echo "hz $HZ"
	echo "runs $RUNS"
	echo "cpus $(nproc)"
	echo "rows ${ROWS[*]}"
	echo "programs ${PROGRAMS[*]}"
	echo "perf_event_max_sample_rate $(cat /proc/sys/kernel/perf_event_max_sample_rate)"
} > "$OUT/info.txt"

fail=0
if [ ! -w "$PARAM" ] || ! command -v perf > /dev/null; then
	log "no $PARAM or no perf: nothing to measure"
	exit 1
fi

switch() { # Y|N
	echo "$1" > "$PARAM"
	[ "$(cat "$PARAM")" = "$1" ] || { log "perf_callchain: wrote $1, reads $(cat "$PARAM")"; fail=1; }
}

# The shell command that runs workload command CMD with its stdout dropped,
# its stderr in ERR, and writes its wall time in seconds to TIME: the same
# with and without perf around it.
timed() { # CMD ERR TIME
	# (Redirections of the timed command itself would take time's report.)
	printf 'TIMEFORMAT=%%3R; { time ( { %s; } > /dev/null 2> %q ); } 2> %q' "$1" "$2" "$3"
}

run_base() { # NAME CMD R
	bash -c "$(timed "$2" "$OUT/$1.base.$3.err" "$OUT/$1.base.$3.time")"
}

run_row() { # NAME CMD R ROW OPTIONS SWITCH
	local name=$1 cmd=$2 r=$3 row=$4 opts=$5 on=$6 p data=$W/perf.data rc t0 t1 rec
	p=$OUT/$name.$row.$r
	t0=$(now)
	switch "$on"
	[ "$on" = Y ] && $CLIENT stats > "$p.stats0" 2>&1
	# shellcheck disable=SC2086 # OPTIONS: words
	perf record -e cpu-clock -F "$HZ" $opts -o "$data" \
		-- bash -c "$(timed "$cmd" "$p.err" "$p.time")" > /dev/null 2> "$p.perf"
	rc=$?
	[ "$on" = Y ] && $CLIENT stats > "$p.stats1" 2>&1
	switch N
	[ $rc = 0 ] || { log "$name $row $r: perf record exit $rc"; fail=1; }
	stat -c %s "$data" > "$p.size" 2> /dev/null
	rec=$(since "$t0")
	t1=$(now)
	if [ "$r" = 1 ]; then
		perf script -i "$data" -F comm,tid,ip,sym,dso --no-inline > "$OUT/$name.$row.script" \
			2> "$OUT/$name.$row.script.log"
	fi
	rm -f "$data"
	echo "$name $row $r: workload $(cat "$p.time") s, perf record $rec s in all," \
		"perf script $(since "$t1") s" >> "$OUT/phases.txt"
}

log "sframe-coverd"
switch N
start_coverd coverd.log "sframe-coverd idle" coverd.txt

for name in "${PROGRAMS[@]}"; do
	cmd=$(workload_command "$name")
	prog=${cmd%% *}
	if [ -z "$cmd" ] || ! command -v "$prog" > /dev/null; then
		log "$name: ${prog:-no such workload}: not here, skipped"
		echo "skipped $name" >> "$OUT/info.txt"
		continue
	fi
	log "$name: warm-up: $cmd"
	run_base "$name" "$cmd" 0
	for ((r = 1; r <= RUNS; r++)); do
		t0=$(now)
		run_base "$name" "$cmd" "$r"
		for row in "${ROWS[@]}"; do
			IFS='|' read -r rname opts on <<< "$row"
			run_row "$name" "$cmd" "$r" "$rname" "$opts" "$on"
		done
		log "$name: round $r of $RUNS in $(since "$t0") s"
	done
done

switch N
kill -TERM "$coverd"
wait "$coverd"
echo "sframe-coverd exit $?" >> "$OUT/coverd.txt"
$CLIENT stats > "$OUT/stats-final.txt" 2>&1
{
	echo "perf_event_max_sample_rate at the end $(cat /proc/sys/kernel/perf_event_max_sample_rate)"
	dmesg | grep -i "perf" | tail -5 | sed 's/^/dmesg: /'
} >> "$OUT/info.txt"
log "done"
exit $fail
