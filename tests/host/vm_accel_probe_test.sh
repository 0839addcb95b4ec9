#!/usr/bin/env bash
# shellcheck source-path=SCRIPTDIR
# The VM rig's choice of accelerator (tests/vm/rig/accel.sh), with fakes: no
# real qemu boots, a few seconds in all.
#   (a) no /dev/kvm, or one that does not open: TCG, nothing booted
#   (b) a qemu that prints boot lines and then hangs: TCG after the bound,
#       its processes gone (SIGKILL 5 s later if SIGTERM is ignored), its
#       temporary files too
#   (c) a qemu that prints the marker: KVM, at once (not waiting for the
#       guest's power-off); the decision cached, the cache keyed by /dev/kvm
#       and ignored after 6 hours
#   (d) a guest that never boots, then another kernel: the fallback kept
#       machine-wide, no second probe
#   and: qemu failing at once, SFRAME_VM_ACCEL forcing, bad settings.
# Exit 0 if all pass, 77 (skipped) without cpio.
set -uo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ACCEL=$HERE/../vm/rig/accel.sh
command -v cpio > /dev/null || { echo "SKIP: no cpio"; exit 77; }

T=$(mktemp -d "${TMPDIR:-/tmp}/vm-accel-test.XXXXXX") || exit 1
trap 'rm -rf "$T"' EXIT
mkdir -p "$T/tmp"
export TMPDIR=$T/tmp
unset SFRAME_VM_ACCEL SFRAME_VM_ACCEL_CACHE SFRAME_VM_KVM_PROBE_TIMEOUT \
	SFRAME_VM_KVM_PROBE_QEMU SFRAME_VM_KVM_DEVICE SFRAME_VM_SMP
# shellcheck source=../vm/rig/accel.sh
. "$ACCEL"

KVER=6.1.0-99-amd64
KERNEL=$T/vmlinuz
BUSYBOX=$T/busybox
echo kernel > "$KERNEL"
echo busybox > "$BUSYBOX"
KVM=$T/kvm
: > "$KVM"

# The fake qemu: logs each call's arguments, then does FAKE_MODE.
FAKE=$T/fake-qemu
cat > "$FAKE" << 'EOF'
#!/usr/bin/env bash
echo "$*" >> "$FAKE_DIR/calls"
initrd=
while [[ $# -gt 0 ]]; do
	[[ $1 == -initrd ]] && initrd=$2
	shift
done
echo "SeaBIOS (version 1.16.2-debian-1.16.2-1)"
echo "Booting from ROM..."
echo "Probing EDD (edd=off to disable)... ok"
case $FAKE_MODE in
hang)
	sleep 1000 &
	echo $! > "$FAKE_DIR/sleep.pid"
	wait
	;;
marker)
	# What the probe's init would print, read from the initramfs given.
	m=$(cd "$FAKE_DIR" && cpio -i --quiet --to-stdout init < "$initrd" |
		sed -n 's/^.*echo "\(.*\)"$/\1/p')
	cp "$initrd" "$FAKE_DIR/initrd.seen"
	printf '[    2.35] Run /init as init process\r\n%s\r\n' "$m"
	# A guest whose power-off hangs: the probe must not wait for it.
	sleep 1000 &
	echo $! > "$FAKE_DIR/sleep.pid"
	wait
	;;
stubborn)
	# Deaf to SIGTERM (as is its child): only timeout's -k SIGKILL ends it.
	trap '' TERM
	sleep 1000 &
	echo $! > "$FAKE_DIR/sleep.pid"
	while :; do wait; done
	;;
fail)
	echo "qemu-system-x86_64: failed to initialize kvm: Operation not permitted" >&2
	exit 1
	;;
esac
EOF
chmod +x "$FAKE"
export FAKE_DIR=$T

