#!/usr/bin/env bash
# The one test command (`make check` calls it; CI runs it through .ci/run).
#
#   1. scripts/install-deps.sh          (apt; needs root or passwordless sudo;
#                                        reads KERNELS for the RT kernels)
#   2. cmake -S . -B build && cmake --build build -j2
#   3. ctest --test-dir build --output-on-failure -j<nproc>   (host tests)
#   4. scripts/dkms-install.sh KVER...  (module into DKMS for every kernel
#      tested, with the test hooks: SFRAME_UNWIND_TEST_HOOKS=y), then
#   5. tests/vm/run-vm.sh build vm-out/<kver>   (the VM suite, once per
#      kernel): the host's kernels first, then those of each VM image (built
#      in the background meanwhile)
#   6. make deb (packages, lintian; started after the build, in the
#      background at nice 19), then tests/vm/package/run.sh on the
#      newest 6.1: the packages installed, used and removed in a VM; each
#      step of it (tests/vm/package/guest.sh) counts as a test.  With
#      KERNELS=all also on 7.3, with the kernel-upgrade step (skipped on 6.1)
#
# Ends with exactly one line "N passed, N failed, N skipped" (host tests +
# the VM suite on every kernel; a test that skipped itself, GTEST_SKIP, is
# counted apart, never as passed) and exits nonzero if anything failed, if the
# build failed, or if a suite did not run (a suite that did not run is a
# failure, never a pass).  Before it, one summary line per kernel.
#
# Environment:
#   KERNELS   the kernels the VM suite runs on, as series ("6.1", "6.12",
#             "6.1-rt", "6.12-rt", "7.2", "7.3": the newest kernel of that
#             line and flavour), series of one system ("trixie:6.12": Debian
#             13's own 6.12, in the trixie image; "host:6.12": bookworm's) or
#             exact versions.  The host's (bookworm's) kernels are installed
#             by install-deps.sh; 7.3 (trixie-backports) and trixie's 6.12
#             live in the trixie image, 7.2 in the sid image
#             (tests/vm/images/), built here when a kernel needs them.
#             Default "6.1 7.3": Debian 12's kernel and the newest.  "all":
#             ALL_KERNELS below (also bookworm's 6.12, trixie's 6.12, 7.2
#             and the PREEMPT_RT flavours of 6.1 and 6.12, which
#             install-deps.sh installs when KERNELS is "all" or names them).
#             `make check KERNELS=...` passes it.  A named kernel that is not
#             installed, or that DKMS refuses, is a failed suite.
#   SFRAME_CTEST_ARGS   extra ctest arguments, e.g. "-j1" or "-R decode"
#   everything tests/vm/run-vm.sh documents (SFRAME_VM_*), except SFRAME_KVER
#   (set per kernel here).
set -uo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT" || exit 1
# shellcheck source=../tests/vm/rig/common.sh
. tests/vm/rig/common.sh
BUILD=$ROOT/build
VMOUT=$ROOT/vm-out
LOGS=$VMOUT/logs

passed=0
failed=0
skipped=0
problems=()
summaries=()
t0=$(date +%s)

# Each phase's time, printed as it ends and again in the summary.
phases=()
phase_name=
phase_t0=
phase_end() {
	[[ -n $phase_name ]] || return 0
	local secs=$(($(date +%s) - phase_t0))
	phases+=("$(printf '%6ds  %s' "$secs" "$phase_name")")
	echo "==== run-tests: $phase_name took ${secs}s"
	phase_name=
}
note() {
	phase_end
	phase_name=$*
	phase_t0=$(date +%s)
	echo
	echo "==== run-tests: $* ($(($(date +%s) - t0))s)"
}
problem() { problems+=("$1"); failed=$((failed + 1)); }
finish() {
	phase_end
	echo
	echo "==== run-tests: phases"
	for p in "${phases[@]}"; do echo "  $p"; done
	echo "==== run-tests: summary after $(($(date +%s) - t0))s"
	for p in "${summaries[@]}"; do echo "  vm $p"; done
	for p in "${problems[@]}"; do echo "  problem: $p"; done
	echo "$passed passed, $failed failed, $skipped skipped"
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

# ---- the kernels, and the VM images they need ------------------------------------
# The kernels: each spec resolved to the newest kernel it names.
DEFAULT_KERNELS="6.1 7.3"
# install-deps.sh installed the RT kernels for it: each one is required.
ALL_KERNELS="6.1 7.3 host:6.12 trixie:6.12 7.2 6.1-rt 6.12-rt"
specs=${KERNELS:-}
case $specs in
'') specs=$DEFAULT_KERNELS ;;
all) specs=$ALL_KERNELS ;;
esac

