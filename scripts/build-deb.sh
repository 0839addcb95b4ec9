#!/usr/bin/env bash
# Build the Debian packages (debian/: sframe-unwind-dkms, libsframe-client0,
# libsframe-client-dev, sframe-tools) and check them with lintian.
#
# Usage: scripts/build-deb.sh [OUTDIR]      (`make deb`: OUTDIR = build/deb)
#
# dpkg-buildpackage writes its results to the parent directory of the tree
# it builds, which may be unwritable or shared (CI builds a clean clone in a
# mktemp -d directory), so the tracked files of this tree, as they are in
# the working tree, are copied to OUTDIR/src and built there: the .deb,
# .buildinfo and .changes files land in OUTDIR.  Binary packages only,
# unsigned, without root (Rules-Requires-Root: no).  DEB_BUILD_OPTIONS
# defaults to "nocheck parallel=<nproc>" (the tests are `make check`'s).
#
# Then lintian on the .changes: the tags go to OUTDIR/lintian.txt and the
# terminal, with a count per severity.  Exits nonzero if the build fails or
# lintian reports an error (E:).
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
OUT=${1:-$ROOT/build/deb}
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
export DEB_BUILD_OPTIONS=${DEB_BUILD_OPTIONS:-"nocheck parallel=$(nproc)"}

die() { echo "build-deb: $*" >&2; exit 1; }
for tool in dpkg-buildpackage dh dh_dkms lintian git; do
	command -v "$tool" >/dev/null || die "$tool not found (scripts/install-deps.sh)"
done

start=$(date +%s)
# The previous build's results go; the copy is made afresh.
rm -rf "$OUT/src"
rm -f "$OUT"/*.deb "$OUT"/*.buildinfo "$OUT"/*.changes "$OUT"/lintian.txt
mkdir "$OUT/src"
# Tracked files, with their changes not yet committed (a tracked file
# deleted in the working tree is skipped).
git -C "$ROOT" ls-files -z | (cd "$ROOT" && tar --null -T - --ignore-failed-read -cf - 2>/dev/null) |
	tar -xf - -C "$OUT/src"

echo "build-deb: building in $OUT/src (DEB_BUILD_OPTIONS=\"$DEB_BUILD_OPTIONS\")"
(cd "$OUT/src" && dpkg-buildpackage -us -uc -b)
built=$(date +%s)

shopt -s nullglob
changes=("$OUT"/*.changes)
[[ ${#changes[@]} -eq 1 ]] || die "expected one .changes file in $OUT, found ${#changes[@]}"
echo "build-deb: built in $((built - start)) s:"
(cd "$OUT" && ls -l -- *.deb)

echo "build-deb: lintian ${changes[0]##*/}"
rc=0
lintian --display-info --fail-on error "${changes[0]}" >"$OUT/lintian.txt" || rc=$?
cat "$OUT/lintian.txt"
count() { grep -c "^$1: " "$OUT/lintian.txt" || true; }
echo "build-deb: lintian: $(count E) errors, $(count W) warnings, $(count I) info, $(count P) pedantic"
[[ $rc -eq 0 ]] || die "lintian reported errors (exit $rc)"
