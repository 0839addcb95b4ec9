# shellcheck shell=bash
# The VM rig's choice of accelerator (sourced by tests/vm/run-vm.sh).  Bash.
#
# KVM is chosen only if a probe guest really boots with it: the kernel the
# run will boot, a tiny initramfs (static busybox) whose init prints
# RIG_PROBE_MARKER on the console and powers off, under
# `qemu -enable-kvm -cpu host`, within SFRAME_VM_KVM_PROBE_TIMEOUT seconds
# (default 30: a Debian kernel boots to the marker in a few seconds under
# KVM, in 5 to 7 s even under TCG; a machine whose KVM never boots pays the
# whole bound once per run).  /dev/kvm can open, create VMs and even start vCPUs while the
# guest never gets past the boot stub's "Probing EDD" (issue 28): a probe
# that only starts qemu with -S passes there, and every VM of `make check`
# then waited for its 20-minute timeout.  Otherwise TCG.
#
# Environment:
#   SFRAME_VM_ACCEL=kvm|tcg       force (no probe); auto or unset: probe
#   SFRAME_VM_KVM_PROBE_TIMEOUT   the probe's bound in seconds (default 30)
#   SFRAME_VM_ACCEL_CACHE=DIR     keep the decision in DIR/accel-<kver>-<key>,
#                                 keyed by the kernel version, the kernel
#                                 file's, the qemu binary's and /dev/kvm's
#                                 identity and the vCPU count, so that
#                                 the next VM of the same run need not
#                                 probe again; entries older than 6 hours
#                                 are ignored (unset: probe every time).
#                                 A probe that fell back to TCG is also kept
#                                 machine-wide (DIR/accel-machine-<key>,
#                                 without the kernel): a KVM that booted no
#                                 guest of one kernel is not asked again for
#                                 the run's other kernels, which would each
#                                 pay the bound
#   SFRAME_VM_KVM_PROBE_QEMU=PROG the qemu the probe runs (default
#                                 qemu-system-x86_64; the VM itself always
#                                 runs qemu-system-x86_64): for showing and
#                                 testing the fallback with a fake
#   SFRAME_VM_KVM_DEVICE=PATH     the device checked for openability and
#                                 identity (default /dev/kvm; tests only:
#                                 qemu itself always opens /dev/kvm)
#   SFRAME_VM_SMP                 vCPUs of the probe, as of the VM (default 2)

RIG_PROBE_MARKER='sframe-vm-accel-probe: init ran'

