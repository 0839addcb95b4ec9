#!/usr/bin/env bash
# Debian sid's binutils (2.47: gas makes SFrame version 3) and libsframe
# (libsframe.so.3, which reads version 3), runnable on this Debian 12 host.
#
# Usage: scripts/sid-binutils.sh [--quiet]
#
# Prints the directory (and nothing else on stdout) holding sid's packages
# extracted, with wrappers that run them under sid's own dynamic loader and
# libraries (sid's programs need glibc 2.43; the host has 2.36):
#
#   DIR/bin/as, ld, readelf, objdump, objcopy, nm, ...   sid's binutils
#       (gcc -BDIR/bin/ makes the host's gcc use sid's as and ld)
#   DIR/bin/run PROGRAM ARGS...   any program (a host-built one too: glibc
#       is backward compatible) under sid's loader, libc, libstdc++ and
#       libgcc_s; it can dlopen DIR/usr/lib/x86_64-linux-gnu/libsframe.so.3
#   DIR/usr/include/sframe.h, sframe-api.h   libsframe-dev's headers
#   DIR/env     shell assignments: SID_LOADER, SID_LIBDIR, SID_LIBSFRAME,
#               SID_BINUTILS_VERSION
#   DIR/versions   the packages and versions, one "name=version" a line
#
# DIR is $SID_BINUTILS_CACHE/<hash of the package versions> (default
# SID_BINUTILS_CACHE=$ROOT/.cache/sid-binutils).  A complete DIR is reused
# as it is (no download); a new version in sid makes a new DIR.  Concurrent
# runs wait for each other (flock).  Needs no root: `apt-get download`
# fetches into the current directory as any user, and apt checks each
# package against the archive's signed index.
#
# The packages come from the project's apt sources (scripts/apt/, installed
# by scripts/install-deps.sh as /etc/apt/sources.list.d/sframe-unwind.sources
# with sid pinned at priority 1, so that nothing is installed from sid by
# accident).  Without them, or without their package lists (apt-get update),
# it fails saying which.
#
# The packages: binutils-x86-64-linux-gnu (as, ld, readelf, ...), and what
# its programs load (NEEDED): libbinutils (libbfd, libopcodes), libsframe3,
# libctf0, libctf-nobfd0, libjansson4, libzstd1, zlib1g, libc6 (the loader
# and libc); libsframe-dev (the headers); libstdc++6 and libgcc-s1 for
# host-built C++ programs under bin/run (the checkers), so that everything
# but the program is sid's.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
BASE=${SID_BINUTILS_CACHE:-$ROOT/.cache/sid-binutils}
QUIET=0
[[ ${1:-} == --quiet ]] && QUIET=1

# Bumped when the layout of DIR (the wrappers) changes: a new DIR then.
LAYOUT=1
PKGS=(binutils-x86-64-linux-gnu libbinutils libsframe3 libsframe-dev
	libctf0 libctf-nobfd0 libjansson4 libzstd1 zlib1g libc6
	libstdc++6 libgcc-s1)
SOURCES=/etc/apt/sources.list.d/sframe-unwind.sources

die() { echo "sid-binutils: $*" >&2; exit 1; }
say() { [[ $QUIET == 1 ]] || echo "sid-binutils: $*" >&2; }

for tool in apt-get apt-cache dpkg-deb flock sha256sum; do
	command -v "$tool" >/dev/null || die "$tool not found (this needs Debian's apt and dpkg)"
done

# --- The apt sources and their lists --------------------------------------
if ! grep -rqsE '^[[:space:]]*Suites:.*[[:space:]]sid([[:space:]]|$)|^[[:space:]]*deb[[:space:]].*[[:space:]]sid[[:space:]]' \
	"$SOURCES" /etc/apt/sources.list /etc/apt/sources.list.d/ 2>/dev/null; then
	die "no apt source for Debian sid: $SOURCES is missing.
  Install the project's apt sources (as root): scripts/install-deps.sh, or
    install -m 0644 $ROOT/scripts/apt/sframe-unwind.sources $SOURCES
    install -m 0644 $ROOT/scripts/apt/sframe-unwind.pref /etc/apt/preferences.d/sframe-unwind
    apt-get update"
fi

# One apt-cache call (each loads every list: about 2 s).
declare -A VER=()
shown=$(apt-cache show "${PKGS[@]/%//sid}" 2>/dev/null | sed -n 's/^\(Package\|Version\): //p') || true
while read -r p && read -r v; do
	[[ -n ${VER[$p]:-} ]] || VER[$p]=$v
done <<<"$shown"
for p in "${PKGS[@]}"; do
	[[ -n ${VER[$p]:-} ]] || die "apt knows no sid version of $p: the sid source is configured
  but its package lists are missing or stale; run (as root) apt-get update"
done
versions=$(for p in "${PKGS[@]}"; do echo "$p=${VER[$p]}"; done)
hash=$(printf 'layout=%s\n%s\n' "$LAYOUT" "$versions" | sha256sum | cut -c1-16)
DIR=$BASE/$hash

if [[ -f $DIR/.complete ]]; then
	say "cached: $DIR (binutils ${VER[binutils-x86-64-linux-gnu]})"
	echo "$DIR"
	exit 0
