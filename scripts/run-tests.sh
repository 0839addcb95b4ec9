#!/usr/bin/env bash
# The one test command (`make check` calls it; CI runs it through .ci/run).
#
#   1. scripts/install-deps.sh          (apt; needs root or passwordless sudo)
#   2. cmake -S . -B build && cmake --build build -j2
#   3. ctest --test-dir build --output-on-failure      (host tests)
#   4. scripts/dkms-install.sh          (module into DKMS for the VM's kernel)
#   5. tests/vm/run-vm.sh build vm-out  (VM tests on Debian's stock kernel)
#
# Ends with exactly one line "N passed, N failed" (host + VM tests) and exits
# nonzero if anything failed, if the build failed, or if a suite did not run
# (a suite that did not run is a failure, never a pass).
#
# Environment: SFRAME_CTEST_ARGS (extra ctest arguments, e.g. "-j2" or
# "-R decode"); everything tests/vm/run-vm.sh documents (SFRAME_VM_*).
set -uo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT" || exit 1
BUILD=$ROOT/build
VMOUT=$ROOT/vm-out
LOGS=$VMOUT/logs

passed=0
failed=0
problems=()
t0=$(date +%s)

note() { echo; echo "==== run-tests: $* ($(($(date +%s) - t0))s)"; }
problem() { problems+=("$1"); failed=$((failed + 1)); }
finish() {
	echo
	echo "==== run-tests: summary after $(($(date +%s) - t0))s"
	for p in "${problems[@]}"; do echo "  problem: $p"; done
	echo "$passed passed, $failed failed"
	[[ $failed -eq 0 ]]
	exit
}
as_root() {
	if [[ $(id -u) -eq 0 ]]; then
		"$@"
	else
		sudo -n "$@"
	fi
}

mkdir -p "$LOGS"

# ---- 1. dependencies --------------------------------------------------------
note "dependencies"
if ! scripts/install-deps.sh; then
	problem "scripts/install-deps.sh failed: nothing can be built or run"
	problem "VM suite did not run"
	finish
fi

# ---- 2. build -----------------------------------------------------------------
note "build (cmake)"
# A failed build is counted and reported; the suites still run with what got
# built (ctest counts a missing test program as a failure).
if ! cmake -S . -B "$BUILD"; then
	problem "cmake configure failed"
elif ! cmake --build "$BUILD" -j2; then
	problem "cmake build failed"
fi

# ---- 3. host tests ------------------------------------------------------------
note "host tests (ctest)"
if [[ -f $BUILD/CTestTestfile.cmake ]]; then
	# shellcheck disable=SC2086
	ctest --test-dir "$BUILD" --output-on-failure --timeout 900 \
		${SFRAME_CTEST_ARGS:-} 2>&1 | tee "$LOGS/ctest.log"
	line=$(grep -E '[0-9]+% tests passed, [0-9]+ tests? failed out of [0-9]+' "$LOGS/ctest.log" | tail -n 1)
	if [[ $line =~ ([0-9]+)\ tests?\ failed\ out\ of\ ([0-9]+) ]]; then
		hf=${BASH_REMATCH[1]}
		ht=${BASH_REMATCH[2]}
		passed=$((passed + ht - hf))
		failed=$((failed + hf))
		echo "host: $((ht - hf)) passed, $hf failed"
		[[ $ht -gt 0 ]] || problem "host suite: ctest ran no tests"
		[[ $hf -eq 0 ]] || problems+=("host suite: $hf test(s) failed")
	else
		problem "host suite did not run (no ctest summary; see $LOGS/ctest.log)"
	fi
else
	problem "host suite did not run (no $BUILD/CTestTestfile.cmake)"
fi

# ---- 4. module into DKMS -------------------------------------------------------
note "module (dkms)"
dkms_ok=1
if ! as_root scripts/dkms-install.sh 2>&1 | tee "$LOGS/dkms.log"; then
	dkms_ok=0
	problem "scripts/dkms-install.sh failed (module build)"
fi

# ---- 5. VM tests ----------------------------------------------------------------
note "VM tests"
if [[ $dkms_ok -eq 0 ]]; then
	problem "VM suite did not run (no module)"
else
	tests/vm/run-vm.sh "$BUILD" "$VMOUT" 2>&1 | tee "$LOGS/vm.log"
	vm_rc=${PIPESTATUS[0]}
	line=$(grep -E '^vm: [0-9]+ passed, [0-9]+ failed$' "$LOGS/vm.log" | tail -n 1)
	if [[ $line =~ ^vm:\ ([0-9]+)\ passed,\ ([0-9]+)\ failed$ ]]; then
		passed=$((passed + BASH_REMATCH[1]))
		failed=$((failed + BASH_REMATCH[2]))
		[[ ${BASH_REMATCH[2]} -eq 0 ]] || problems+=("VM suite: ${BASH_REMATCH[2]} failure(s); see $VMOUT")
		if [[ $vm_rc -ne 0 && ${BASH_REMATCH[2]} -eq 0 ]]; then
			problem "tests/vm/run-vm.sh exited $vm_rc"
		fi
		if [[ ${BASH_REMATCH[1]} -eq 0 && ${BASH_REMATCH[2]} -eq 0 ]]; then
			problem "VM suite ran no tests"
		fi
	else
		problem "VM suite did not run (no summary from tests/vm/run-vm.sh, exit $vm_rc)"
	fi
fi

finish
