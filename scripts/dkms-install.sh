#!/usr/bin/env bash
# Install the module into DKMS and build + install it for one or more kernels.
#
# Usage: scripts/dkms-install.sh [KVER...]
#
# KVER defaults to the kernel the VM boots by default (rig/common.sh: the
# newest Debian 12 6.1 kernel with headers; not `uname -r`: the host kernel
# has no module support and no headers).  Each KVER may be an exact version
# or a series as scripts/run-tests.sh's KERNELS names them ("6.1", "6.12",
# "6.1-rt").  Copies only what the module build needs (dkms.conf, module/,
# uapi/) to /usr/src/<name>-<version>, removes a previous DKMS entry of the
# same version first (re-runs work; every kernel it was built for), then
# `dkms build` and `dkms install` (which runs depmod) for each kernel.
# Prints one line per kernel, "dkms-install: KVER: installed|REFUSED|FAILED",
# and make.log of a failed build; a kernel dkms.conf refuses
# (BUILD_EXCLUSIVE, DKMS's exit 77) is REFUSED.  Exits nonzero if any
# kernel was not installed, after trying them all.  Needs root.
#
# A kernel of a VM image (tests/vm/images/: "7.3", "trixie:6.12", "7.2") is
# built by that image's own DKMS, compiler and headers, in a chroot of the
# image (rig_in_root): the 7.x kernels' kbuild programs need trixie's or
# sid's glibc, and a user of that system builds it with those.  The module
# lands in the image, as on a user's machine.
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

KVERS=()
if [[ $# -eq 0 ]]; then
	k=$(rig_default_kver) || die "no Debian kernel with headers (install linux-image-amd64 linux-headers-amd64)"
	KVERS=("$k")
fi
for spec in "$@"; do
	k=$(rig_resolve_kver "$spec") || die "no installed kernel with headers for $spec"
	KVERS+=("$k")
done
declare -A ROOT_OF=()
for k in "${KVERS[@]}"; do
	r=$(rig_kver_root "$k") || die "no headers for $k (neither /lib/modules/$k/build nor an image's)"
	ROOT_OF[$k]=$r
done

NAME=$(rig_dkms_field "$SRC/dkms.conf" PACKAGE_NAME)
VER=$(rig_dkms_field "$SRC/dkms.conf" PACKAGE_VERSION)
[[ -n $NAME && -n $VER ]] || die "cannot read PACKAGE_NAME/PACKAGE_VERSION from $SRC/dkms.conf"
mod=$(rig_dkms_field "$SRC/dkms.conf" 'BUILT_MODULE_NAME\[0\]')

echo "dkms-install: $NAME $VER for kernel(s) ${KVERS[*]}"

# The source into DKMS of one root file system ("/" or an image), once: a
# previous registration of this version (any kernel) goes first.
declare -A ADDED=()
add_source() { # ROOT
	local r=$1 dest
	[[ -n ${ADDED[$r]:-} ]] && return "${ADDED[$r]}"
	ADDED[$r]=1
	rig_in_root "$r" sh -c 'command -v dkms' >/dev/null ||
		{ echo "dkms-install: no dkms in $r" >&2; return 1; }
	if rig_in_root "$r" dkms status -m "$NAME" -v "$VER" 2>/dev/null | grep -q .; then
		rig_in_root "$r" dkms remove -m "$NAME" -v "$VER" --all >/dev/null ||
			{ echo "dkms-install: dkms remove $NAME/$VER failed in $r" >&2; return 1; }
	fi
	dest=${r%/}/usr/src/$NAME-$VER
	rm -rf "$dest" "${r%/}/var/lib/dkms/$NAME/$VER"
	mkdir -p "$dest"
	cp "$SRC/dkms.conf" "$dest/"
	for d in module uapi; do
		[[ -d $SRC/$d ]] || continue
		cp -a "$SRC/$d" "$dest/"
	done
	# No objects left over from an in-tree build.
	find "$dest" \( -name '*.o' -o -name '*.ko' -o -name '*.mod' -o -name '*.mod.c' \
		-o -name '*.cmd' -o -name '*.a' -o -name Module.symvers -o -name modules.order \
		-o -name '*.dwo' -o -name '.tmp_versions' \) -prune -exec rm -rf {} +
	rig_in_root "$r" dkms add -m "$NAME" -v "$VER" >/dev/null ||
		{ echo "dkms-install: dkms add failed in $r" >&2; return 1; }
	ADDED[$r]=0
}

bad=0
results=()
for KVER in "${KVERS[@]}"; do
	r=${ROOT_OF[$KVER]}
	where=
	[[ $r == / ]] || where=" (in the image $r)"
	echo "dkms-install: building for $KVER$where"
	if ! add_source "$r"; then
		results+=("$KVER: FAILED (dkms add$where)")
		bad=1
		continue
	fi
	rc=0
	rig_in_root "$r" dkms build -m "$NAME" -v "$VER" -k "$KVER" || rc=$?
	if [[ $rc -eq 77 ]]; then
		# dkms.conf's BUILD_EXCLUSIVE_* says this kernel is not supported.
		results+=("$KVER: REFUSED by dkms.conf (unsupported kernel)")
		bad=1
		continue
	elif [[ $rc -ne 0 ]]; then
		log=${r%/}/var/lib/dkms/$NAME/$VER/build/make.log
		echo "dkms-install: BUILD FAILED for $KVER (dkms exit $rc); $log:" >&2
		cat "$log" >&2 2>/dev/null || echo "(no make.log)" >&2
		results+=("$KVER: FAILED (build)")
		bad=1
		continue
	fi
	if ! rig_in_root "$r" dkms install -m "$NAME" -v "$VER" -k "$KVER" --force; then
		results+=("$KVER: FAILED (dkms install)")
		bad=1
		continue
	fi
	# dkms install ran depmod; check the result is what the VM will load.
	if [[ -n $mod ]]; then
		if ! f=$(rig_in_root "$r" modinfo -k "$KVER" -F filename "$mod"); then
			results+=("$KVER: FAILED (modinfo cannot find $mod after install)")
			bad=1
			continue
		fi
		echo "dkms-install: installed $f$where"
	fi
	results+=("$KVER: installed")
done
for r in "${!ADDED[@]}"; do
	rig_in_root "$r" dkms status -m "$NAME" -v "$VER"
done
for r in "${results[@]}"; do echo "dkms-install: $r"; done
exit $bad