# Boot the probe guest once.  Prints one line, "RESULT SECONDS RC LAST":
# RESULT is marker (the marker appeared after SECONDS), timeout (none within
# TIMEOUT s) or exited (qemu ended after SECONDS with status RC and no
# marker); LAST is the console's last non-empty line (cleaned, at most 160
# characters).  Never runs longer than TIMEOUT + 6 s (qemu is started under
# `timeout -k 5`, its whole process group killed once the marker is seen)
# and leaves no files behind but LOGCOPY, a copy of the probe's console
# (optional, "" for none).
rig_accel_probe_boot() { # QEMU KERNEL BUSYBOX TIMEOUT LOGCOPY ACCEL_ARGS...
	(
		qemu=$1 kernel=$2 busybox=$3 bound=$4 logcopy=$5
		shift 5
		dir='' tpid=''
		# shellcheck disable=SC2317  # called by trap
		probe_cleanup() {
			if [[ -n $tpid ]]; then
				kill "$tpid" 2>/dev/null
				wait "$tpid" 2>/dev/null
			fi
			[[ -n $dir ]] && rm -rf "$dir"
		}
		trap probe_cleanup EXIT
		trap 'exit 130' INT TERM
		dir=$(mktemp -d "${TMPDIR:-/tmp}/sframe-vm-probe.XXXXXX") || exit 1
		mkdir -p "$dir/initrd/bin" "$dir/initrd/proc" "$dir/initrd/dev" || exit 1
		cp "$busybox" "$dir/initrd/bin/busybox" || exit 1
		# The marker is echoed by the guest's init only: it is nowhere on
		# the kernel's command line, which the kernel prints.
		cat > "$dir/initrd/init" <<-EOF
			#!/bin/busybox sh
			/bin/busybox echo "$RIG_PROBE_MARKER"
			/bin/busybox poweroff -f
			/bin/busybox mount -t proc proc /proc
			echo o > /proc/sysrq-trigger
		EOF
		chmod 0755 "$dir/initrd/init" "$dir/initrd/bin/busybox"
		(cd "$dir/initrd" && find . -print0 | cpio --null -o -H newc --quiet) \
			> "$dir/initrd.cpio" || exit 1
		log=$dir/console.log
		: > "$log"
		local t0 now deadline result=timeout rc=-
		t0=${EPOCHREALTIME/[.,]/}
		deadline=$((t0 + (bound + 6) * 1000000))
		timeout -k 5 "$bound" "$qemu" "$@" -m 256M -smp "${SFRAME_VM_SMP:-2}" \
			-nographic -no-reboot -nic none \
			-kernel "$kernel" -initrd "$dir/initrd.cpio" \
			-append "console=ttyS0 panic=-1 rdinit=/init" \
			< /dev/null > "$log" 2>&1 &
		tpid=$!
		while :; do
			if ! kill -0 "$tpid" 2>/dev/null; then
				wait "$tpid" 2>/dev/null
				rc=$?
				tpid=
				now=${EPOCHREALTIME/[.,]/}
				if grep -aqF -- "$RIG_PROBE_MARKER" "$log"; then
					result=marker
				elif [[ $rc == 124 || $rc == 137 ]]; then
					result=timeout
				else
					result=exited
				fi
				break
			fi
			now=${EPOCHREALTIME/[.,]/}
			if grep -aqF -- "$RIG_PROBE_MARKER" "$log"; then
				result=marker
				break
			fi
			((now < deadline)) || break
			sleep 0.1
		done 2>/dev/null # not bash's "Killed" when -k had to kill timeout(1)'s group
		if [[ -n $tpid ]]; then
			# The marker came (the guest's power-off need not be awaited)
			# or timeout(1) itself hangs: end its process group.
			kill "$tpid" 2>/dev/null
			wait "$tpid" 2>/dev/null
			tpid=
		fi
		[[ -n $logcopy ]] && cp "$log" "$logcopy" 2>/dev/null
		last=$(sed -e 's/\r//g' -e 's/\x1b\[[0-9;?]*[A-Za-z]//g' "$log" |
			tr -cd '[:print:]\n' | grep -av '^[[:space:]]*$' | tail -n 1 | cut -c1-160)
		printf '%s %s %s %s\n' "$result" \
			"$(awk -v a="$t0" -v b="$now" 'BEGIN{printf "%.1f", (b-a)/1e6}')" "$rc" "$last"
	)
}

# The cache file for this decision (prints nothing if there is no cache).
rig_accel_cache_file() { # KVER KERNEL QEMU DEVICE
	local dir=${SFRAME_VM_ACCEL_CACHE:-} q id
	[[ -n $dir ]] || return 0
	mkdir -p "$dir" 2>/dev/null || return 0
	q=$(command -v "$3") && q=$(realpath -e "$q" 2>/dev/null) || q=$3
	id=$(printf '%s\n' "$1" "$2" "$(stat -L -c '%d:%i:%s:%Y' "$2" 2>/dev/null)" \
		"$q" "$(stat -L -c '%d:%i:%s:%Y' "$q" 2>/dev/null)" \
		"$4" "$(stat -L -c '%t:%T:%d:%i:%a:%u:%g:%Z' "$4" 2>/dev/null)" \
		"${SFRAME_VM_SMP:-2}" | sha256sum | cut -c1-16)
	echo "$dir/accel-$1-$id"
}

# Write a decision to a cache file, replacing it whole (a reader never
# sees half a line).
rig_accel_cache_put() { # FILE CHOICE WHY
	local tmp
	tmp=$(mktemp "$1.XXXXXX" 2>/dev/null) || return 0
	printf '%s\t%s\n' "$2" "$3" > "$tmp" && mv -f "$tmp" "$1"
	rm -f "$tmp"
}

