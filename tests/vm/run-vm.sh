#!/usr/bin/env bash
# Run the VM test suite: boot Debian's stock kernel under qemu with the host's
# root file system shared read-only over 9p, load the module (installed by
# scripts/dkms-install.sh), run BUILD_DIR/tests/vm/*_vmtest as root and as
# uid 65534, unload the module and judge the results on the host.
#
# Usage: tests/vm/run-vm.sh [--bench] [--run CMD [--no-module [--systemd]]] BUILD_DIR [OUTDIR]
#
#   --bench     also run BUILD_DIR/bench/*_vmbench (root), stdout saved in
#               OUTDIR/results/bench/<name>.txt
#   --run CMD   run the shell command CMD (root, after the module is loaded)
#               INSTEAD of the test programs, e.g. for a demo; its output is
#               saved in OUTDIR/results/run.log and printed afterwards, and
#               its exit status counts as one test
#   --no-module with --run: the guest loads no module and the host need not
#               have one installed (the package test installs its own)
#   --systemd   with --run and --no-module: the guest's PID 1 becomes systemd
#               (the root's own, with a target of the rig's: sysinit.target
#               and the command as a service), as on a user's machine, so
#               that packages start their services and the services run
#               under their units' sandboxing
#
# Prints per-test results and ends with the machine-readable line
#   vm: N passed, N failed
# Exit status: 0 only if nothing failed.
#
# Environment (all optional):
#   SFRAME_KVER             guest kernel version (default: newest Debian
#                           linux-image with headers; see rig/common.sh)
#   SFRAME_VM_BENCH=1       also run BUILD_DIR/bench/*_vmbench (same as --bench)
#   SFRAME_VM_TIMEOUT       whole-VM timeout in seconds (default 1200)
#   SFRAME_VM_TEST_TIMEOUT  per test binary and mode, seconds (default 300)
#   SFRAME_VM_BENCH_TIMEOUT per benchmark, seconds (default 300)
#   SFRAME_VM_GTEST_ARGS    extra arguments for every test binary
#                           (e.g. --gtest_filter=Foo.*)
#   SFRAME_VM_FUZZ_CALLS    ioctl calls per mode of fuzz_vmtest (its
#                           SFRAME_FUZZ_CALLS; default: the test's million)
#   SFRAME_VM_TEST_ENV      NAME=value words added to every test binary's
#                           environment (e.g. SFRAME_PERF_CALLCHAIN_SWITCHES=1000)
#   SFRAME_VM_TCG_THREAD    single|multi: qemu's TCG threads (default: qemu's,
#                           multi); run-tests.sh boots perf_callchain_vmtest
#                           with single (rig/mttcg-ftrace-int3.sh says why)
#   SFRAME_VM_TESTS         space-separated list of test binaries to run
#                           instead of BUILD_DIR/tests/vm/*_vmtest
#   SFRAME_VM_MODULE        module to load (default sframe_unwind)
#   SFRAME_VM_KO            load this .ko file with insmod instead of the
#                           DKMS-installed module (trees built with
#                           make -C module; CI uses DKMS)
#   SFRAME_VM_DEVICE        device it must create (default /dev/sframe_unwind)
#   SFRAME_VM_MEM, SFRAME_VM_SMP   (default 2G, 2)
#   SFRAME_VM_ACCEL         kvm or tcg (default: KVM if a probe shows it works)
#   SFRAME_VM_ICOUNT=1      TCG only, with SFRAME_VM_SMP=1: the guest clock
#                           counts instructions (qemu -icount shift=0: 1 ns
#                           per instruction), so times measured in the
#                           guest do not depend on the host's load (for
#                           benchmarks; a 2-vCPU guest hangs at SMP bring-up)
set -uo pipefail

RIG=$(cd "$(dirname "${BASH_SOURCE[0]}")/rig" && pwd)
# shellcheck source=rig/common.sh
. "$RIG/common.sh"