fails=0
ok() { echo "ok: $*"; }
bad() { echo "FAIL: $*"; fails=$((fails + 1)); }
calls() { if [[ -f $T/calls ]]; then wc -l < "$T/calls"; else echo 0; fi; }
now_us() { echo "${EPOCHREALTIME/[.,]/}"; }
# choose VAR=VALUE...: run rig_choose_accel with that environment; sets
# out (its line), rc, choice and secs (wall time).
choose() {
	local t0 res
	t0=$(now_us)
	# shellcheck disable=SC2016  # expanded by the inner bash
	res=$(env "$@" bash -c '. "$1"; rig_choose_accel "$2" "$3" "$4"; rc=$?
		echo "choice=$RIG_ACCEL_CHOICE rc=$rc"' _ "$ACCEL" "$KVER" "$KERNEL" "$BUSYBOX")
	secs=$((($(now_us) - t0) / 1000000))
	out=$(grep -v '^choice=' <<< "$res")
	choice=$(sed -n 's/^choice=\([a-z]*\) .*/\1/p' <<< "$res")
	rc=$(sed -n 's/^choice=.* rc=//p' <<< "$res")
	echo "   $out  [${secs}s]"
}
expect() { # CHOICE PATTERN WHAT
	# shellcheck disable=SC2053  # PATTERN is a glob
	if [[ $rc == 0 && $choice == "$1" && $out == $2 ]]; then
		ok "$3"
	else
		bad "$3: expected $1 and '$2', got rc=$rc choice=$choice '$out'"
	fi
}
no_leftovers() { # WHAT
	local p
	if [[ -n $(ls -A "$T/tmp") ]]; then
		bad "$1: temporary files left: $(ls -A "$T/tmp")"
	else
		ok "$1: no temporary files left"
	fi
	if [[ -f $T/sleep.pid ]]; then
		p=$(cat "$T/sleep.pid")
		sleep 0.2
		# Gone, or a zombie not yet reaped by its new parent.
		if [[ $(ps -o stat= -p "$p" 2>/dev/null) == [^Z]* ]]; then
			bad "$1: the fake qemu's child $p still runs"
			kill "$p" 2>/dev/null
		else
			ok "$1: the fake qemu's processes are gone"
		fi
		rm -f "$T/sleep.pid"
	fi
}

# ---- (a) no usable /dev/kvm: TCG, no boot ----
choose SFRAME_VM_KVM_DEVICE="$T/absent" SFRAME_VM_KVM_PROBE_QEMU="$FAKE" FAKE_MODE=marker
expect tcg "run-vm: accelerator tcg: $T/absent absent" "(a) absent device"
choose SFRAME_VM_KVM_DEVICE="$T/tmp" SFRAME_VM_KVM_PROBE_QEMU="$FAKE" FAKE_MODE=marker
expect tcg "run-vm: accelerator tcg: $T/tmp not openable (Is a directory)" "(a) device that does not open"
if [[ $(calls) == 0 ]]; then
	ok "(a) nothing booted"
else
	bad "(a) the probe's qemu ran"
fi

# ---- (b) a guest that never boots: TCG after the bound ----
choose SFRAME_VM_KVM_DEVICE="$KVM" SFRAME_VM_KVM_PROBE_QEMU="$FAKE" FAKE_MODE=hang \
	SFRAME_VM_KVM_PROBE_TIMEOUT=5
expect tcg "run-vm: accelerator tcg: KVM probe booted $KVER and got no marker in 5 s ($KVM opens; a guest that never boots; last console line: 'Probing EDD (edd=off to disable)... ok')" \
	"(b) hanging guest"
if ((secs >= 5 && secs <= 12)); then
	ok "(b) bounded: ${secs} s"
else
	bad "(b) took ${secs} s, bound 5 s"
fi
no_leftovers "(b)"
if grep -q -- '-enable-kvm -cpu host' "$T/calls"; then
	ok "(b) probe ran with -enable-kvm -cpu host"
else
	bad "(b) probe's arguments: $(cat "$T/calls")"
fi

choose SFRAME_VM_KVM_DEVICE="$KVM" SFRAME_VM_KVM_PROBE_QEMU="$FAKE" FAKE_MODE=stubborn \
	SFRAME_VM_KVM_PROBE_TIMEOUT=2
expect tcg "run-vm: accelerator tcg: KVM probe booted $KVER and got no marker in 2 s (*" \
	"(b) hanging guest deaf to SIGTERM"
if ((secs >= 2 && secs <= 9)); then
	ok "(b) bounded by 2 s + 5 s (-k): ${secs} s"
else
	bad "(b) took ${secs} s, bound 2 + 5 s"
fi
no_leftovers "(b) deaf to SIGTERM"

# ---- (c) a guest that boots: KVM, cached ----
rm -f "$T/calls"
export SFRAME_VM_ACCEL_CACHE=$T/cache
choose SFRAME_VM_KVM_DEVICE="$KVM" SFRAME_VM_KVM_PROBE_QEMU="$FAKE" FAKE_MODE=marker
expect kvm "run-vm: accelerator kvm: probe guest booted in [0-9]*.[0-9] s ($KVER, $KVM)" "(c) booting guest"
if ((secs <= 3)); then
	ok "(c) did not wait for power-off: ${secs} s"
else
	bad "(c) took ${secs} s"
fi
no_leftovers "(c)"
if [[ -f $T/initrd.seen ]] &&
	(cd "$T" && cpio -i --quiet --to-stdout bin/busybox < initrd.seen) | cmp -s - "$BUSYBOX" &&
	grep -q -- "-kernel $KERNEL " "$T/calls"; then
	ok "(c) probe booted KERNEL with BUSYBOX in its initramfs"
else
	bad "(c) probe's kernel or initramfs: $(cat "$T/calls")"
fi
choose SFRAME_VM_KVM_DEVICE="$KVM" SFRAME_VM_KVM_PROBE_QEMU="$FAKE" FAKE_MODE=hang
expect kvm "run-vm: accelerator kvm: probe guest booted in * (an earlier probe's, cached in $T/cache/accel-$KVER-*)" \
	"(c) cached decision"
if [[ $(calls) == 1 ]]; then
	ok "(c) cached: no second probe"
else
	bad "(c) probed $(calls) times"
fi
touch -d '7 hours ago' "$T"/cache/accel-*
choose SFRAME_VM_KVM_DEVICE="$KVM" SFRAME_VM_KVM_PROBE_QEMU="$FAKE" FAKE_MODE=marker
expect kvm "run-vm: accelerator kvm: probe guest booted in [0-9]*.[0-9] s (*" "(c) new probe once the entry is 7 hours old"
if [[ $(calls) == 2 ]]; then
	ok "(c) probed again"
else
	bad "(c) probed $(calls) times"
fi
sleep 1.1
touch "$KVM"
choose SFRAME_VM_KVM_DEVICE="$KVM" SFRAME_VM_KVM_PROBE_QEMU="$FAKE" FAKE_MODE=marker
expect kvm "run-vm: accelerator kvm: probe guest booted in [0-9]*.[0-9] s (*" "(c) new probe once the device changed"
if [[ $(calls) == 3 ]]; then
	ok "(c) probed again"
else
	bad "(c) probed $(calls) times"
fi
no_leftovers "(c) again"
unset SFRAME_VM_ACCEL_CACHE

# ---- (d) a guest that never boots; then another kernel: not probed again ----
rm -f "$T/calls"
export SFRAME_VM_ACCEL_CACHE=$T/cache-d
choose SFRAME_VM_KVM_DEVICE="$KVM" SFRAME_VM_KVM_PROBE_QEMU="$FAKE" FAKE_MODE=hang \
	SFRAME_VM_KVM_PROBE_TIMEOUT=2
expect tcg "run-vm: accelerator tcg: KVM probe booted $KVER and got no marker in 2 s (*" \
	"(d) hanging guest"
no_leftovers "(d)"
first_kver=$KVER first_kernel=$KERNEL
KVER=7.3.4+deb13-amd64 KERNEL=$T/vmlinuz-other
echo other > "$KERNEL"
choose SFRAME_VM_KVM_DEVICE="$KVM" SFRAME_VM_KVM_PROBE_QEMU="$FAKE" FAKE_MODE=marker
expect tcg "run-vm: accelerator tcg: KVM probe booted $first_kver and got no marker in 2 s (*) (another kernel's probe on this machine, cached in $T/cache-d/accel-machine-*; not probed again)" \
	"(d) another kernel: the machine's fallback"
if [[ $(calls) == 1 ]]; then
	ok "(d) another kernel: not probed again"
else
	bad "(d) another kernel: probed $(calls) times"
fi
KVER=$first_kver KERNEL=$first_kernel
unset SFRAME_VM_ACCEL_CACHE

# ---- qemu failing at once ----
choose SFRAME_VM_KVM_DEVICE="$KVM" SFRAME_VM_KVM_PROBE_QEMU="$FAKE" FAKE_MODE=fail
expect tcg "run-vm: accelerator tcg: KVM probe of $KVER: qemu exited with status 1 after * s and no marker (last line: 'qemu-system-x86_64: failed to initialize kvm: Operation not permitted')" \
	"qemu failing"
no_leftovers "qemu failing"

# ---- forced, and bad settings ----
rm -f "$T/calls"
choose SFRAME_VM_ACCEL=kvm SFRAME_VM_KVM_DEVICE="$T/absent" SFRAME_VM_KVM_PROBE_QEMU="$FAKE" FAKE_MODE=hang
expect kvm "run-vm: accelerator kvm: forced by SFRAME_VM_ACCEL=kvm (no probe)" "forced kvm"
choose SFRAME_VM_ACCEL=tcg SFRAME_VM_KVM_DEVICE="$KVM" SFRAME_VM_KVM_PROBE_QEMU="$FAKE" FAKE_MODE=marker
expect tcg "run-vm: accelerator tcg: forced by SFRAME_VM_ACCEL=tcg (no probe)" "forced tcg"
if [[ $(calls) == 0 ]]; then
	ok "forced: nothing booted"
else
	bad "forced: the probe's qemu ran"
fi
choose SFRAME_VM_ACCEL=KVM
if [[ $rc == 1 && -z $choice ]]; then
	ok "SFRAME_VM_ACCEL=KVM refused"
else
	bad "SFRAME_VM_ACCEL=KVM: rc=$rc choice=$choice"
fi
choose SFRAME_VM_KVM_PROBE_TIMEOUT=0 SFRAME_VM_KVM_DEVICE="$KVM"
if [[ $rc == 1 && -z $choice ]]; then
	ok "timeout 0 refused"
else
	bad "timeout 0: rc=$rc choice=$choice"
fi

if ((fails)); then
	echo "$fails check(s) failed"
	exit 1
fi
echo "all passed"
