#!/usr/bin/env bash
# Issue 30's acceptance in one VM boot: sframe-prof with per-process
# coverage (no service) against sframe-prof with sframe-coverd's file store,
# on programs no one here wrote, then what the service costs.
#
#   tests/vm/run-vm.sh --run "$PWD/bench/coverd_guest.sh $PWD/build" build vm-out/coverd
#   bench/coverd_table.py vm-out/coverd/results/coverd
#
# Phases (each leaves its files in $SFRAME_VM_RESULTS/coverd):
#  1. per process: each workload recorded twice with --coverage process (the
#     first run fills the SFrame cache, as a user's machine has it: the
#     second is measured); then 200 sleeping processes of one program under
#     `sframe-prof record -a --coverage process`: the module's supplied bytes;
#  2. the service: sframe-coverd started with its defaults (the files mapped
#     now, the libraries of the linker's paths), the time until it is idle;
#     each workload recorded with --coverage service (its programs seen by
#     the service for the first time);
#  2b. the module reloaded and the service started again, as after a
#     reboot: each workload recorded again (its programs covered at the
#     start, from the service's list of files mapped before);
#  3. a program started during an -a recording (its first samples);
#  4. 200 sleeping processes of one new program with the service: the
#     store's bytes;
#  5. a binary never seen before: exec to coverage, 20 runs
#     (coverd_vmbench);
#  6. the service idle for IDLE seconds: its CPU time and resident memory.
# A sample's stack is judged on the host (coverd_table.py): it reaches main
# (or __libc_start_main / __libc_start_call_main: Debian's programs are
# stripped), start_thread (other threads), or not.
set -uo pipefail

BUILD=${1:?usage: coverd_guest.sh BUILD_DIR [HZ] [IDLE_SECONDS]}
HZ=${2:-499}
IDLE=${3:-600}
PROF=$BUILD/userlib/sframe-prof
CLIENT=$BUILD/userlib/sframe-client
COVERD=$BUILD/userlib/sframe-coverd
BENCH=$BUILD/bench/coverd_vmbench
OUT=${SFRAME_VM_RESULTS:-/tmp}/coverd
W=/tmp/coverd-work
mkdir -p "$OUT" "$W/proj"
log() { echo "coverd_guest: $(date +%T) $*" | tee -a "$OUT/phases.txt"; }
# shellcheck source=guest_common.sh
. "$(dirname "${BASH_SOURCE[0]}")/guest_common.sh"

# ---- inputs ------------------------------------------------------------------
workloads_prepare "$W"

