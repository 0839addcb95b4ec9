#!/usr/bin/env bash
# Screenshots of hotspot (KDAB's perf.data GUI, Debian 12's package) showing
# a recording, taken headless: hotspot under Xvfb, driven with xdotool, the
# screen written as PNG with netpbm.  Issue 31 asks that a GUI reader of
# perf.data show the module's complete stacks.
#
#   bench/hotspot_shot.sh PERF_DATA OUT_PREFIX [WAIT_SECONDS]
#
# Writes OUT_PREFIX.topdown.png (the Top Down tree, heaviest first, its
# first root expanded all the way down: a complete stack is one path from
# _start to the leaf) and OUT_PREFIX.flamegraph.png.  Runs on the machine
# whose files the recording sampled (hotspot symbolizes from them: a
# recording of the 6.1 VM, whose root is the host's, is read on the host).
# WAIT_SECONDS (default 20): how long hotspot is given to parse the file
# before the clicks.  The clicks' coordinates are those of hotspot 1.3.0's
# window at 1400x900.  Needs `BENCH=1 scripts/install-deps.sh`.
set -euo pipefail

DATA=$(realpath -e "${1:?usage: hotspot_shot.sh PERF_DATA OUT_PREFIX [WAIT_SECONDS]}")
OUT=${2:?usage: hotspot_shot.sh PERF_DATA OUT_PREFIX [WAIT_SECONDS]}
WAIT=${3:-20}
for need in Xvfb hotspot xdotool xwdtopnm pnmtopng; do
	command -v $need > /dev/null || { echo "hotspot_shot: no $need (BENCH=1 scripts/install-deps.sh)" >&2; exit 1; }
done

TMP=$(mktemp -d)
XVFB_PID= HOTSPOT_PID=
cleanup() {
	[ -n "$HOTSPOT_PID" ] && kill "$HOTSPOT_PID" 2> /dev/null
	[ -n "$XVFB_PID" ] && kill "$XVFB_PID" 2> /dev/null
	wait 2> /dev/null
	rm -rf "$TMP"
}
trap cleanup EXIT

# A display number no other X server holds.
for ((d = 90; d < 140; d++)); do
	[ -e /tmp/.X$d-lock ] || break
done
mkdir -p "$TMP/fb" "$TMP/run"
chmod 0700 "$TMP/run"
# -fbdir: the screen is a file in XWD format, read without an X client.
Xvfb ":$d" -screen 0 1400x900x24 -fbdir "$TMP/fb" -nolisten tcp > "$TMP/xvfb.log" 2>&1 &
XVFB_PID=$!
export DISPLAY=:$d XDG_RUNTIME_DIR=$TMP/run HOME=$TMP
for ((i = 0; i < 50; i++)); do
	[ -e "$TMP/fb/Xvfb_screen0" ] && xdotool getmouselocation > /dev/null 2>&1 && break
	sleep 0.2
done

hotspot -geometry 1400x900+0+0 "$DATA" > "$TMP/hotspot.log" 2>&1 &
HOTSPOT_PID=$!
timeout 60 xdotool search --sync --name "Hotspot" > /dev/null ||
	{ echo "hotspot_shot: no hotspot window after 60 s" >&2; cat "$TMP/hotspot.log" >&2; exit 1; }
sleep "$WAIT"

shot() { xwdtopnm "$TMP/fb/Xvfb_screen0" 2> /dev/null | pnmtopng > "$1"; }
click() { xdotool mousemove "$1" "$2" click 1; sleep "${3:-2}"; }

click 245 55               # the Top Down tab
click 1141 111             # its inclusive cost column: ascending
click 1141 111             # and again: heaviest first
click 300 131 1            # the first root
xdotool key asterisk       # expanded all the way down
sleep 3
shot "$OUT.topdown.png"
click 343 55 5             # the Flame Graph tab
shot "$OUT.flamegraph.png"
echo "hotspot_shot: $OUT.topdown.png $OUT.flamegraph.png"
