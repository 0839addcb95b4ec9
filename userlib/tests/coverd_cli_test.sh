#!/bin/sh
# sframe-coverd on the host (no module): its usage errors (exit 2), a
# missing device (exit 1, saying so), and --once --cache-only, which needs
# no module: the SFrame of a library dir's libraries made into the cache,
# a library and its link counted once, a cache that cannot be written said
# and exit 1.
set -u
COVERD=${1:?usage: coverd_cli_test.sh SFRAME_COVERD}
T=$(mktemp -d)
trap 'chmod -R u+w "$T"; rm -rf "$T"' EXIT
fail() { echo "FAIL: $*"; exit 1; }

"$COVERD" --bogus 2> "$T/err"; [ $? -eq 2 ] || fail "unknown option: not exit 2"
grep -q "^usage: sframe-coverd" "$T/err" || fail "no usage text"
"$COVERD" --cache-only 2> /dev/null; [ $? -eq 2 ] || fail "--cache-only without --once: not exit 2"
"$COVERD" --generations-per-second 0 2> /dev/null; [ $? -eq 2 ] || fail "0 generations: not exit 2"

if [ ! -e /dev/sframe_unwind ]; then
	"$COVERD" --state-dir "$T/state" 2> "$T/err"; [ $? -eq 1 ] || fail "no device: not exit 1"
	grep -q "/dev/sframe_unwind" "$T/err" || fail "no device: the message does not name it: $(cat "$T/err")"
fi

mkdir "$T/libs"
lib=$(ldd /bin/sh | awk '/libc.so/ { print $3 }')
cp "$lib" "$T/libs/libx.so.6"
ln -s libx.so.6 "$T/libs/libx.so"
echo "GROUP ( libx.so.6 )" > "$T/libs/liby.so"   # a linker script: not ELF, not counted
"$COVERD" --once --cache-only --library-dir "$T/libs" --cache-dir "$T/cache" 2> "$T/err"
[ $? -eq 0 ] || fail "--cache-only: not exit 0: $(cat "$T/err")"
grep -q ": 1 sections made, 0 up to date, 0 made but not stored" "$T/err" || fail "first fill: $(cat "$T/err")"
[ "$(ls "$T/cache" | wc -l)" -eq 1 ] || fail "cache: $(ls "$T/cache")"
"$COVERD" --once --cache-only --library-dir "$T/libs" --cache-dir "$T/cache" 2> "$T/err"
grep -q ": 0 sections made, 1 up to date" "$T/err" || fail "second fill: $(cat "$T/err")"
if [ "$(id -u)" -ne 0 ]; then  # root writes anyway
	rm -rf "$T/cache"; mkdir "$T/cache"; chmod a-w "$T/cache"
	"$COVERD" --once --cache-only --library-dir "$T/libs" --cache-dir "$T/cache" 2> "$T/err"
	[ $? -eq 1 ] || fail "unwritable cache: not exit 1"
	grep -q "1 made but not stored" "$T/err" || fail "unwritable cache: $(cat "$T/err")"
fi
echo "ok"