# Decide.  Sets RIG_ACCEL_CHOICE (kvm or tcg) and prints one line,
# "run-vm: accelerator kvm|tcg: why" (with the probe's time when a probe
# guest ran); fails (RIG_ACCEL_CHOICE empty, the reason on stdout) on a bad
# setting.  PROBE_LOG: where to keep the probe's console (optional).
rig_choose_accel() { # KVER KERNEL BUSYBOX [PROBE_LOG]
	local kver=$1 kernel=$2 busybox=$3 plog=${4:-} why choice dev err qemu bound
	local cache='' machine='' res result secs rc last
	RIG_ACCEL_CHOICE=
	dev=${SFRAME_VM_KVM_DEVICE:-/dev/kvm}
	bound=${SFRAME_VM_KVM_PROBE_TIMEOUT:-30}
	qemu=${SFRAME_VM_KVM_PROBE_QEMU:-qemu-system-x86_64}
	case ${SFRAME_VM_ACCEL:-auto} in
	kvm | tcg)
		RIG_ACCEL_CHOICE=$SFRAME_VM_ACCEL
		echo "run-vm: accelerator $RIG_ACCEL_CHOICE: forced by SFRAME_VM_ACCEL=$RIG_ACCEL_CHOICE (no probe)"
		return 0
		;;
	auto) ;;
	*)
		echo "run-vm: SFRAME_VM_ACCEL=$SFRAME_VM_ACCEL: must be kvm, tcg or auto"
		return 1
		;;
	esac
	if ! [[ $bound =~ ^[0-9]+$ ]] || ((bound == 0)); then
		echo "run-vm: SFRAME_VM_KVM_PROBE_TIMEOUT=$bound: must be a number of seconds > 0"
		return 1
	fi
	if [[ ! -e $dev ]]; then
		RIG_ACCEL_CHOICE=tcg
		echo "run-vm: accelerator tcg: $dev absent"
		return 0
	fi
	# Open it for reading and writing, as qemu does.
	if ! err=$({ : <> "$dev"; } 2>&1); then
		RIG_ACCEL_CHOICE=tcg
		echo "run-vm: accelerator tcg: $dev not openable (${err##*: })"
		return 0
	fi
	if ! command -v "$qemu" > /dev/null; then
		RIG_ACCEL_CHOICE=tcg
		echo "run-vm: accelerator tcg: no probe possible, $qemu not found"
		return 0
	fi
	cache=$(rig_accel_cache_file "$kver" "$kernel" "$qemu" "$dev")
	machine=$(rig_accel_cache_file machine "" "$qemu" "$dev")
	# At most 6 hours old: a cache directory that outlives its run (vm-out/)
	# does not decide the next one.  This kernel's decision first; else a
	# fallback to TCG that another kernel's probe made on this machine.
	if [[ -n $cache && -s $cache && -n $(find "$cache" -mmin -360 2>/dev/null) ]] &&
		IFS=$'\t' read -r choice why < "$cache" &&
		[[ $choice == kvm || $choice == tcg ]]; then
		RIG_ACCEL_CHOICE=$choice
		echo "run-vm: accelerator $choice: $why (an earlier probe's, cached in $cache)"
		return 0
	fi
	if [[ -n $machine && -s $machine && -n $(find "$machine" -mmin -360 2>/dev/null) ]] &&
		IFS=$'\t' read -r choice why < "$machine" && [[ $choice == tcg ]]; then
		RIG_ACCEL_CHOICE=tcg
		echo "run-vm: accelerator tcg: $why (another kernel's probe on this machine, cached in $machine; not probed again)"
		return 0
	fi
	res=$(rig_accel_probe_boot "$qemu" "$kernel" "$busybox" "$bound" "$plog" \
		-enable-kvm -cpu host)
	read -r result secs rc last <<< "$res"
	case $result in
	marker)
		choice=kvm
		why="probe guest booted in $secs s ($kver, $dev)"
		;;
	timeout)
		choice=tcg
		why="KVM probe booted $kver and got no marker in $bound s ($dev opens; a guest that never boots; last console line: '$last')"
		;;
	exited)
		choice=tcg
		why="KVM probe of $kver: qemu exited with status $rc after $secs s and no marker (last line: '$last')"
		;;
	*)
		choice=tcg
		why="KVM probe of $kver could not run (no temporary directory or initramfs?)"
		;;
	esac
	RIG_ACCEL_CHOICE=$choice
	echo "run-vm: accelerator $choice: $why"
	if [[ -n $cache && $result != "" ]]; then
		rig_accel_cache_put "$cache" "$choice" "$why"
		[[ $choice == tcg && -n $machine ]] && rig_accel_cache_put "$machine" "$choice" "$why"
	fi
	return 0
}
