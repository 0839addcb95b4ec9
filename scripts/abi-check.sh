#!/usr/bin/env bash
# The ABI of libsframe-client.so.0 against the one it promised: compares the
# library just built with the baseline recorded in the tree
# (userlib/client/abi/libsframe-client.so.0.abi, written by abidw from
# libabigail, Debian's abigail-tools), so that any change of the ABI is
# noticed, by CTest's abi_check test, in `make check`.
#
#   scripts/abi-check.sh [--update] [LIBRARY]
#
# LIBRARY: default build/userlib/libsframe-client.so.0 (built with debug
# information, CMake's default RelWithDebInfo).  Only the types the public
# headers declare count (abidw --headers-dir).
#
# Exit status: 0 when the ABI is the baseline's; 1 when it changed: added
# functions (compatible: update the baseline with --update, and the symbols
# file debian/libsframe-client0.symbols) or anything else (incompatible,
# whether or not abidiff's exit status says so: a struct of the C++ API
# that grows changes every function that returns it; bump
# SFRAME_CLIENT_SOVERSION in userlib/CMakeLists.txt and the package name
# libsframe-client<N>, then --update); 2 when the check could not run; 77
# (CTest's skip) without libabigail's tools.
# --update writes the baseline from LIBRARY and exits 0.
set -uo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
update=0
if [[ ${1:-} == --update ]]; then
	update=1
	shift
fi
LIB=${1:-$ROOT/build/userlib/libsframe-client.so.0}
HEADERS=$ROOT/userlib/client/include/sframe_client
BASELINE=$ROOT/userlib/client/abi/libsframe-client.so.0.abi

for tool in abidw abidiff; do
	command -v "$tool" >/dev/null || {
		echo "abi-check: $tool not found (apt-get install abigail-tools): not checked" >&2
		exit 77
	}
done
[[ -f $LIB ]] || { echo "abi-check: no library $LIB (build first)" >&2; exit 2; }

# The public view of the library: exported symbols and the types the public
# headers declare; no paths, so that the dump does not depend on where the
# tree is.
dump() { # LIBRARY OUT
	abidw --headers-dir "$HEADERS" --drop-private-types --no-corpus-path \
		--no-show-locs --no-comp-dir-path "$1" > "$2"
}

if [[ $update == 1 ]]; then
	mkdir -p "$(dirname "$BASELINE")"
	dump "$LIB" "$BASELINE" || { echo "abi-check: abidw failed" >&2; exit 2; }
	echo "abi-check: baseline written: $BASELINE ($(wc -c < "$BASELINE") bytes)"
	exit 0
fi
[[ -f $BASELINE ]] || { echo "abi-check: no baseline $BASELINE (--update writes it)" >&2; exit 2; }

tmp=$(mktemp -d) || exit 2
trap 'rm -rf "$tmp"' EXIT
dump "$LIB" "$tmp/new.abi" || { echo "abi-check: abidw failed on $LIB" >&2; exit 2; }
abidiff --no-show-locs "$BASELINE" "$tmp/new.abi" > "$tmp/diff.txt" 2>&1
rc=$?
# abidiff's status is a bit set: 1 error, 2 usage, 4 ABI change, 8
# incompatible ABI change.
if ((rc & 3)); then
	cat "$tmp/diff.txt" >&2
	echo "abi-check: abidiff could not compare (exit $rc)" >&2
	exit 2
fi
soname=$(sed -n "s/.*soname='\([^']*\)'.*/\1/p" "$tmp/new.abi" | head -n 1)
if ((rc & 8)); then
	cat "$tmp/diff.txt"
	echo "abi-check: $soname: INCOMPATIBLE ABI change against $BASELINE:" \
		"bump SFRAME_CLIENT_SOVERSION (userlib/CMakeLists.txt) and the package name, then" \
		"scripts/abi-check.sh --update"
	exit 1
elif ((rc & 4)); then
	cat "$tmp/diff.txt"
	echo "abi-check: $soname: the ABI changed against $BASELINE (above)." \
		"Only added functions keep it compatible: then scripts/abi-check.sh --update and" \
		"the new symbols into debian/libsframe-client0.symbols.  A changed type (size," \
		"members, as abidiff reports for a struct returned or passed) is incompatible" \
		"although abidiff does not flag it so: bump SFRAME_CLIENT_SOVERSION and the package name."
	exit 1
fi
echo "abi-check: $soname: ABI unchanged against $BASELINE"
