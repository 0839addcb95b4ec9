#!/usr/bin/env bash
# The package test: boots Debian's stock kernel (the newest 6.1 unless
# SFRAME_KVER says otherwise) with no module of ours, and runs guest.sh in
# it: the .deb files of DEB_DIR installed with apt, used (the downstream
# examples built from the installed files, sframe-prof), a kernel upgrade,
# and removed.  One test in run-vm.sh's count ("vm: N passed, N failed").
#
#   tests/vm/package/run.sh BUILD_DIR DEB_DIR [OUTDIR]
#
# SFRAME_PKG_UPGRADE=1 adds the long steps, which guest.sh skips otherwise:
# the kernel upgrade (a second DKMS build under emulation) and sframe-tools's
# dpkg trigger (sframe-coverd making SFrame for every library of the
# linker's paths).
# BUILD_DIR is only the rig's; nothing of it reaches the test (guest.sh hides
# the whole tree).  DEB_DIR: what `make deb` wrote (BUILD_DIR/deb).
set -uo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(cd "$HERE/../../.." && pwd)
if [[ $# -lt 2 || $# -gt 3 ]]; then
	echo "usage: $0 BUILD_DIR DEB_DIR [OUTDIR]" >&2
	exit 2
fi
BUILD_DIR=$1
DEB_DIR=$(realpath -e "$2") || { echo "vm: 0 passed, 1 failed"; exit 1; }
OUTDIR=${3:-$ROOT/vm-out/package}

# One or two DKMS builds of the module and two C++ compiles under
# emulation: the rig's defaults (300 s per command, 1200 s per VM) are too
# short.  The long steps add some minutes more.
if [[ -n ${SFRAME_PKG_UPGRADE:-} ]]; then
	export SFRAME_VM_TEST_TIMEOUT=${SFRAME_VM_TEST_TIMEOUT:-2700}
	export SFRAME_VM_TIMEOUT=${SFRAME_VM_TIMEOUT:-3000}
else
	export SFRAME_VM_TEST_TIMEOUT=${SFRAME_VM_TEST_TIMEOUT:-1800}
	export SFRAME_VM_TIMEOUT=${SFRAME_VM_TIMEOUT:-2100}
fi
# systemd is the guest's PID 1 (run-vm.sh --systemd), as on a user's machine:
# the packages start their service, which runs under its unit.
exec "$ROOT/tests/vm/run-vm.sh" --no-module --systemd \
	--run "bash $(printf '%q' "$HERE/guest.sh") $(printf '%q' "$DEB_DIR") $(printf '%q' "$ROOT")${SFRAME_PKG_UPGRADE:+ upgrade}" \
	"$BUILD_DIR" "$OUTDIR"
