#!/usr/bin/env bash
# Install the module into DKMS and build + install it for one kernel.
#
# Usage: scripts/dkms-install.sh [KVER]
#
# KVER defaults to the kernel the VM boots: the newest /lib/modules/*/build
# whose kernel is a Debian linux-image package (not `uname -r`: the host
# kernel has no module support and no headers).  Copies only what the module
# build needs (dkms.conf, module/, uapi/) to /usr/src/<name>-<version>,
# removes a previous DKMS entry of the same version first (re-runs work), then
# `dkms build` and `dkms install` (which runs depmod).  On a build failure it
# prints make.log and exits nonzero.  Needs root.
#
# SFRAME_DKMS_SRC (default: this repository) names another source tree with
# the same layout; the rig's own tests use it.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
# shellcheck source=../tests/vm/rig/common.sh
. "$ROOT/tests/vm/rig/common.sh"
SRC=${SFRAME_DKMS_SRC:-$ROOT}

die() { echo "dkms-install: $*" >&2; exit 1; }

[[ $(id -u) -eq 0 ]] || die "must run as root"
command -v dkms >/dev/null || die "dkms is not installed (scripts/install-deps.sh)"
[[ -f $SRC/dkms.conf ]] || die "no $SRC/dkms.conf"

KVER=${1:-}
if [[ -z $KVER ]]; then
	KVER=$(rig_default_kver) || die "no Debian kernel with headers (install linux-image-amd64 linux-headers-amd64)"
fi
[[ -d /lib/modules/$KVER/build ]] || die "no headers for $KVER in /lib/modules/$KVER/build"

NAME=$(rig_dkms_field "$SRC/dkms.conf" PACKAGE_NAME)
VER=$(rig_dkms_field "$SRC/dkms.conf" PACKAGE_VERSION)
[[ -n $NAME && -n $VER ]] || die "cannot read PACKAGE_NAME/PACKAGE_VERSION from $SRC/dkms.conf"
DEST=/usr/src/$NAME-$VER

echo "dkms-install: $NAME $VER for kernel $KVER"

# A previous registration of this version (any kernel) goes first.
if dkms status -m "$NAME" -v "$VER" 2>/dev/null | grep -q .; then
	dkms remove -m "$NAME" -v "$VER" --all >/dev/null ||
		die "dkms remove $NAME/$VER failed"
fi
rm -rf "$DEST" "/var/lib/dkms/$NAME/$VER"

mkdir -p "$DEST"
cp "$SRC/dkms.conf" "$DEST/"
for d in module uapi; do
	[[ -d $SRC/$d ]] || continue
	cp -a "$SRC/$d" "$DEST/"
done
# No objects left over from an in-tree build.
find "$DEST" \( -name '*.o' -o -name '*.ko' -o -name '*.mod' -o -name '*.mod.c' \
	-o -name '*.cmd' -o -name '*.a' -o -name Module.symvers -o -name modules.order \
	-o -name '*.dwo' -o -name '.tmp_versions' \) -prune -exec rm -rf {} +

dkms add -m "$NAME" -v "$VER" >/dev/null || die "dkms add failed"

if ! dkms build -m "$NAME" -v "$VER" -k "$KVER"; then
	log=/var/lib/dkms/$NAME/$VER/build/make.log
	echo "dkms-install: BUILD FAILED for $KVER; $log:" >&2
	cat "$log" >&2 2>/dev/null || echo "(no make.log)" >&2
	exit 1
fi
dkms install -m "$NAME" -v "$VER" -k "$KVER" --force || die "dkms install failed"

# dkms install ran depmod; check the result is what the VM will load.
mod=$(rig_dkms_field "$SRC/dkms.conf" 'BUILT_MODULE_NAME\[0\]')
if [[ -n $mod ]]; then
	f=$(modinfo -k "$KVER" -F filename "$mod") || die "modinfo cannot find $mod for $KVER after install"
	echo "dkms-install: installed $f"
fi
dkms status -m "$NAME" -v "$VER"