# The VM images those kernels live in, built (or found in the cache) first:
# a series no host kernel has is looked for in them (rig_resolve_kver).
image_of_spec() { # SPEC: the image it needs, if any
	case $1 in
	trixie:* | sid:*) echo "${1%%:*}" ;;
	host:*) ;;
	7.3 | 7.3-rt) echo trixie ;;
	7.2 | 7.2-rt) echo sid ;;
	*+deb13-*) echo trixie ;;
	*+deb14-*) echo sid ;;
	esac
}
declare -A want_image=()
for spec in $specs; do
	i=$(image_of_spec "$spec")
	[[ -n $i ]] && want_image[$i]=1
done
# Built in the background at the lowest CPU and I/O priority (mmdebstrap:
# download, dpkg, some two minutes of CPU), so that they take only what the
# build, the host tests and the host's VM suites leave; waited for before
# their own kernels' DKMS build (image_done).
image_pids=()
for i in "${!want_image[@]}"; do
	echo "==== run-tests: building the VM image $i in the background ($LOGS/image-$i.log)"
	as_root nice -n 19 ionice -c 3 tests/vm/images/build.sh "$i" > "$LOGS/image-$i.path" 2> "$LOGS/image-$i.log" &
	image_pids+=("$i:$!")
done
image_done() { # NAME
	local e pid=
	for e in "${image_pids[@]}"; do
		[[ ${e%%:*} == "$1" ]] && pid=${e#*:}
	done
	[[ -n $pid ]] || return 0
	note "VM image $1: waiting for its build"
	if ! wait "$pid"; then
		tail -n 20 "$LOGS/image-$1.log"
		problem "VM image $1 could not be built (see $LOGS/image-$1.log)"
		return
	fi
	echo "image $1: $(cat "$LOGS/image-$1.path") ($(grep -E '^images: ' "$LOGS/image-$1.log" | tail -n 1))"
	sed 's/^/  /' "$(cat "$LOGS/image-$1.path")/.sframe-image"
}


# ---- 2. build -----------------------------------------------------------------
note "build (cmake)"
# A failed build is counted and reported; the suites still run with what got
# built (ctest counts a missing test program as a failure).
if ! cmake -S . -B "$BUILD"; then
	problem "cmake configure failed"
elif ! cmake --build "$BUILD" -j2; then
	problem "cmake build failed"
fi

# The packages (dpkg-buildpackage builds the tree again, then lintian: some
# 90 s of CPU) are built in the background at the lowest priority: they use
# what the host tests and the VM suites leave (the 6.1 suite under TCG kept
# this 2-CPU host 72 % busy on average, sampled every 10 s), and yield to
# them at once.  So is the package test on the host's 6.1 after them (its
# guest's DKMS build takes some 450 s of emulated compiling): in CI's run
# of 53f158e it came after the suites, 728 s of the 3202.  Its timeouts
# are stretched for the time it waits for CPU; a guest starved that long
# still fails on a hung task, a lockup or an RCU stall, never silently.
# Counted in part 6.  The package test of an image's kernel (KERNELS=all:
# 7.3) needs its image, and runs in part 6.
pkg_specs="6.1"
[[ ${KERNELS:-} == all ]] && pkg_specs="6.1 7.3"
host_pkg_kver=$(rig_resolve_kver 6.1 2> /dev/null) || host_pkg_kver=
packages_in_background() {
	local t rc
	nice -n 19 make deb BUILD="$BUILD" > "$LOGS/deb.log" 2>&1
	rc=$?
	echo "$rc" > "$LOGS/deb.rc"
	[[ $rc == 0 && -n $host_pkg_kver ]] || return 0
	t=$(date +%s)
	SFRAME_KVER=$host_pkg_kver SFRAME_PKG_UPGRADE='' \
		SFRAME_VM_TEST_TIMEOUT=3300 SFRAME_VM_TIMEOUT=3600 \
		nice -n 19 tests/vm/package/run.sh "$BUILD" "$BUILD/deb" \
		"$VMOUT/package-$host_pkg_kver" > "$LOGS/package-$host_pkg_kver.log" 2>&1
	echo "$(($(date +%s) - t))" > "$LOGS/package-$host_pkg_kver.secs"
}
rm -f "$LOGS/deb.rc" "$LOGS"/package-*.secs
packages_in_background &
packages_pid=$!

# ---- 3. host tests ------------------------------------------------------------
note "host tests (ctest)"
if [[ -f $BUILD/CTestTestfile.cmake ]]; then
	# shellcheck disable=SC2086
	# One test per CPU (the host tests are independent: each writes under
	# its own name in the build tree).
	ctest --test-dir "$BUILD" --output-on-failure --timeout 900 -j"$(nproc)" \
		${SFRAME_CTEST_ARGS:-} 2>&1 | tee "$LOGS/ctest.log"
	line=$(grep -E '[0-9]+% tests passed, [0-9]+ tests? failed out of [0-9]+' "$LOGS/ctest.log" | tail -n 1)
	if [[ $line =~ ([0-9]+)\ tests?\ failed\ out\ of\ ([0-9]+) ]]; then
		hf=${BASH_REMATCH[1]}
		ht=${BASH_REMATCH[2]}
		# ctest counts a skipped test (SKIP_RETURN_CODE, or output matching
		# SKIP_REGULAR_EXPRESSION, which gtest_discover_tests sets to
		# GTEST_SKIP's "[  SKIPPED ]") in "out of N" and not in "failed": it
		# would pass as passed.  Each one is listed under "The following
		# tests did not run:" as "NUM - NAME (Skipped)"; disabled tests are
		# listed there too, as "(Disabled)", and are not in "out of N".
		hs=$(sed -n '/^The following tests did not run:/,/^$/p' "$LOGS/ctest.log" |
			grep -cE '^[[:space:]]*[0-9]+ - .* \(Skipped\)$')
		hd=$(sed -n '/^The following tests did not run:/,/^$/p' "$LOGS/ctest.log" |
			grep -cE '^[[:space:]]*[0-9]+ - .* \(Disabled\)$')
		passed=$((passed + ht - hf - hs))
		failed=$((failed + hf))
		skipped=$((skipped + hs))
		[[ $hd -eq 0 ]] || echo "host: $hd disabled (not counted)"
		echo "host: $((ht - hf - hs)) passed, $hf failed, $hs skipped"
		[[ $ht -gt 0 ]] || problem "host suite: ctest ran no tests"
		[[ $hf -eq 0 ]] || problems+=("host suite: $hf test(s) failed")
	else
		problem "host suite did not run (no ctest summary; see $LOGS/ctest.log)"
	fi
else
	problem "host suite did not run (no $BUILD/CTestTestfile.cmake)"
fi

# ---- 4, 5. the module into DKMS, then the VM suite, kernel by kernel -------------
# The accelerator is chosen once for the run (rig/accel.sh boots a probe
# guest; a machine whose /dev/kvm never boots a guest costs one bound, not
# one per VM).
export SFRAME_VM_ACCEL_CACHE=$VMOUT/accel
rm -rf "$SFRAME_VM_ACCEL_CACHE"
mkdir -p "$SFRAME_VM_ACCEL_CACHE"

# One suite: its counts join the run's.
suites_started=0
# The test programs that switch an ftrace ops on a function other CPUs
# are calling while perf samples them, and so rewrite kernel text under
# them, hundreds of times.  Debian 12's qemu 7.2 under multi-threaded TCG
# runs a stale translation of the rewritten text now and then: an int3
# that no patch claims, an oops in perf_callchain_user() with or without
# the module (stock ftrace's function tracer does it: tests/vm/rig/
# mttcg-ftrace-int3.sh; 7.3's guest, 1 boot in 1 within 10 s, while 6.1's
# passes 1,000 switches), and never with single-threaded TCG or trixie's
# qemu 10.0.  These run in a second boot of the kernel with
# single-threaded TCG (SFRAME_VM_TCG_THREAD=single): still two vCPUs, one
# host thread taking turns (under KVM the setting is ignored).  Its limit
# per program is 600 s, not run-vm.sh's 300: on 7.x each of its 100
# switches off waits for RCU-tasks three times (perf_callchain_user()'s
# and unwind_user()'s ops, and unwind_user()'s walks in flight), and the
# program as root took 206 s and 219 s there on a loaded host.
single_thread_tests=(perf_callchain_vmtest)

# One boot's counts into the run's: LOG OUT LABEL SECS RC.
count_suite() {
	local log=$1 out=$2 label=$3 secs=$4 vm_rc=$5 line vp vf vs vsk
	line=$(grep -E '^vm: [0-9]+ passed, [0-9]+ failed$' "$log" | tail -n 1)
	if [[ $line =~ ^vm:\ ([0-9]+)\ passed,\ ([0-9]+)\ failed$ ]]; then
		vp=${BASH_REMATCH[1]}
		vf=${BASH_REMATCH[2]}
		passed=$((passed + vp))
		failed=$((failed + vf))
		# Skipped test cases: report.py counts them apart already ("vm: N
		# skipped, N disabled (not counted)"); they join the host's skips.
		vs=$(grep -E '^vm: [0-9]+ skipped, [0-9]+ disabled \(not counted\)$' "$log" | tail -n 1)
		vsk=0
		[[ $vs =~ ^vm:\ ([0-9]+)\ skipped ]] && vsk=${BASH_REMATCH[1]}
		skipped=$((skipped + vsk))
		summaries+=("$label: $vp passed, $vf failed, $vsk skipped (${secs}s, $out)")
		[[ $vf -eq 0 ]] || problems+=("VM suite on $label: $vf failure(s); see $out")
		if [[ $vm_rc -ne 0 && $vf -eq 0 ]]; then
			problem "tests/vm/run-vm.sh on $label exited $vm_rc"
		fi
		if [[ $vp -eq 0 && $vf -eq 0 ]]; then
			problem "VM suite on $label ran no tests"
		fi
	else
		problem "VM suite on $label did not run (no summary from tests/vm/run-vm.sh, exit $vm_rc)"
		summaries+=("$label: no summary (exit $vm_rc, ${secs}s)")
	fi
}

run_suite() { # KVER
	local k=$1 out log tk vm_rc why t name
	local -a main_tests=() single_tests=()
	note "VM tests on $k"
	if ! grep -qxF "dkms-install: $k: installed" "$LOGS/dkms.log"; then
		why=$(sed -n "s/^dkms-install: $k: //p" "$LOGS/dkms.log" | tail -n 1)
		problem "VM suite on $k did not run: module not installed through DKMS (${why:-see $LOGS/dkms.log})"
		summaries+=("$k: did not run (${why:-no module})")
		return
	fi
	for t in "$BUILD"/tests/vm/*_vmtest; do
		[[ -f $t && -x $t ]] || continue
		name=${t##*/}
		if [[ " ${single_thread_tests[*]} " == *" $name "* ]]; then
			single_tests+=("$t")
		else
			main_tests+=("$t")
		fi
	done
	out=$VMOUT/$k
	log=$LOGS/vm-$k.log
	tk=$(date +%s)
	# The ioctl fuzzer makes its million calls per mode (issue 10) on the
	# run's first kernel; on the others a quarter of that, for CI's time:
	# what it reaches is mostly the module's own checking of arguments, the
	# same code on every kernel.
	# SFRAME_VM_FUZZ_CALLS set by the caller applies to every kernel.
	local -a fuzz=()
	[[ $suites_started -gt 0 && -z ${SFRAME_VM_FUZZ_CALLS:-} ]] && fuzz=(SFRAME_VM_FUZZ_CALLS=250000)
	suites_started=$((suites_started + 1))
	env "${fuzz[@]}" SFRAME_KVER="$k" SFRAME_VM_TESTS="${main_tests[*]}" \
		tests/vm/run-vm.sh "$BUILD" "$out" 2>&1 | tee "$log"
	vm_rc=${PIPESTATUS[0]}
	count_suite "$log" "$out" "$k" "$(($(date +%s) - tk))" "$vm_rc"
	[[ ${#single_tests[@]} -gt 0 ]] || return 0
	note "VM tests on $k, single-threaded TCG: ${single_thread_tests[*]}"
	tk=$(date +%s)
	SFRAME_KVER="$k" SFRAME_VM_TESTS="${single_tests[*]}" SFRAME_VM_TCG_THREAD=single \
		SFRAME_VM_TEST_TIMEOUT=${SFRAME_VM_TEST_TIMEOUT:-600} \
		tests/vm/run-vm.sh "$BUILD" "$out-tcg-single" 2>&1 | tee "$log-tcg-single"
	vm_rc=${PIPESTATUS[0]}
	count_suite "$log-tcg-single" "$out-tcg-single" "$k (single-threaded TCG)" \
		"$(($(date +%s) - tk))" "$vm_rc"
}

# The kernels of one root file system: the host's ("") first, then each
# image's once it is built, so that an image's build overlaps the host's
# suites.  One DKMS run per root (dkms-install.sh replaces that root's
# previous registration, every kernel of it).
: > "$LOGS/dkms.log"
roots=("")
for i in "${!want_image[@]}"; do roots+=("$i"); done
for root in "${roots[@]}"; do
	[[ -z $root ]] || image_done "$root"
	kvers=()
	for spec in $specs; do
		[[ $(image_of_spec "$spec") == "$root" ]] || continue
		if k=$(rig_resolve_kver "$spec"); then
			kvers+=("$k")
		else
			problem "VM suite on kernel $spec did not run: no such kernel installed with headers"
		fi
	done
	[[ ${#kvers[@]} -gt 0 ]] || continue
	note "module (dkms) for ${kvers[*]}"
	# With the test suite's hooks (dkms.conf, module/Kbuild): built here
	# only, never by the packages or `make install`.
	as_root env SFRAME_UNWIND_TEST_HOOKS=y scripts/dkms-install.sh "${kvers[@]}" 2>&1 |
		tee -a "$LOGS/dkms.log"
	for k in "${kvers[@]}"; do run_suite "$k"; done
done

# ---- 6. the Debian packages -------------------------------------------------
note "packages (make deb, lintian) and the package test on ${host_pkg_kver:-6.1}: waiting for their background run"
wait "$packages_pid"
cat "$LOGS/deb.log"
deb_rc=$(cat "$LOGS/deb.rc" 2> /dev/null || echo 1)
if [[ $deb_rc -eq 0 ]]; then
	passed=$((passed + 1))
	echo "packages: built, lintian without errors"
	# On Debian 12's 6.1 (the host's system); with KERNELS=all also on the
	# trixie image's 7.3 (Debian 13 with trixie-backports' kernel), where
	# the kernel-upgrade step (a second DKMS build, to trixie's 6.12) runs
	# too: the 6.1 run is the same in both, so the default run's phases are
	# a subset of the KERNELS=all run's.
	for ps in $pkg_specs; do
		upgrade=
		[[ $ps == 7.3 ]] && upgrade=1
		if ! pk=$(rig_resolve_kver "$ps"); then
			problem "package test on $ps did not run: no such kernel (host or VM image)"
			continue
		fi
		log=$LOGS/package-$pk.log
		if [[ $pk == "$host_pkg_kver" ]]; then
			echo "==== run-tests: package test in a VM on $pk: ran in the background, $(cat "$LOGS/package-$pk.secs" 2> /dev/null || echo '?') s"
			cat "$log"
		else
			note "package test in a VM on $pk"
			SFRAME_KVER=$pk SFRAME_PKG_UPGRADE=$upgrade \
				tests/vm/package/run.sh "$BUILD" "$BUILD/deb" "$VMOUT/package-$pk" 2>&1 |
				tee "$log"
		fi
		# Each step of guest.sh is a test; the VM's own checks (kernel log,
		# panic settings, the end marker) count too, the command's exit
		# status not again.
		pp=$(grep -c '^PASS ' "$log")
		pf=$(grep -c '^FAIL ' "$log")
		psk=$(grep -c '^SKIP ' "$log")
		line=$(grep -E '^vm: [0-9]+ passed, [0-9]+ failed$' "$log" | tail -n 1)
		if [[ $line =~ ^vm:\ ([0-9]+)\ passed,\ ([0-9]+)\ failed$ ]] && ((pp + pf > 0)); then
			vf=${BASH_REMATCH[2]}
			((pf > 0 && vf > 0)) && vf=$((vf - 1))
			passed=$((passed + pp))
			failed=$((failed + pf + vf))
			skipped=$((skipped + psk))
			summaries+=("$pk packages: $pp passed, $((pf + vf)) failed, $psk skipped ($VMOUT/package-$pk)")
			((pf + vf == 0)) || problems+=("package test on $pk: $((pf + vf)) failure(s); see $log")
		else
			problem "package test on $pk did not run (see $log)"
		fi
	done
else
	problem "make deb failed (packages not built, or lintian errors; see $LOGS/deb.log)"
	problem "package test did not run"
fi

finish
