#!/usr/bin/env bash
# The table of bench/children_make.sh, made on the host from what the guest
# recorded: sframe-prof report --folded of both sframe-prof runs, perf
# script of the perf run (--no-inline: resolving inlined frames runs
# addr2line per address, for hours), then children_make_table.py.
#
#   bench/children_make_report.sh BUILD_DIR RESULTS_DIR
set -euo pipefail
BUILD=${1:?usage: children_make_report.sh BUILD_DIR RESULTS_DIR}
DIR=${2:?usage: children_make_report.sh BUILD_DIR RESULTS_DIR}
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
for m in cold warm; do
	"$BUILD/userlib/sframe-prof" report -i "$DIR/sframe-$m.data" --folded > "$DIR/sframe-$m.folded"
done
perf script --no-inline -i "$DIR/perf-dwarf.data" -F comm,tid,ip,sym > "$DIR/perf-dwarf.script" \
	2> /dev/null
cat "$DIR/times.txt"
python3 "$HERE/children_make_table.py" "$DIR"
