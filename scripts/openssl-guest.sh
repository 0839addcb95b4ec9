#!/usr/bin/env bash
# Run inside the VM (tests/vm/run-vm.sh --run, as root, the module loaded):
# profile OpenSSL's hand-written assembly with sframe-prof (SFrame made from
# .eh_frame) and with perf record --call-graph dwarf, one after the other in
# the same boot, and print the share of samples whose stack reaches main
# (scripts/openssl_table.py).  Issue 11, section 3; numbers go to
# docs/benchmarks.md.
#
#   openssl-guest.sh BUILD_DIR [SECONDS]
set -uo pipefail

BUILD=${1:?usage: openssl-guest.sh BUILD_DIR [SECONDS]}
SECS=${2:-3}
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
OUT=${SFRAME_VM_RESULTS:?not in the VM rig}/openssl
PROF=$BUILD/userlib/sframe-prof
HZ=${OPENSSL_HZ:-1000}
mkdir -p "$OUT"
cd "$OUT" || exit 1

step() { echo "openssl-guest: $*" >&2; }

step "CPU flags that pick OpenSSL's code paths:" \
	"$(grep -o -w -E 'sha_ni|avx2|avx512f|aes|pclmulqdq|bmi2|adx' /proc/cpuinfo | sort -u | tr '\n' ' ')"

# name, then the command
run_one() {
	local name=$1
	shift
	step "$name: sframe-prof record -F $HZ -- $*"
	"$PROF" record -F "$HZ" -o "$name.sframe-prof.data" -- "$@" > "$name.sframe-prof.out" \
		2> "$name.sframe-prof.err"
	"$PROF" report -i "$name.sframe-prof.data" --folded > "$name.sframe-prof.folded"
	"$PROF" report -i "$name.sframe-prof.data" --top 12 > "$name.sframe-prof.top"
	if command -v perf > /dev/null; then
		step "$name: perf record --call-graph dwarf -F $HZ -- $*"
		perf record -q -e cpu-clock -F "$HZ" --call-graph dwarf -o "$name.perf.data" \
			-- "$@" > "$name.perf.out" 2> "$name.perf.err"
		perf script -i "$name.perf.data" -F comm,tid,ip,sym,dso > "$name.perf.script" 2> /dev/null
	fi
}

run_one sha256 openssl speed -seconds "$SECS" sha256
run_one aes-128-gcm openssl speed -seconds "$SECS" -evp aes-128-gcm

# A TLS server on loopback, and s_time's handshakes and page fetches
# against it (the client is profiled: it is the command started).
openssl req -x509 -newkey rsa:2048 -nodes -subj /CN=localhost -days 1 \
	-keyout key.pem -out cert.pem 2> /dev/null
openssl s_server -quiet -accept 127.0.0.1:4433 -cert cert.pem -key key.pem -www \
	> s_server.out 2>&1 &
server=$!
sleep 2
run_one s_time openssl s_time -connect 127.0.0.1:4433 -new -www / -time "$SECS"
kill "$server" 2> /dev/null
wait "$server" 2> /dev/null

python3 "$ROOT/scripts/openssl_table.py" "$OUT" sha256 aes-128-gcm s_time | tee table.md