record_all() { # mode tag
	local mode=$1 tag=$2 w name cmd t0
	for w in "${WORKLOADS[@]}"; do
		name=${w%%|*}
		cmd=${w#*|}
		t0=$(now)
		bash -c "$PROF record -F $HZ --coverage $mode -o $OUT/$tag-$name.data -- $cmd" \
			> /dev/null 2> "$OUT/$tag-$name.log"
		rc=$?
		echo "$tag $name: exit $rc in $(since "$t0") s" >> "$OUT/phases.txt"
		[ "$tag" = warmup ] && { rm -f "$OUT/$tag-$name.data"; continue; }
		$PROF report -i "$OUT/$tag-$name.data" --folded > "$OUT/$tag-$name.folded" 2>> "$OUT/$tag-$name.log"
		rm -f "$OUT/$tag-$name.data"
	done
}

start_sleepers() { # program count
	local i
	SLEEPERS=()
	for ((i = 0; i < $2; i++)); do
		"$1" 600 & SLEEPERS+=($!)
	done
}
stop_sleepers() { kill "${SLEEPERS[@]}" 2> /dev/null; wait "${SLEEPERS[@]}" 2> /dev/null; }

# ---- 1. per process ----------------------------------------------------------
log "phase 1: per-process coverage (no service)"
record_all process warmup
record_all process process
cp /bin/sleep "$W/sleep-a"
start_sleepers "$W/sleep-a" 200
sleep 5
s0=$(stat_of supplied_bytes)
$PROF record -a -F 99 --coverage process --duration 90 -o "$W/all-sleepers.data" \
	> /dev/null 2> "$OUT/sleepers-process.log" &
prof=$!
sleep 85
s1=$(stat_of supplied_bytes)
wait $prof
n=$(ls /proc | grep -c '^[0-9]')
echo "per-process: 200 sleepers ($n processes on the machine): supplied_bytes $s0 -> $s1 (+$((s1 - s0)))" | tee -a "$OUT/memory.txt"
stop_sleepers
rm -f "$W/all-sleepers.data"

# ---- 2. the service ----------------------------------------------------------
log "phase 2: sframe-coverd"
start_coverd coverd.log "service idle (every file looked at)"
$CLIENT coverage > "$OUT/coverage.txt" 2>&1
record_all service service

# ---- 2b. the service after a reboot ------------------------------------------
# The module reloaded (its store empty, as after a reboot) and the service
# started again: its list of the files processes mapped before
# (coverd-mapped-files in the cache directory) covers the programs of phase 2
# before they run again (cc1plus, as, node), which phase 2 covered only at
# their first mapping.
log "phase 2b: the module reloaded and sframe-coverd started again (a reboot)"
kill -TERM $coverd
wait $coverd
echo "sframe-coverd (first start) exit $?" >> "$OUT/memory.txt"
if modprobe -r sframe_unwind && modprobe sframe_unwind; then
	echo "module reloaded" >> "$OUT/memory.txt"
else
	# Something holds the device: the store emptied entry by entry instead.
	log "cannot reload the module: every file entry removed instead"
	$CLIENT files | awk 'NR > 1 { print $1 }' | xargs -r $CLIENT file-remove > /dev/null
fi
echo "before the restart: file_entries $(stat_of file_entries)" | tee -a "$OUT/memory.txt"
start_coverd coverd-restarted.log "restarted service idle"
record_all service restarted

# ---- 3. a program started during an -a recording -----------------------------
log "phase 3: a program started during -a"
$PROF record -a -F $HZ --coverage service --duration 25 -o "$W/all.data" > /dev/null 2> "$OUT/all.log" &
prof=$!
sleep 8
/usr/bin/python3 -c 'sum(i*i for i in range(300000))' &
late=$!
echo "late pid $late" > "$OUT/late.txt"
wait $late
wait $prof
$PROF report -i "$W/all.data" --format perf-script > "$OUT/all.script" 2>> "$OUT/all.log"
rm -f "$W/all.data"

# ---- 4. 200 processes with the service ---------------------------------------
log "phase 4: 200 processes of a new program with the service"
cp /bin/sleep "$W/sleep-b"
b0=$(stat_of file_bytes)
e0=$(stat_of file_entries)
start_sleepers "$W/sleep-b" 200
sleep 20
b1=$(stat_of file_bytes)
e1=$(stat_of file_entries)
echo "service: 200 sleepers: file_bytes $b0 -> $b1 (+$((b1 - b0))), file_entries $e0 -> $e1" | tee -a "$OUT/memory.txt"
$CLIENT files | awk -v k=":$(stat -c %i "$W/sleep-b")" 'index($2, k) && substr($2, length($2) - length(k) + 1) == k' >> "$OUT/memory.txt"
stop_sleepers

# ---- 5. exec to coverage -----------------------------------------------------
log "phase 5: exec to coverage"
$BENCH --runs 20 > "$OUT/exec-to-coverage.txt" 2>&1

# ---- 6. idle -----------------------------------------------------------------
log "phase 6: the service idle for $IDLE s"
cpu() { awk '{ print $14 + $15 }' "/proc/$coverd/stat"; }
rss() { awk '/VmRSS/ { print $2 }' "/proc/$coverd/status"; }
# Where the resident memory is: anonymous (the heap) or file pages (the
# mapped ELF files and the cache's section files, reclaimable).
rss_parts() { awk '/^Rss(Anon|File|Shmem):/ { printf "%s %s KiB ", $1, $2 }' "/proc/$coverd/status"; }
c0=$(cpu)
r0=$(rss)
echo "idle +0 s: resident $r0 KiB ($(rss_parts))" >> "$OUT/idle.txt"
for ((t = 0; t < IDLE; t += 60)); do
	sleep 60
	echo "idle +$((t + 60)) s: CPU ticks $(( $(cpu) - c0 )), resident $(rss) KiB ($(rss_parts))" >> "$OUT/idle.txt"
done
c1=$(cpu)
r1=$(rss)
tick=$(getconf CLK_TCK)
echo "idle $IDLE s: CPU $(( (c1 - c0) * 1000 / tick )) ms, resident $r0 -> $r1 KiB" | tee -a "$OUT/memory.txt"
kill -TERM $coverd
wait $coverd
echo "sframe-coverd exit $?" | tee -a "$OUT/memory.txt"
tail -5 "$OUT/coverd.log" >> "$OUT/memory.txt"
log "done"