bench=${SFRAME_VM_BENCH:-0}
run_cmd=
no_module=0
systemd=0
while [[ $# -gt 0 ]]; do
	case $1 in
	--bench) bench=1; shift ;;
	--run) run_cmd=${2:?--run needs a command}; shift 2 ;;
	--no-module) no_module=1; shift ;;
	--systemd) systemd=1; shift ;;
	--) shift; break ;;
	-*) echo "run-vm: unknown option $1" >&2; exit 2 ;;
	*) break ;;
	esac
done
if [[ $# -lt 1 || $# -gt 2 ]]; then
	echo "usage: $0 [--bench] [--run CMD] BUILD_DIR [OUTDIR]" >&2
	exit 2
fi

fail_early() {
	echo "run-vm: $*" >&2
	echo "vm: 0 passed, 1 failed"
	exit 1
}

BUILD_DIR=$(realpath -e "$1") || fail_early "no build directory $1"
if [[ $# -ge 2 ]]; then
	mkdir -p "$2" || fail_early "cannot create $2"
	OUTDIR=$(realpath "$2")
else
	OUTDIR=$(mktemp -d "${TMPDIR:-/tmp}/sframe-vm.XXXXXX")
fi
MODULE=${SFRAME_VM_MODULE:-sframe_unwind}
DEVICE=${SFRAME_VM_DEVICE-/dev/sframe_unwind}
VM_TIMEOUT=${SFRAME_VM_TIMEOUT:-1200}
TEST_TIMEOUT=${SFRAME_VM_TEST_TIMEOUT:-300}
BENCH_TIMEOUT=${SFRAME_VM_BENCH_TIMEOUT:-300}

KVER=$(rig_default_kver) || fail_early "no Debian kernel with headers found (install linux-image-amd64 linux-headers-amd64)"
# The root file system the kernel belongs to: the host's own (bookworm), or
# a whole Debian system made by tests/vm/images/build.sh (trixie, sid),
# which then is the guest's root; the host's tree is still there for the
# build directory and the repository (guest-run.sh).
ROOTFS=$(rig_kver_root "$KVER") ||
	fail_early "kernel $KVER is neither the host's nor in a VM image (tests/vm/images/build.sh)"
KERNEL=${ROOTFS%/}/boot/vmlinuz-$KVER
MODDIR=${ROOTFS%/}/lib/modules/$KVER
[[ -r $KERNEL ]] || fail_early "cannot read $KERNEL"
command -v qemu-system-x86_64 >/dev/null || fail_early "qemu-system-x86_64 missing (scripts/install-deps.sh)"
command -v python3 >/dev/null || fail_early "python3 missing (scripts/install-deps.sh)"
BUSYBOX=$(command -v busybox) || fail_early "busybox missing (install busybox-static)"
[[ -x /bin/busybox ]] && BUSYBOX=/bin/busybox
if readelf -l "$BUSYBOX" 2>/dev/null | grep -q INTERP; then
	fail_early "$BUSYBOX is dynamically linked: install busybox-static"
fi
[[ $no_module == 0 || -n $run_cmd ]] || fail_early "--no-module needs --run"
# The rig's unloading and its checks are not done under systemd.
[[ $systemd == 0 || $no_module == 1 ]] || fail_early "--systemd needs --run and --no-module"
KO=
if [[ $no_module == 1 ]]; then
	:
elif [[ -n ${SFRAME_VM_KO:-} ]]; then
	KO=$(realpath -e "$SFRAME_VM_KO") || fail_early "no module file $SFRAME_VM_KO"
	modinfo -F vermagic "$KO" | grep -q "^$KVER " ||
		fail_early "$KO was not built for $KVER: $(modinfo -F vermagic "$KO")"
elif [[ -z $(find "$MODDIR" -name "$MODULE.ko*" -print -quit 2>/dev/null) ]]; then
	fail_early "module $MODULE is not installed for $KVER (run scripts/dkms-install.sh $KVER)"
fi

# The test binaries: listed on the host, so the report knows what should have
# produced XML even if the guest never got to it.
tests=()
if [[ -n $run_cmd ]]; then
	:
elif [[ -n "${SFRAME_VM_TESTS:-}" ]]; then
	for t in $SFRAME_VM_TESTS; do
		p=$(realpath -e "$t") || fail_early "no test binary $t"
		tests+=("$p")
	done
else
	for t in "$BUILD_DIR"/tests/vm/*_vmtest; do
		[[ -f $t && -x $t ]] && tests+=("$t")
	done
fi
[[ ${#tests[@]} -gt 0 || -n $run_cmd ]] || fail_early "no test binaries in $BUILD_DIR/tests/vm/*_vmtest"
benches=()
if [[ $bench == 1 ]]; then
	for t in "$BUILD_DIR"/bench/*_vmbench; do
		[[ -f $t && -x $t ]] && benches+=("$t")
	done
fi

RES=$OUTDIR/results
rm -rf "$RES"
mkdir -p "$RES"
# Unprivileged test runs write their XML here through 9p.
mkdir -p "$RES/nmi"
chmod 0777 "$RES" "$RES/nmi"
CONSOLE=$OUTDIR/console.log
: > "$CONSOLE"

WORK=$(mktemp -d "${TMPDIR:-/tmp}/sframe-vm-rig.XXXXXX")
npid=
# shellcheck disable=SC2317  # called by trap
cleanup() {
	[[ -n $npid ]] && kill "$npid" 2>/dev/null
	rm -rf "$WORK"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

t_start=$(date +%s.%N)

# ---- initramfs: static busybox, the 9p/virtio/overlay modules, stage 1/2 ----
INITRD_DIR=$WORK/initrd
mkdir -p "$INITRD_DIR"/{bin,rig/mod}
cp "$BUSYBOX" "$INITRD_DIR/bin/busybox"
cp "$RIG/init" "$INITRD_DIR/init"
cp "$RIG/guest-run.sh" "$INITRD_DIR/rig/"
chmod 0755 "$INITRD_DIR/init" "$INITRD_DIR/bin/busybox"

# Modules needed before the root is mounted, with their dependencies first
# (from modules.dep, so a kernel update that shuffles them still works).
# Built-in ones are skipped.
declare -A dep=() seen=()
while IFS= read -r line; do
	dep[${line%%:*}]=${line#*:}
done < "$MODDIR/modules.dep"
modlist=()
visit() { # path relative to MODDIR
	local m=$1 d
	[[ -n ${seen[$m]:-} ]] && return
	seen[$m]=1
	for d in ${dep[$m]}; do visit "$d"; done
	modlist+=("$m")
}
for want in virtio_pci 9pnet_virtio 9p overlay; do
	found=
	for m in "${!dep[@]}"; do
		b=${m##*/}
		b=${b%%.ko*}
		if [[ $b == "$want" ]]; then
			found=$m
			break
		fi
	done
	if [[ -n $found ]]; then
		visit "$found"
	elif ! grep -qE "/$want\.ko" "$MODDIR/modules.builtin"; then
		fail_early "module $want neither in modules.dep nor built into $KVER"
	fi
done
: > "$INITRD_DIR/rig/modules.list"
for m in "${modlist[@]}"; do
	b=${m##*/}
	case $m in
	*.ko) cp "$MODDIR/$m" "$INITRD_DIR/rig/mod/$b" ;;
	*.ko.xz) xz -dc "$MODDIR/$m" > "$INITRD_DIR/rig/mod/${b%.xz}"; b=${b%.xz} ;;
	*.ko.zst) zstd -qdc "$MODDIR/$m" > "$INITRD_DIR/rig/mod/${b%.zst}"; b=${b%.zst} ;;
	*.ko.gz) gzip -dc "$MODDIR/$m" > "$INITRD_DIR/rig/mod/${b%.gz}"; b=${b%.gz} ;;
	*) fail_early "unknown module format $m" ;;
	esac
	echo "$b" >> "$INITRD_DIR/rig/modules.list"
