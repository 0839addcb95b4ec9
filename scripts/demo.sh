#!/usr/bin/env bash
# The main job, where the host cannot load modules: install what is needed,
# build, install the module with DKMS for Debian's stock kernel, boot that
# kernel in a VM and run examples/unwind_demo there: a program built without
# frame pointers and with -Wa,--gsframe has its own stack unwound by the
# module, with SFrame and with frame pointers only, side by side.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT"
BUILD=$ROOT/build

scripts/install-deps.sh
cmake -S . -B "$BUILD"
cmake --build "$BUILD" -j"$(nproc)" --target unwind_demo
scripts/dkms-install.sh
# As an ordinary user: the device is open to everyone.
exec tests/vm/run-vm.sh --run "setpriv --reuid=65534 --regid=65534 --clear-groups $BUILD/examples/unwind_demo" \
	"$BUILD" "$ROOT/vm-out/demo"