fi

mkdir -p "$BASE" || die "cannot create $BASE"
exec 9>"$BASE/.lock"
flock 9
# Another run may have made it while this one waited.
if [[ -f $DIR/.complete ]]; then
	say "cached: $DIR"
	echo "$DIR"
	exit 0
fi

start=$(date +%s%N)
TMP=$(mktemp -d "$BASE/.tmp.XXXXXX")
trap 'rm -rf "$TMP"' EXIT
mkdir "$TMP/debs" "$TMP/root"

# --- Download and extract -------------------------------------------------
say "downloading ${#PKGS[@]} packages from sid (binutils ${VER[binutils-x86-64-linux-gnu]}, libc6 ${VER[libc6]})"
apt_opts=(-q)
# As root, apt drops to _apt to download, which cannot write a directory
# that only root may: download as root then (apt would do so anyway, with a
# warning).
[[ $(id -u) -eq 0 ]] && apt_opts+=(-o APT::Sandbox::User=root)
args=()
for p in "${PKGS[@]}"; do args+=("$p=${VER[$p]}"); done
if ! (cd "$TMP/debs" && apt-get "${apt_opts[@]}" download "${args[@]}") >"$TMP/download.log" 2>&1; then
	cat "$TMP/download.log" >&2
	die "apt-get download failed (network? the archive?): ${args[*]}"
fi
for p in "${PKGS[@]}"; do
	f=$(compgen -G "$TMP/debs/${p}_*.deb" | head -n 1) || true
	[[ -n $f ]] || die "apt-get download left no .deb for $p"
	dpkg-deb -x "$f" "$TMP/root/" || die "dpkg-deb -x $f failed"
done
rm -rf "$TMP/debs" "$TMP/root/usr/share/man" "$TMP/root/usr/share/locale"

# --- Wrappers ---------------------------------------------------------------
R=$TMP/root
LD_SO=usr/lib64/ld-linux-x86-64.so.2
LIBDIR=usr/lib/x86_64-linux-gnu
[[ -e $R/$LD_SO ]] || die "sid's libc6 has no $LD_SO"
[[ -e $R/$LIBDIR/libsframe.so.3 ]] || die "sid's libsframe3 has no $LIBDIR/libsframe.so.3 (a new soname?)"
[[ -e $R/usr/include/sframe-api.h ]] || die "sid's libsframe-dev has no usr/include/sframe-api.h"
mkdir "$R/bin"
# Every program runs under sid's loader with sid's libraries first; the
# host's ld.so.cache is not consulted (--inhibit-cache), so a library sid
# does not have here is looked for in the loader's default directories only.
cat >"$R/bin/run" <<'EOF'
#!/bin/sh
# Run PROGRAM ARGS... under Debian sid's dynamic loader and libraries
# (made by scripts/sid-binutils.sh).
d=$(dirname "$(readlink -f "$0")")/..
if [ $# -eq 0 ]; then
	echo "usage: $0 PROGRAM [ARGS...]" >&2
	exit 2
fi
exec "$d/usr/lib64/ld-linux-x86-64.so.2" --inhibit-cache \
	--library-path "$d/usr/lib/x86_64-linux-gnu" "$@"
EOF
chmod +x "$R/bin/run"
n=0
for prog in "$R"/usr/bin/x86_64-linux-gnu-*; do
	name=${prog##*/x86_64-linux-gnu-}
	cat >"$R/bin/$name" <<EOF
#!/bin/sh
# sid's $name (scripts/sid-binutils.sh)
d=\$(dirname "\$(readlink -f "\$0")")/..
exec "\$d/bin/run" "\$d/usr/bin/x86_64-linux-gnu-$name" "\$@"
EOF
	chmod +x "$R/bin/$name"
	n=$((n + 1))
done
[[ -x $R/bin/as && -x $R/bin/ld && -x $R/bin/readelf ]] || die "sid's binutils has no as, ld or readelf"

binver=$("$R/bin/as" --version 2>&1 | head -n 1) || die "sid's as does not run under sid's loader: $binver"
[[ $binver == *"GNU assembler"* ]] || die "sid's as printed: $binver"
ashelp=$("$R/bin/as" --help 2>&1) || true
[[ $ashelp == *--gsframe* ]] || die "sid's as has no --gsframe"
printf '%s\n' "$versions" >"$R/versions"
cat >"$R/env" <<EOF
# Made by scripts/sid-binutils.sh; paths relative to this file's directory.
SID_LOADER=$LD_SO
SID_LIBDIR=$LIBDIR
SID_LIBSFRAME=$LIBDIR/libsframe.so.3
SID_BINUTILS_VERSION='${binver##* }'
EOF
touch "$R/.complete"

# --- In place ---------------------------------------------------------------
rm -rf "$DIR"
mv "$R" "$DIR"
end=$(date +%s%N)
say "made $DIR: ${binver}, $n tools; $(du -sh "$DIR" | cut -f1), $(awk -v ns=$((end - start)) 'BEGIN { printf "%.1f", ns / 1e9 }') s"
echo "$DIR"