done

# SFRAME_VM_FUZZ_CALLS reaches fuzz_vmtest as one more word of the test
# programs' environment.
test_env=${SFRAME_VM_TEST_ENV:-}
[[ -z ${SFRAME_VM_FUZZ_CALLS:-} ]] || test_env+=" SFRAME_FUZZ_CALLS=$SFRAME_VM_FUZZ_CALLS"
{
	printf 'KVER=%q\n' "$KVER"
	printf 'ROOTFS=%q\n' "$ROOTFS"
	printf 'BUILD_DIR=%q\n' "$BUILD_DIR"
	printf 'REPO_DIR=%q\n' "$(cd "$RIG/../../.." && pwd)"
	printf 'MODULE=%q\n' "$MODULE"
	printf 'MODULE_KO=%q\n' "$KO"
	printf 'NO_MODULE=%q\n' "$no_module"
	printf 'SYSTEMD=%q\n' "$systemd"
	printf 'DEVICE=%q\n' "$DEVICE"
	printf 'TEST_TIMEOUT=%q\n' "$TEST_TIMEOUT"
	printf 'BENCH_TIMEOUT=%q\n' "$BENCH_TIMEOUT"
	printf 'GTEST_ARGS=%q\n' "${SFRAME_VM_GTEST_ARGS:-}"
	printf 'TEST_ENV=%q\n' "$test_env"
	printf 'USER_UID=65534\nUSER_GID=65534\n'
	printf 'RUN_CMD=%q\n' "$run_cmd"
	printf 'TESTS=('; [[ ${#tests[@]} -gt 0 ]] && printf ' %q' "${tests[@]}"; printf ' )\n'
	printf 'BENCHES=('; [[ ${#benches[@]} -gt 0 ]] && printf ' %q' "${benches[@]}"; printf ' )\n'
} > "$INITRD_DIR/rig/config"
if [[ ${#tests[@]} -gt 0 ]]; then printf '%s\n' "${tests[@]}"; fi > "$OUTDIR/tests.list"

# An image's guest also gets the host's root (read-only, tag "hostfs"): the
# build tree, the repository and the tests are read from it (rig/init,
# guest-run.sh).
[[ $ROOTFS == / ]] || : > "$INITRD_DIR/rig/hostfs"

INITRD=$WORK/initrd.cpio
(cd "$INITRD_DIR" && find . -print0 | cpio --null -o -H newc --quiet) > "$INITRD" ||
	fail_early "cpio failed"
t_initrd=$(date +%s.%N)

# ---- accelerator: KVM only if a guest really boots with it ----
# /dev/kvm can exist and even create VMs while vCPUs cannot run (this
# machine's sandbox: qemu aborts setting MSRs), or run them while the guest
# never gets past "Probing EDD" (issue 28), so the probe is a tiny guest of
# this very kernel that must print a marker within
# SFRAME_VM_KVM_PROBE_TIMEOUT (30 s); the decision is cached in
# SFRAME_VM_ACCEL_CACHE (rig/accel.sh).  SFRAME_VM_ACCEL=tcg|kvm forces.
# Under TCG the guest CPU has no CMPXCHG16B (-cx16): Debian's qemu 7.2 left
# EFLAGS garbage (RAX's low bits) after the guest kernel's
# `cmpxchg16b %gs:(%rsi)` in SLUB's allocation fast path, seen as a
# single-step #DB, a double fault or a stack-guard oops in
# kmem_cache_alloc_node under perf inheritance on clone3 (6.12,
# lifecycle_vmtest's ThreadsExitingWhileSampled: 1 boot in 1 with 10
# repeats, with this tree's module and with the one of c3302bf alike).
# Without CX16 the kernel takes its locked slow path; nothing of the module
# depends on it.
# shellcheck source=rig/accel.sh
. "$RIG/accel.sh"
rm -f "$OUTDIR/accel-probe.log"
rig_choose_accel "$KVER" "$KERNEL" "$BUSYBOX" "$OUTDIR/accel-probe.log" ||
	fail_early "bad accelerator setting"
# shellcheck disable=SC2054  # commas inside -cpu
case $RIG_ACCEL_CHOICE in
kvm) accel=(-enable-kvm -cpu host) ;;
*) accel=(-accel "tcg${SFRAME_VM_TCG_THREAD:+,thread=$SFRAME_VM_TCG_THREAD}" -cpu max,-cx16) ;;
esac
if [[ ${SFRAME_VM_ICOUNT:-0} == 1 ]]; then
	[[ ${accel[0]} == -accel && ${SFRAME_VM_SMP:-2} == 1 ]] ||
		fail_early "SFRAME_VM_ICOUNT=1 needs TCG and SFRAME_VM_SMP=1"
	accel+=(-icount shift=0,sleep=on)
fi

MON=$WORK/monitor.sock
# A WARN, an oops, a soft lockup, a task hung in D state for 120 s or an RCU
# stall panics the guest: each is a failed run, never a log line.  (No NMI
# watchdog under TCG: the hard-lockup detector has no PMU to run on.)
append="console=ttyS0 panic=-1 panic_on_warn=1 oops=panic printk.devkmsg=on"
append+=" softlockup_panic=1 hung_task_panic=1 sysctl.kernel.hung_task_timeout_secs=120"
append+=" rcupdate.rcu_cpu_stall_suppress=0 sysctl.kernel.panic_on_rcu_stall=1"
append+=" rdinit=/init"

rootdesc="the host's root"
[[ $ROOTFS == / ]] || rootdesc="image $ROOTFS ($(sed -n 's/^suite=//p' "$ROOTFS/.sframe-image"))"
echo "run-vm: kernel $KVER (${accel[*]}), root: $rootdesc, ${#tests[@]} test binaries, ${#benches[@]} benchmarks"
echo "run-vm: console log $CONSOLE, results $RES"

# NMI injection service for tests (see rig/nmi-server.py).
python3 "$RIG/nmi-server.py" "$MON" "$RES" &
npid=$!

# shellcheck disable=SC2054  # commas inside -virtfs options
qemu_cmd=(qemu-system-x86_64 "${accel[@]}"
	-m "${SFRAME_VM_MEM:-2G}" -smp "${SFRAME_VM_SMP:-2}"
	-nographic -no-reboot -nic none
	-kernel "$KERNEL" -initrd "$INITRD" -append "$append"
	-virtfs "local,path=$ROOTFS,mount_tag=host,security_model=none,readonly=on,multidevs=remap"
	-virtfs "local,path=$RES,mount_tag=results,security_model=none,multidevs=remap"
	-monitor "unix:$MON,server,nowait")
if [[ $ROOTFS != / ]]; then
	qemu_cmd+=(-virtfs local,path=/,mount_tag=hostfs,security_model=none,readonly=on,multidevs=remap)
fi
printf '%q ' "${qemu_cmd[@]}" > "$OUTDIR/qemu.cmd"
echo >> "$OUTDIR/qemu.cmd"

# The console goes to console.log; the rig's own lines are shown as they come.
timeout -k 15 "$VM_TIMEOUT" "${qemu_cmd[@]}" < /dev/null 2>&1 |
	sed -u 's/\r//g' | tee "$CONSOLE" | grep --line-buffered -a 'vmrig:'
st=("${PIPESTATUS[@]}")
qemu_rc=${st[0]}
t_end=$(date +%s.%N)
kill "$npid" 2>/dev/null
wait "$npid" 2>/dev/null
npid=

timed_out=0
[[ $qemu_rc == 124 || $qemu_rc == 137 ]] && timed_out=1
awk -v s="$t_start" -v i="$t_initrd" -v e="$t_end" \
	'BEGIN{printf "run-vm: initramfs %.1fs, VM %.1fs, total %.1fs\n", i-s, e-i, e-s}'

python3 "$RIG/report.py" --results "$RES" --console "$CONSOLE" \
	--tests "$OUTDIR/tests.list" --kver "$KVER" --timed-out "$timed_out" \
	--vm-timeout "$VM_TIMEOUT" --qemu-rc "$qemu_rc" --device "$DEVICE" --run "$run_cmd" --no-module "$no_module" --allow "$RIG/kernel-log-allow.txt"
rc=$?
if [[ -n $run_cmd ]]; then
	echo "run-vm: output of --run '$run_cmd':"
	cat "$RES/run.log" 2>/dev/null
fi
if [[ $rc -ne 0 ]]; then
	echo "run-vm: FAILED; last 60 lines of $CONSOLE:"
	tail -n 60 "$CONSOLE" | sed 's/^/  | /'
	echo "run-vm: results in $OUTDIR"
fi
exit $rc
