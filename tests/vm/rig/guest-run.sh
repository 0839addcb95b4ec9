#!/bin/bash
# Stage 2 of the VM rig: PID 1 after switch_root, running the host's userland
# over the overlay root built by stage 1 (init).  Loads the module, runs every
# *_vmtest binary as root and as uid/gid 65534, optionally the *_vmbench
# programs, unloads the module, saves dmesg and powers off.
#
# Everything it records goes to the results export ($R), which the host
# (tests/vm/rig/report.py) reads after the VM is gone.  Lines starting with
# "vmrig:" are the rig's progress; they go to the console and to the kernel log
# (so dmesg shows which test ran when something happened).
#
# No `set -e`: whatever happens, this script must reach the power-off.

export PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
R=/run/sframe-vm/results
# shellcheck source=/dev/null
. /run/sframe-vm/config

say() {
	# Into the kernel log (the console shows it, with a timestamp); the
	# kernel runs with printk.devkmsg=on so none of these is rate-limited.
	echo "<5>vmrig: $*" > /dev/kmsg 2>/dev/null || echo "vmrig: $*"
}
status() { echo "$1=$2" >> "$R/rig.status"; }
uptime_s() { cut -d' ' -f1 /proc/uptime; }

finish() {
	dmesg > "$R/dmesg.txt" 2>&1
	status end "$(uptime_s)"
	say "SFRAME-VM-RIG-END at $(uptime_s)s"
	sync
	busybox poweroff -f
	echo o > /proc/sysrq-trigger
	sleep 5
}

# Writable places: the overlay root is writable everywhere, but /tmp gets a
# fresh tmpfs (not the host's /tmp) and so do /dev/shm and /run (stage 1).
mount -t tmpfs -o mode=1777,nosuid,nodev tmpfs /tmp
mkdir -p /dev/shm /dev/pts
mount -t tmpfs -o mode=1777,nosuid,nodev tmpfs /dev/shm
mount -t devpts -o gid=5,mode=620,ptmxmode=666 devpts /dev/pts
mount -t debugfs debugfs /sys/kernel/debug 2>/dev/null
mount -t tracefs tracefs /sys/kernel/tracing 2>/dev/null
ln -sf /proc/self/fd /dev/fd 2>/dev/null
hostname sframe-vm 2>/dev/null
ip link set lo up 2>/dev/null

kernel=$(uname -r)
status kernel "$kernel"
status stage2 "$(uptime_s)"
say "guest kernel $kernel (uname -r), stage 2 at $(uptime_s)s, $(nproc) cpus"
say "$(cat /proc/cmdline)"

# --- load the module ------------------------------------------------------
out=$(modprobe "$MODULE" 2>&1)
rc=$?
[[ -n "$out" ]] && printf '%s\n' "$out"
status module_load "$rc"
if [[ $rc -ne 0 ]]; then
	say "modprobe $MODULE FAILED (exit $rc)"
else
	say "modprobe $MODULE ok: $(grep "^$MODULE " /proc/modules)"
	if [[ -n "$DEVICE" ]]; then
		if [[ -c "$DEVICE" ]]; then
			status device 0
			say "device: $(ls -l "$DEVICE")"
		else
			status device 1
			say "device $DEVICE MISSING"
		fi
	fi
fi

# --- run the tests --------------------------------------------------------
# shellcheck disable=SC2153  # GTEST_ARGS comes from the config file
read -r -a gtest_args <<< "$GTEST_ARGS"
run_one() { # PATH MODE
	local bin=$1 mode=$2 name base scratch rc t0 t1
	name=$(basename "$bin")
	base="$R/$name.$mode"
	scratch=/tmp/vmtest/$name.$mode
	mkdir -p "$scratch"
	local -a pre=()
	if [[ $mode == user ]]; then
		chown "$USER_UID:$USER_GID" "$scratch"
		pre=(setpriv "--reuid=$USER_UID" "--regid=$USER_GID" --clear-groups)
	fi
	say "RUN $name as $mode"
	t0=$(uptime_s)
	(
		cd "$scratch" || exit 125
		exec env -i PATH="$PATH" HOME="$scratch" TMPDIR=/tmp LANG=C.UTF-8 \
			TERM=dumb GTEST_COLOR=no SFRAME_VM=1 SFRAME_VM_MODE="$mode" \
			SFRAME_VM_RESULTS="$R" SFRAME_VM_KVER="$kernel" \
			SFRAME_VM_BUILD_DIR="$BUILD_DIR" SFRAME_VM_DEVICE="$DEVICE" \
			timeout -k 10 "$TEST_TIMEOUT" "${pre[@]}" "$bin" \
			"--gtest_output=xml:$base.xml" "${gtest_args[@]}"
	) > "$base.log" 2>&1 < /dev/null
	rc=$?
	t1=$(uptime_s)
	echo "$rc" > "$base.rc"
	say "DONE $name as $mode: exit $rc, $(awk -v a="$t0" -v b="$t1" 'BEGIN{printf "%.1f", b-a}')s"
	rm -rf "$scratch"
}

for bin in "${TESTS[@]}"; do
	if [[ $(grep -c "^$MODULE " /proc/modules) -eq 0 ]]; then
		say "module $MODULE is not loaded before $(basename "$bin")"
	fi
	run_one "$bin" root
	run_one "$bin" user
done

# --- optional benchmarks (root only, stdout saved) ------------------------
if [[ ${#BENCHES[@]} -gt 0 ]]; then
	mkdir -p "$R/bench"
	for bin in "${BENCHES[@]}"; do
		name=$(basename "$bin")
		say "BENCH $name"
		(
			cd /tmp || exit 125
			exec env -i PATH="$PATH" HOME=/tmp TMPDIR=/tmp LANG=C.UTF-8 \
				TERM=dumb SFRAME_VM=1 SFRAME_VM_MODE=root \
				SFRAME_VM_RESULTS="$R" SFRAME_VM_KVER="$kernel" \
				SFRAME_VM_BUILD_DIR="$BUILD_DIR" SFRAME_VM_DEVICE="$DEVICE" \
				timeout -k 10 "$BENCH_TIMEOUT" "$bin"
		) > "$R/bench/$name.txt" 2> "$R/bench/$name.stderr" < /dev/null
		rc=$?
		echo "$rc" > "$R/bench/$name.rc"
		say "BENCH $name: exit $rc"
	done
fi

# --- unload -----------------------------------------------------------------
if grep -q "^$MODULE " /proc/modules; then
	out=$(timeout 120 rmmod "$MODULE" 2>&1)
	rc=$?
	[[ -n "$out" ]] && printf '%s\n' "$out"
	status rmmod "$rc"
	say "rmmod $MODULE: exit $rc"
else
	status rmmod skipped
	say "rmmod $MODULE skipped: not loaded"
fi

finish
