#!/usr/bin/env bash
# Build (or find in the cache) a root file system of a whole Debian system for
# the VM rig, with mmdebstrap from the project's archive (scripts/apt/).
#
# Usage: tests/vm/images/build.sh NAME     (NAME.conf beside this script)
#
# Prints the image's directory on stdout (progress goes to stderr).  The
# image is keyed by its recipe: NAME.conf, this script, the project's apt
# sources, and the versioned kernel packages the conf's metapackages stand
# for in the archive today; a change to any of them makes a new image, and
# older images of NAME are removed.  The kernels come with their headers, so
# DKMS in the image builds the module against that system's headers and
# compiler (scripts/dkms-install.sh --image).  Needs root (mmdebstrap
# --mode=root; the image keeps its files' owners).
#
# Environment:
#   SFRAME_IMAGE_CACHE  where images live (default /var/cache/sframe-unwind/images)
#   SFRAME_IMAGE_RT=1   also the conf's PREEMPT_RT kernels (KERNELS=all)
#
# In the image: $IMG/.sframe-image (what it is: name, suite, kernels, package
# versions, size, build time), and /boot/vmlinuz-<kver> and
# /lib/modules/<kver> for each kernel, which the rig boots.
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(cd "$HERE/../../.." && pwd)
NAME=${1:?usage: build.sh NAME}
CONF=$HERE/$NAME.conf
[[ -r $CONF ]] || { echo "images: no recipe $CONF" >&2; exit 2; }
CACHE=${SFRAME_IMAGE_CACHE:-/var/cache/sframe-unwind/images}
RT=${SFRAME_IMAGE_RT:-0}
SOURCES=$ROOT/scripts/apt/sframe-unwind.sources

log() { echo "images: $*" >&2; }
die() { log "$*"; exit 1; }

SUITE= SUITES=() KERNELS=() KERNELS_RT=() PACKAGES=()
# shellcheck source=trixie.conf
. "$CONF"
MIRROR=$(sed -n 's/^URIs: *//p' "$SOURCES" | head -n 1)
[[ -n $MIRROR ]] || die "no URIs in $SOURCES"
[[ -f /etc/apt/sources.list.d/sframe-unwind.sources ]] ||
	die "the project's apt sources are not installed (scripts/install-deps.sh)"
command -v mmdebstrap >/dev/null || die "mmdebstrap missing (scripts/install-deps.sh)"

# SUITE:META -> the versioned linux-image and linux-headers packages that
# META depends on in SUITE, as "name=version" for apt.
resolve_kernel() { # SUITE:META
	local suite=${1%%:*} meta=${1#*:} ver img
	ver=$(apt-cache madison "$meta" | awk -F' *[|] *' -v s=" $suite/main " \
		'index($3" ", s) { print $2; exit }')
	[[ -n $ver ]] || die "no $meta in $suite (apt-get update?)"
	img=$(apt-cache show "$meta=$ver" | sed -n 's/^Depends: //p' | head -n 1 |
		tr ',' '\n' | sed -n 's/^ *\(linux-image-[0-9][^ ]*\) .*/\1/p' | head -n 1)
	[[ -n $img ]] || die "cannot tell which kernel $meta $ver stands for"
	echo "$img=$ver"
	echo "${img/linux-image-/linux-headers-}=$ver"
}
kernels=("${KERNELS[@]}")
[[ $RT == 1 ]] && kernels+=("${KERNELS_RT[@]}")
kpkgs=()
for k in "${kernels[@]}"; do
	mapfile -t -O "${#kpkgs[@]}" kpkgs < <(resolve_kernel "$k")
done

key=$( { cat "$CONF" "${BASH_SOURCE[0]}" "$SOURCES"; printf '%s\n' "${kpkgs[@]}"; } |
	sha256sum | cut -c1-12)
IMG=$CACHE/$NAME-$key
if [[ -f $IMG/.sframe-image ]]; then
	log "$NAME: cached $IMG"
	echo "$IMG"
	exit 0
fi

mkdir -p "$CACHE"
exec 9> "$CACHE/.$NAME.lock"
flock 9
if [[ -f $IMG/.sframe-image ]]; then
	echo "$IMG"
	exit 0
fi
TMP=$IMG.tmp
rm -rf "$TMP"
srcs=()
for s in "${SUITES[@]}"; do srcs+=("deb $MIRROR $s main"); done
# apt's "pkg=version" for the kernels; the rest by name (pkg/suite allowed).
include=$(IFS=,; echo "${PACKAGES[*]},${kpkgs[*]}")
log "$NAME: building $IMG with mmdebstrap ($SUITE; ${kpkgs[*]})"
t0=$(date +%s)
# update-initramfs is diverted to true: the rig boots with its own
# initramfs, and making one per kernel is most of a kernel's install time.
# The archive is a snapshot whose sid Release file is past its Valid-Until
# (as scripts/apt/sframe-unwind.sources says).  Documentation is left out (path-exclude): nothing here reads it.
mmdebstrap --mode=root --variant=minbase --format=directory \
	--aptopt='Acquire::Check-Valid-Until "false"' \
	--include="$include" \
	--dpkgopt='path-exclude=/usr/share/doc/*' --dpkgopt='path-include=/usr/share/doc/*/copyright' \
	--dpkgopt='path-exclude=/usr/share/man/*' --dpkgopt='path-exclude=/usr/share/locale/*' \
	--dpkgopt='path-exclude=/usr/share/info/*' \
	--essential-hook='chroot "$1" dpkg-divert --quiet --local --rename --add /usr/sbin/update-initramfs && ln -sf /bin/true "$1/usr/sbin/update-initramfs"' \
	--customize-hook='echo sframe-vm > "$1/etc/hostname"' \
	"$SUITE" "$TMP" "${srcs[@]}" >&2 || die "mmdebstrap failed for $NAME"
t1=$(date +%s)

kvers=()
for d in "$TMP"/lib/modules/*/; do
	d=${d%/}
	[[ -f $TMP/boot/vmlinuz-${d##*/} ]] && kvers+=("${d##*/}")
done
[[ ${#kvers[@]} -gt 0 ]] || die "no kernel in $TMP"
size=$(du -sm "$TMP" | cut -f1)
{
	echo "name=$NAME"
	echo "suite=$SUITE"
	echo "key=$key"
	echo "kernels=${kvers[*]}"
	echo "built=$(date -u +%Y-%m-%dT%H:%M:%SZ)"
	echo "build_seconds=$((t1 - t0))"
	echo "size_mb=$size"
	echo "packages=$(chroot "$TMP" dpkg-query -W -f '.' | wc -c)"
	echo "gcc=$(chroot "$TMP" gcc -dumpfullversion 2>/dev/null || echo none)"
	echo "binutils=$(chroot "$TMP" dpkg-query -W -f '${Version}' binutils 2>/dev/null || echo none)"
	echo "dkms=$(chroot "$TMP" dpkg-query -W -f '${Version}' dkms 2>/dev/null || echo none)"
	echo "libc=$(chroot "$TMP" dpkg-query -W -f '${Version}' libc6 2>/dev/null || echo none)"
} > "$TMP/.sframe-image"
mv "$TMP" "$IMG"
log "$NAME: built in $((t1 - t0)) s, $size MB, kernels ${kvers[*]}"
# Older images of the same name: their recipe is gone.
for old in "$CACHE/$NAME"-*; do
	[[ $old == "$IMG" || ! -d $old ]] && continue
	log "$NAME: removing the outdated $old"
	rm -rf "$old"
done
echo "$IMG"
