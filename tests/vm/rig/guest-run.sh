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
# Host paths under /tmp that the run needs (the build tree, the repository,
# the programs: a CI clone may live in /tmp) stay visible at their own paths:
# their top directory under /tmp is bind-mounted over the fresh tmpfs.
#
# On a VM image's root (ROOTFS is not /), the host's root is at HOSTFS
# (rig/init): the host's /tmp is taken from there, and the repository, the
# build tree and the programs elsewhere are bind-mounted at their host paths
# below, so every path in the config means the same as on the host.
HOSTFS=
[[ ${ROOTFS:-/} != / ]] && HOSTFS=/run/sframe-vm/host
declare -A keep=()
for p in "$BUILD_DIR" "$REPO_DIR" "${TESTS[@]}" "${BENCHES[@]}"; do
	case $p in
	/tmp/?*)
		rel=${p#/tmp/}
		keep[/tmp/${rel%%/*}]=1
		;;
	esac
done
if [[ ${#keep[@]} -gt 0 ]]; then
	mkdir -p /run/sframe-vm/hosttmp
	mount --bind "$HOSTFS/tmp" /run/sframe-vm/hosttmp
fi
mount -t tmpfs -o mode=1777,nosuid,nodev tmpfs /tmp
for k in "${!keep[@]}"; do
	src=/run/sframe-vm/hosttmp/${k#/tmp/}
	if [[ -d $src ]]; then mkdir -p "$k"; else touch "$k"; fi
	mount --bind "$src" "$k"
done
if [[ -n $HOSTFS ]]; then
	declare -A bound=()
	for p in "$REPO_DIR" "$BUILD_DIR" "${TESTS[@]%/*}" "${BENCHES[@]%/*}"; do
		[[ -n $p && $p != /tmp/* ]] || continue
		inside=0
		for b in "${!bound[@]}"; do [[ $p == "$b" || $p == "$b"/* ]] && inside=1; done
		[[ $inside == 1 ]] && continue
		mkdir -p "$p" && mount --bind "$HOSTFS$p" "$p" && bound[$p]=1 ||
			echo "<5>vmrig: cannot bind the host's $p" > /dev/kmsg
	done
fi

# The build tree as uid 65534 can reach it.  The checkout may live where that
# user cannot enter (a clone under /root, a `mktemp -d` directory: 0700), and
# the unprivileged runs execute the test programs, their workloads, libraries
# and tools from the build tree.  So every program runs (as root too, so that
# both modes see the same paths) from VIEW, a bind mount of BUILD_DIR under
# /run (tmpfs, 0755): a bind mount is entered without passing through the
# build tree's parent directories.  Files and directories inside it that
# "others" may not read (or, for programs, execute), as a checkout made with
# umask 077 has, get those bits here: the root file system is the overlay
# whose upper layer is a tmpfs, so the chmod copies the file up into the
# guest's memory and the host's tree stays as it is.  The tests name files of
# the tree relative to themselves (vmtest::NextToSelf, BuildTreeFile), never
# by the host path.  Test programs given outside BUILD_DIR (SFRAME_VM_TESTS)
# run from where they are; the benchmarks and --run (root only) keep the host
# paths.
VIEW=/run/sframe-vm/build
mkdir -p "$VIEW"
chmod 0755 /run/sframe-vm
if mount --bind "$BUILD_DIR" "$VIEW"; then
	# CMakeFiles holds objects and CMake's state, nothing a test runs.
	nfix=$(find "$VIEW" -name CMakeFiles -prune -o \
		\( -type d ! -perm -0005 -o -type f \( ! -perm -0004 -o -perm -0100 ! -perm -0001 \) \) \
		-print -exec chmod o+rX {} + | wc -l)
	status build_view "$VIEW"
	say "build tree $BUILD_DIR seen at $VIEW (bind mount; $nfix entries made readable for others in the guest)"
	VIEW_TESTS=()
	for t in "${TESTS[@]}"; do
		case $t in
		"$BUILD_DIR"/*) VIEW_TESTS+=("$VIEW/${t#"$BUILD_DIR"/}") ;;
		*)
			say "$t is outside $BUILD_DIR: runs from its host path"
			VIEW_TESTS+=("$t")
			;;
		esac
	done
	TESTS=("${VIEW_TESTS[@]}")
	TEST_BUILD_DIR=$VIEW
else
	status build_view "failed"
	say "cannot bind-mount $BUILD_DIR at $VIEW: the tests run from the host paths"
	TEST_BUILD_DIR=$BUILD_DIR
fi

mkdir -p /dev/shm /dev/pts
mount -t tmpfs -o mode=1777,nosuid,nodev tmpfs /dev/shm
mount -t devpts -o gid=5,mode=620,ptmxmode=666 devpts /dev/pts
mount -t debugfs debugfs /sys/kernel/debug 2>/dev/null
mount -t tracefs tracefs /sys/kernel/tracing 2>/dev/null
ln -sf /proc/self/fd /dev/fd 2>/dev/null
hostname sframe-vm 2>/dev/null || busybox hostname sframe-vm
ip link set lo up 2>/dev/null || busybox ip link set lo up

kernel=$(uname -r)
status kernel "$kernel"
status stage2 "$(uptime_s)"
say "guest kernel $kernel (uname -r), stage 2 at $(uptime_s)s, $(nproc) cpus"
say "$(cat /proc/cmdline)"

# The panic settings in force (run-vm.sh asks for them on the kernel command
# line; report.py fails the run unless each has the value it needs): a WARN,
# an oops, a soft lockup, a hung task or an RCU stall must stop the VM, so
# that it is a failed run and never only a line in the log.  "missing" when
# the kernel has no such knob.
knob() { # NAME FILE
	local v
	v=$(cat "$2" 2>/dev/null) || v=
	status "$1" "${v:-missing}"
}
for k in panic_on_warn panic_on_oops softlockup_panic soft_watchdog \
	hung_task_panic hung_task_timeout_secs panic_on_rcu_stall; do
	knob "kernel.$k" "/proc/sys/kernel/$k"
done
knob rcupdate.rcu_cpu_stall_suppress /sys/module/rcupdate/parameters/rcu_cpu_stall_suppress
say "panic settings: $(grep -E '^(kernel|rcupdate)\.' "$R/rig.status" | tr '\n' ' ')"

# --- load the module ------------------------------------------------------
# MODULE_KO: a module file built outside DKMS (developers' parallel trees);
# otherwise the DKMS-installed module, as a user would load it.
# NO_MODULE=1 (run-vm.sh --no-module): the command brings its own.
if [[ ${NO_MODULE:-0} == 1 ]]; then
	out=
elif [[ -n ${MODULE_KO:-} ]]; then
	out=$(insmod "$MODULE_KO" 2>&1)
else
	out=$(modprobe "$MODULE" 2>&1)
fi
rc=$?
[[ -n "$out" ]] && printf '%s\n' "$out"
if [[ ${NO_MODULE:-0} == 1 ]]; then
	status module_load skipped
	say "no module loaded (--no-module)"
elif [[ $rc -ne 0 ]]; then
	status module_load "$rc"
	say "modprobe $MODULE FAILED (exit $rc)"
else
	status module_load 0
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

# --- bounded runs -----------------------------------------------------------
# bounded SECS LOG CMD...: run CMD (stdout+stderr to LOG, stdin /dev/null) and
# wait at most SECS.  Returns CMD's status, or 255 if CMD is still there after
# SECS: then it cannot be killed (D state in the module, say), which is
# recorded in $stuck and the blocked tasks are dumped into the kernel log.
# Without this a hung rmmod or test would hold the VM until the host's
# whole-VM timeout.  The watchdog is a subshell without children (read -t on
# a FIFO) that interrupts `wait` with SIGUSR1.
stuck=
got_usr1=0
trap 'got_usr1=1' USR1
FIFO=/run/sframe-vm/watchdog.fifo
mkfifo "$FIFO"
mark_stuck() {
	stuck="$*"
	say "STUCK: $*"
	echo w > /proc/sysrq-trigger
}
bounded() {
	local secs=$1 log=$2 pid wd rc st
	shift 2
	got_usr1=0
	"$@" > "$log" 2>&1 < /dev/null &
	pid=$!
	(read -r -t "$secs" <> "$FIFO"; kill -USR1 $$) &
	wd=$!
	wait "$pid"
	rc=$?
	if [[ $got_usr1 -eq 1 ]]; then
		st=
		[[ -r /proc/$pid/stat ]] && read -r st < "/proc/$pid/stat"
		st=${st##*) }
		st=${st%% *}
		if [[ -n $st && $st != Z ]]; then
			mark_stuck "still running (state $st) after ${secs}s: $*"
			return 255
		fi
		wait "$pid"
		rc=$?
	fi
	kill "$wd" 2>/dev/null
	wait "$wd" 2>/dev/null
	return $rc
}

# Processes a test left behind (timeout exits after SIGKILL even when its
# child cannot die): user-space processes other than this shell.  Uses
# builtins only, so the scan itself does not show up.
LEFT=()
leftovers() {
	local d pid line rest state ppid
	LEFT=()
	for d in /proc/[0-9]*; do
		pid=${d#/proc/}
		[[ $pid == 1 ]] && continue
		line=
		read -r line < "$d/stat" 2>/dev/null || continue
		rest=${line##*) }
		state=${rest%% *}
		rest=${rest#* }
		ppid=${rest%% *}
		[[ $pid == 2 || $ppid == 2 || $state == Z ]] && continue
		[[ " $KEYS_HOLDER_PIDS " == *" $pid "* ]] && continue
		LEFT+=("$pid:$state:${line#*(}")
	done
}
reap_leftovers() { # WHAT
	local p
	leftovers
	[[ ${#LEFT[@]} -eq 0 ]] && return 0
	say "$1 left processes behind: ${LEFT[*]%%)*}; killing them"
	for p in "${LEFT[@]}"; do kill -KILL "${p%%:*}" 2>/dev/null; done
	for _ in 1 2 3 4 5 6 7 8 9 10; do
		leftovers
		[[ ${#LEFT[@]} -eq 0 ]] && return 0
		read -r -t 1 <> "$FIFO"
	done
	mark_stuck "unkillable after $1: ${LEFT[*]%%)*}"
	return 1
}

# --- perf's scheduler jump labels, held on for the whole run ---------------
# Under qemu's multi-threaded TCG, patching kernel text while the other vCPU
# runs it has crashed the guest with nothing of ours on the stack: an int3
# nobody claimed at a jump label in __schedule (6.12, in CI, the idle task),
# and earlier an int3 loop at the kprobe's ftrace site (module/perf_hook.c).
# perf switches its jump labels in the scheduler and the fault paths
# (perf_sched_events, one key per software event) on with the first
# per-task event and off a second after the last one closes: between nearly
# every two tests.  A counting per-task event of each software kind, held
# by the rig from here to the end, keeps them on, so that no test runs on
# scheduler text being rewritten under it.  The module's own paths are the
# same either way (it patches nothing after its first session).
#
# Switching the keys on is itself such patching, and has crashed the guest
# the same way (an unclaimed int3 in handle_mm_fault: 6.12 in issue 27's
# checks, 7.3.4 in issue 28's, each before any test ran).  So the other
# vCPUs are taken offline while the holder opens its events, and brought
# back once its workload runs: text patched with one CPU online has no
# other CPU to run it half-written.
KEYS_HOLDER_PIDS=
offlined=()
for c in /sys/devices/system/cpu/cpu[1-9]*/online; do
	[[ -w $c ]] && echo 0 > "$c" 2>/dev/null && offlined+=("$c")
done
if command -v perf > /dev/null; then
	perf stat -x, -o /dev/null \
		-e context-switches,cpu-migrations,page-faults,minor-faults \
		-e major-faults,alignment-faults,emulation-faults,cpu-clock,task-clock \
		-- sleep 1000000 < /dev/null > "$R/keys-holder.log" 2>&1 &
	holder=$!
	for _ in 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20; do
		child=$(cat "/proc/$holder/task/$holder/children" 2>/dev/null)
		child=${child%% *}
		[[ -n $child && $(readlink "/proc/$child/exe" 2>/dev/null) == */sleep ]] && break
		read -r -t 0.5 <> "$FIFO"
	done
	KEYS_HOLDER_PIDS="$holder $child"
	status keys_holder "$KEYS_HOLDER_PIDS"
	say "perf jump labels held on by: perf stat (pid $holder) on sleep (pid ${child:-?}), switched on with ${#offlined[@]} other vCPU(s) offline"
else
	status keys_holder missing
	say "no perf in the guest: perf's jump labels switch between tests"
fi
for c in "${offlined[@]}"; do
	echo 1 > "$c" || say "cannot bring ${c%/online} back online"
done
status cpus_online "$(nproc)"

# --- run the tests --------------------------------------------------------
# shellcheck disable=SC2153  # GTEST_ARGS comes from the config file
read -r -a gtest_args <<< "$GTEST_ARGS"
# Every program starts with SIGINT and SIGQUIT at their defaults, as from a
# user's shell: bash starts the background job of `bounded` with both
# ignored (no job control), and coreutils' timeout passes that on from 9.10
# (sid), where 9.1 (bookworm) reset them, so a test's Ctrl-C reached a
# child that ignored it (ProfTest.SigintEndsTheRecordingCleanly on the sid
# image).  env --default-signal resets them.
test_cmd() { # PATH MODE SCRATCH XML
	local -a pre=() env_words=()
	[[ $2 == user ]] && pre=(setpriv "--reuid=$USER_UID" "--regid=$USER_GID" --clear-groups)
	# shellcheck disable=SC2153  # TEST_ENV comes from the config file
	[[ -n ${TEST_ENV:-} ]] && read -r -a env_words <<< "$TEST_ENV"
	cd "$3" || exit 125
	exec env -i --default-signal=INT,QUIT PATH="$PATH" HOME="$3" TMPDIR=/tmp LANG=C.UTF-8 \
		TERM=dumb GTEST_COLOR=no SFRAME_VM=1 SFRAME_VM_MODE="$2" \
		SFRAME_VM_RESULTS="$R" SFRAME_VM_KVER="$kernel" \
		SFRAME_VM_BUILD_DIR="$TEST_BUILD_DIR" SFRAME_VM_DEVICE="$DEVICE" "${env_words[@]}" \
		timeout -k 10 "$TEST_TIMEOUT" "${pre[@]}" "$1" \
		"--gtest_output=xml:$4" "${gtest_args[@]}"
}
run_one() { # PATH MODE
	local bin=$1 mode=$2 name base scratch rc t0 t1
	name=$(basename "$bin")
	base="$R/$name.$mode"
	if [[ -n $stuck ]]; then
		say "NOT RUN $name as $mode: an earlier program is stuck"
		return
	fi
	scratch=/tmp/vmtest/$name.$mode
	mkdir -p "$scratch"
	[[ $mode == user ]] && chown "$USER_UID:$USER_GID" "$scratch"
	say "RUN $name as $mode"
	t0=$(uptime_s)
	bounded $((TEST_TIMEOUT + 60)) "$base.log" test_cmd "$bin" "$mode" "$scratch" "$base.xml"
	rc=$?
	t1=$(uptime_s)
	echo "$rc" > "$base.rc"
	say "DONE $name as $mode: exit $rc, $(awk -v a="$t0" -v b="$t1" 'BEGIN{printf "%.1f", b-a}')s"
	reap_leftovers "$name as $mode"
	[[ -n $stuck ]] || rm -rf "$scratch"
}

# --systemd: systemd becomes PID 1 (exec'd by this script, as an initramfs
# hands over to it), with the rig's target as its default unit: what
# sysinit.target brings up on this root, and the command as a oneshot
# service whose script ends the run as finish() does.  The mounts made
# above stay (systemd keeps API file systems it finds mounted).  Units the
# rig adds or masks live under /run/systemd/system, the guest's only: the
# first-boot prompt (a root without /etc/machine-id would wait at the
# console for input) and the gettys.
if [[ -n $RUN_CMD && ${SYSTEMD:-0} == 1 ]]; then
	units=/run/systemd/system
	mkdir -p "$units"
	for u in systemd-firstboot.service getty.target console-getty.service serial-getty@ttyS0.service; do
		ln -sf /dev/null "$units/$u"
	done
	script=/run/sframe-vm/systemd-run.sh
	{
		echo '#!/bin/bash'
		declare -p PATH R RUN_CMD TEST_TIMEOUT kernel DEVICE BUILD_DIR
		declare -f say status uptime_s finish
		cat <<-'EOF'
		cd /tmp || exit 125
		say "RUN-CMD $RUN_CMD (a service of systemd $(systemctl --version | head -n 1 | cut -d' ' -f2), PID 1)"
		env -i PATH="$PATH" HOME=/tmp TMPDIR=/tmp LANG=C.UTF-8 TERM=dumb \
			SFRAME_VM=1 SFRAME_VM_MODE=root SFRAME_VM_RESULTS="$R" \
			SFRAME_VM_KVER="$kernel" SFRAME_VM_BUILD_DIR="$BUILD_DIR" \
			SFRAME_VM_DEVICE="$DEVICE" \
			timeout -k 10 "$TEST_TIMEOUT" bash -c "$RUN_CMD" > "$R/run.log" 2>&1 < /dev/null
		rc=$?
		echo "$rc" > "$R/run.rc"
		say "RUN-CMD exit $rc"
		systemctl --no-pager --failed > "$R/systemd-failed.txt" 2>&1
		finish
		EOF
	} > "$script"
	cat > "$units/sframe-vm-run.service" <<-EOF
	[Unit]
	Description=The VM rig's command (run-vm.sh --systemd --run)
	After=sysinit.target
	[Service]
	Type=oneshot
	ExecStart=/bin/bash $script
	TimeoutStartSec=infinity
	StandardOutput=journal+console
	EOF
	cat > "$units/sframe-vm.target" <<-EOF
	[Unit]
	Description=The VM rig under systemd
	Requires=sysinit.target sframe-vm-run.service
	After=sysinit.target
	AllowIsolate=yes
	EOF
	status systemd "$(uptime_s)"
	say "exec systemd as PID 1 (default unit sframe-vm.target)"
	exec /lib/systemd/systemd --unit=sframe-vm.target --show-status=no --log-target=kmsg
	say "exec systemd failed"
	finish
fi

if [[ -n $RUN_CMD ]]; then
	run_cmd() {
		cd /tmp || exit 125
		exec env -i --default-signal=INT,QUIT PATH="$PATH" HOME=/tmp TMPDIR=/tmp LANG=C.UTF-8 \
			TERM=dumb SFRAME_VM=1 SFRAME_VM_MODE=root \
			SFRAME_VM_RESULTS="$R" SFRAME_VM_KVER="$kernel" \
			SFRAME_VM_BUILD_DIR="$BUILD_DIR" SFRAME_VM_DEVICE="$DEVICE" \
			timeout -k 10 "$TEST_TIMEOUT" bash -c "$RUN_CMD"
	}
	say "RUN-CMD $RUN_CMD"
	bounded $((TEST_TIMEOUT + 60)) "$R/run.log" run_cmd
	rc=$?
	echo "$rc" > "$R/run.rc"
	say "RUN-CMD exit $rc"
	reap_leftovers "the command"
fi

for bin in "${TESTS[@]}"; do
	if [[ $(grep -c "^$MODULE " /proc/modules) -eq 0 ]]; then
		say "module $MODULE is not loaded before $(basename "$bin")"
	fi
	run_one "$bin" root
	run_one "$bin" user
done

# --- optional benchmarks (root only, stdout saved) ------------------------
bench_cmd() { # PATH
	cd /tmp || exit 125
	exec env -i --default-signal=INT,QUIT PATH="$PATH" HOME=/tmp TMPDIR=/tmp LANG=C.UTF-8 \
		TERM=dumb SFRAME_VM=1 SFRAME_VM_MODE=root \
		SFRAME_VM_RESULTS="$R" SFRAME_VM_KVER="$kernel" \
		SFRAME_VM_BUILD_DIR="$BUILD_DIR" SFRAME_VM_DEVICE="$DEVICE" \
		timeout -k 10 "$BENCH_TIMEOUT" "$1" 2> "$R/bench/$(basename "$1").stderr"
}
if [[ ${#BENCHES[@]} -gt 0 && -z $stuck ]]; then
	mkdir -p "$R/bench"
	for bin in "${BENCHES[@]}"; do
		name=$(basename "$bin")
		say "BENCH $name"
		bounded $((BENCH_TIMEOUT + 60)) "$R/bench/$name.txt" bench_cmd "$bin"
		rc=$?
		echo "$rc" > "$R/bench/$name.rc"
		say "BENCH $name: exit $rc"
		reap_leftovers "$name"
		[[ -z $stuck ]] || break
	done
fi
[[ -z $stuck ]] || status stuck "$stuck"

# --- unload -----------------------------------------------------------------
if grep -q "^$MODULE " /proc/modules; then
	bounded 120 "$R/rmmod.log" rmmod "$MODULE"
	rc=$?
	cat "$R/rmmod.log"
	status rmmod "$rc"
	say "rmmod $MODULE: exit $rc"
else
	status rmmod skipped
	say "rmmod $MODULE skipped: not loaded"
fi

finish
