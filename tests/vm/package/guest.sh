#!/usr/bin/env bash
# The package test, in the guest (root; run-vm.sh --no-module --run): the
# Debian packages installed on a machine that has never seen this tree's
# build, used, and removed again.
#
#   guest.sh DEB_DIR REPO_DIR [upgrade]
#
# DEB_DIR holds the .deb files of `make deb`; REPO_DIR is the source tree,
# of which only examples/downstream (sources) is taken.  Every step prints
# "PASS name", "FAIL name: why" or "SKIP name: why"; the exit status is the
# number of failures (0: all passed).  Steps:
#   fresh       no trace of the host's own module install (the guest runs on
#               the host's root file system, where `make check` installed the
#               module through DKMS): removed from the guest's overlay first,
#               and the source tree hidden under an empty tmpfs
#   install     apt-get install ./*.deb (no network: dependencies come from
#               the installed system); DKMS builds the module for the running
#               kernel (other kernels' headers are hidden from this guest to
#               keep one build under emulation)
#   every-kernel the postinst tries every other installed kernel with
#               headers (DKMS's own part does the running and the newest):
#               a kernel the module does not support, faked with the running
#               kernel's headers, is refused with dkms.conf's message and the
#               installation goes on
#   coverd      sframe-tools installed: its postinst succeeded (the package
#               is installed), the unit sframe-coverd.service and the daemon
#               are installed (the man page is in the package) and the unit
#               enabled (the symlink deb-systemd-helper makes), dpkg has
#               its file triggers on /lib and /usr/lib, and
#               `systemd-analyze verify` finds nothing to say of the unit
#               (when the guest has systemd-analyze)
#   load        the module loaded by the package (modules-load.d config is
#               for boot; the postinst loads it now) and /dev/sframe_unwind
#   no-test-hooks the module built from the package has no test hook
#               (no nmi_test_owner parameter: module/Kbuild builds it only
#               with SFRAME_TEST_HOOKS=y, which the rig alone sets)
#   udev        udevd applies the package's rule: group sframe, mode 0660
#   coverd-service  with systemd as PID 1 (run.sh boots the guest so, as a
#               user's machine runs): the packages started the service, and
#               under its unit's sandbox it works: it supplies sections to
#               the module's file store, sees new mappings, answers
#               `systemctl reload`, and `systemctl stop` ends it cleanly
#               (inactive, not failed); without systemd: SKIP
#   build-c, build-cxx
#               the downstream examples built from the installed files only:
#               pkg-config for the C program, find_package for the C++ one
#   unwind-self the C++ example as a member of group sframe: the walk
#               through the installed libsframe-client.so.0 reaches main
#   denied      a user outside group sframe: open fails with EACCES, and
#               sframe-prof says to join the group
#   session     the C example as root: a session of its own perf event
#   prof        the installed sframe-prof records xz; >= 90 % of the samples
#               reach main (xz is stripped: its main has no name, so the libc
#               frame main returns to, __libc_start_call_main, named from
#               libc6-dbg, counts)
#   trigger     a package changing a file under /usr/lib (libsframe-client0
#               installed again) makes dpkg run sframe-tools's `postinst
#               triggered`: with the service running, `systemctl reload` (it
#               scans again); without, `sframe-coverd --once --cache-only`: SFrame made for the libraries of the linker's
#               paths into /var/cache/sframe-unwind, and the trigger processed
#               without failing.  Only with the argument "upgrade" (the long
#               run): it makes SFrame for every library, minutes under
#               emulation; otherwise SKIP
#   upgrade     a kernel upgrade (the kernel's postinst hook that DKMS
#               installs, run for a second kernel): the module is built for it.
#               Only with the argument "upgrade" (`make check KERNELS=all`):
#               a second DKMS build costs some three minutes under
#               emulation, and its depmod one more at removal; otherwise SKIP
#   remove      apt-get remove: no module, no file of the packages, no DKMS
#               tree left
set -uo pipefail

DEB_DIR=${1:?usage: guest.sh DEB_DIR REPO_DIR}
REPO_DIR=${2:?usage: guest.sh DEB_DIR REPO_DIR [upgrade]}
UPGRADE=${3:-}
W=/tmp/pkgtest
KVER=$(uname -r)
PKGS=(sframe-unwind-dkms libsframe-client0 libsframe-client-dev sframe-tools)
failures=0

pass() { echo "PASS $1"; }
skip() { echo "SKIP $1: $2"; }
fail() { echo "FAIL $1: $2"; failures=$((failures + 1)); }
step() { echo; echo "---- $1 ($(cut -d' ' -f1 /proc/uptime)s)"; }

# ---- fresh ------------------------------------------------------------------
step fresh
rm -rf "$W" && mkdir -p "$W/debs" "$W/src" || exit 125
for p in "${PKGS[@]}"; do
	cp "$DEB_DIR/${p}_"*.deb "$W/debs/" || fail fresh "no package $p in $DEB_DIR"
done
cp -r "$REPO_DIR/examples/downstream" "$W/src/" || exit 125
ls -l "$W/debs"
# The host's install (scripts/dkms-install.sh): gone from this guest.  Its
# files removed, not `dkms remove`, which would run depmod for every kernel
# it built for (a minute under emulation).  No depmod here either (35 s
# under emulation): the module index still names the deleted file, which
# nothing can load (modinfo and modprobe find no file: the check below),
# until the package's DKMS build runs depmod and makes the index anew, as on
# a machine that never had the module.  DKMS installs into updates/ (and
# `make install` into extra/): only those are searched, not all of
# /lib/modules over 9p.
rm -rf /var/lib/dkms/sframe-unwind /usr/src/sframe-unwind-*
for d in /lib/modules/*/updates /lib/modules/*/extra; do
	[[ -d $d ]] && find "$d" -name 'sframe_unwind.ko*' -delete
done
# A policy-rc.d of the host's (Docker's, exit 101: "start no service") is
# not the guest's: under systemd this guest boots as a machine, where
# packages start their services.  Removed from the overlay, and said.
if [[ -d /run/systemd/system && -e /usr/sbin/policy-rc.d ]]; then
	echo "  | the host's /usr/sbin/policy-rc.d removed (it forbids every service start)"
	rm -f /usr/sbin/policy-rc.d
fi
# No man-db index rebuild at each install and removal (man-db's trigger,
# some two minutes each under emulation; no step reads the index).  This
# is the guest's overlay, as every change here.
rm -f /var/lib/man-db/auto-update
# The tree and its build out of sight (also the rig's view of the build
# tree): only the copies above are used.
mount -t tmpfs -o mode=0755 tmpfs "$REPO_DIR" || exit 125
if mountpoint -q /run/sframe-vm/build; then
	mount -t tmpfs -o mode=0755 tmpfs /run/sframe-vm/build || exit 125
fi
# One DKMS build under emulation: the other kernels' headers hidden (the
# upgrade step brings one back).
other_kernel=
for b in /lib/modules/*/build; do
	k=${b#/lib/modules/}
	k=${k%/build}
	[[ $k == "$KVER" ]] && continue
	[[ -z $other_kernel && $k == 6.12.* && $k != *-rt-* ]] && other_kernel=$k
	mv "$b" "$b.hidden"
done
# A kernel the module does not support, with headers (the running kernel's):
# the postinst's pass over every installed kernel must try it and be refused.
FAKE_KVER=6.5.0-0-sframetest
mkdir -p "/lib/modules/$FAKE_KVER"
ln -s "$(readlink -f "/lib/modules/$KVER/build")" "/lib/modules/$FAKE_KVER/build"
seen=()
modinfo sframe_unwind >/dev/null 2>&1 && seen+=("module $(modinfo -F filename sframe_unwind)")
[[ -e /dev/sframe_unwind ]] && seen+=(/dev/sframe_unwind)
for d in "$REPO_DIR" /run/sframe-vm/build; do
	[[ -n $(find "$d" -mindepth 1 -maxdepth 1 2>/dev/null | head -n 1) ]] && seen+=("$d")
done
if [[ ${#seen[@]} -gt 0 ]]; then
	fail fresh "still visible: ${seen[*]}"
else
	pass fresh
fi

# ---- install ----------------------------------------------------------------
step install
debs=()
for p in "${PKGS[@]}"; do
	f=$(ls "$W/debs/${p}_"*.deb 2>/dev/null | head -n 1)
	if [[ -n $f ]]; then debs+=("$f"); else fail install "no package $p in $DEB_DIR"; fi
done
export DEBIAN_FRONTEND=noninteractive
if apt-get install -y "${debs[@]}" > "$W/install.log" 2>&1; then
	pass install
else
	fail install "apt-get install exited $? (log below)"
fi
sed 's/^/  | /' "$W/install.log" | tail -n 40
dkms status -m sframe-unwind

# ---- every-kernel -------------------------------------------------------------
step every-kernel
if grep -q "not built for kernel $FAKE_KVER: supported are" "$W/install.log" &&
	! find "/lib/modules/$FAKE_KVER" -name 'sframe_unwind.ko*' | grep -q .; then
	pass every-kernel
else
	fail every-kernel "the postinst did not try (and DKMS refuse) the unsupported kernel $FAKE_KVER"
fi
rm -rf "/lib/modules/$FAKE_KVER"

# ---- coverd -------------------------------------------------------------------
# sframe-tools's service and trigger, installed on a machine where systemd
# does not run: the postinst only enables the unit (deb-systemd-helper),
# and its failure to start it would have failed the installation.
step coverd
UNIT=/lib/systemd/system/sframe-coverd.service
if [[ -d /run/systemd/system ]]; then
	echo "  | systemd runs in this guest (PID 1: $(cat /proc/1/comm))"
else
	echo "  | no systemd in this guest (PID 1: $(cat /proc/1/comm))"
fi
problems=()
status=$(dpkg-query -W -f='${db:Status-Abbrev}' sframe-tools 2>/dev/null)
[[ $status == "ii " ]] || problems+=("sframe-tools is '$status', not installed (ii): its postinst failed?")
for f in "$UNIT" /usr/sbin/sframe-coverd; do
	if ! dpkg -L sframe-tools 2>/dev/null | grep -qxF "$f"; then
		problems+=("$f is not a file of sframe-tools")
	elif [[ ! -e $f ]]; then
		problems+=("$f missing")
	fi
done
# The man page from the package itself: the VM images leave
# /usr/share/man out (dpkg path-exclude).
MAN8=usr/share/man/man8/sframe-coverd.8.gz
dpkg-deb -c "$(ls "$W/debs/sframe-tools_"*.deb | head -n 1)" | grep -q " \./$MAN8\$" ||
	problems+=("/$MAN8 is not in the package")
wants=/etc/systemd/system/multi-user.target.wants/sframe-coverd.service
[[ -L $wants ]] || problems+=("the unit is not enabled ($wants missing)")
for d in /lib /usr/lib; do
	grep -qx "interest-noawait $d" /var/lib/dpkg/info/sframe-tools.triggers 2>/dev/null ||
		problems+=("no trigger interest-noawait $d in sframe-tools.triggers")
	grep -Eqx "$d sframe-tools(:[a-z0-9]+)?/noawait" /var/lib/dpkg/triggers/File 2>/dev/null ||
		problems+=("dpkg has no file trigger $d for sframe-tools")
done
if [[ ${#problems[@]} -eq 0 ]]; then
	pass coverd
else
	fail coverd "$(IFS=';'; echo "${problems[*]}")"
fi
if command -v systemd-analyze >/dev/null 2>&1; then
	# Its exit status is 0 even for unknown keys and bad values: only
	# silence about the unit passes.  Other units it loads (the
	# dependencies) are not ours.
	# Documentation= checked with man(1) where it and the page are here.
	man_check=--man=yes
	if ! command -v man >/dev/null 2>&1 || [[ ! -e /$MAN8 ]]; then
		man_check=--man=no
		echo "  | no man(1) or no man pages here: Documentation= not checked"
	fi
	systemd-analyze verify "$man_check" "$UNIT" > "$W/verify.log" 2>&1
	rc=$?
	sed 's/^/  | /' "$W/verify.log"
	if [[ $rc -eq 0 ]] && ! grep -q 'sframe-coverd' "$W/verify.log"; then
		pass coverd-verify
	else
		fail coverd-verify "systemd-analyze verify (exit $rc) reported on the unit (above)"
	fi
else
	skip coverd-verify "no systemd-analyze in this guest"
fi

# ---- load ---------------------------------------------------------------------
step load
if grep -q '^sframe_unwind ' /proc/modules && [[ -c /dev/sframe_unwind ]]; then
	pass load
else
	# The postinst may not have loaded it; what a user would do next.
	modprobe sframe_unwind 2>&1 | sed 's/^/  | /'
	if grep -q '^sframe_unwind ' /proc/modules && [[ -c /dev/sframe_unwind ]]; then
		fail load "the postinst did not load the module (modprobe by hand did)"
	else
		fail load "module not loaded, /dev/sframe_unwind missing"
	fi
fi
modinfo -F filename sframe_unwind

# ---- no-test-hooks ----------------------------------------------------------------
# The test suite's hooks (nmi_test.c, root driving the sample path from an
# NMI) are built only by the rig (module/Kbuild SFRAME_TEST_HOOKS=y):
# the package's module has no such parameter.
step no-test-hooks
if modinfo -F parm sframe_unwind | grep -q '^nmi_test_owner'; then
	fail no-test-hooks "the packaged module has the test hook nmi_test_owner"
elif [[ -e /sys/module/sframe_unwind/parameters/nmi_test_owner ]]; then
	fail no-test-hooks "the loaded module has the test hook nmi_test_owner"
else
	pass no-test-hooks
fi

# ---- udev ---------------------------------------------------------------------
step udev
/lib/systemd/systemd-udevd --daemon > /dev/null 2>&1
udevadm trigger --action=add --subsystem-match=misc
udevadm settle --timeout=60
perm=$(stat -c '%G %a' /dev/sframe_unwind 2>/dev/null)
if [[ $perm == "sframe 660" ]]; then
	pass udev
else
	fail udev "/dev/sframe_unwind is '$perm', expected 'sframe 660'"
fi

# ---- coverd-service -------------------------------------------------------------
# The field of the status file's second line ("# pid=N ... covered=N ...").
coverd_field() { # NAME
	sed -n 2p /run/sframe-coverd/status 2>/dev/null | tr ' ' '\n' | sed -n "s/^$1=//p"
}
# Waits up to $2 seconds for the shell condition $1; its status.
wait_for() { # CONDITION SECONDS
	local i
	for ((i = 0; i < $2; i++)); do
		eval "$1" && return 0
		sleep 1
	done
	eval "$1"
}
step coverd-service
if [[ ! -d /run/systemd/system ]]; then
	skip coverd-service "systemd does not run in this guest"
else
	problems=()
	if ! wait_for 'systemctl --quiet is-active sframe-coverd.service' 30; then
		problems+=("not active after the installation: $(systemctl is-active sframe-coverd.service)")
		# What started (or refused to) from the installation on.
		grep -i 'coverd' "$W/install.log" | sed 's/^/  | install: /'
		systemctl start sframe-coverd.service ||
			problems+=("systemctl start sframe-coverd failed")
	fi
	if systemctl --quiet is-active sframe-coverd.service; then
		pid=$(systemctl show -P MainPID sframe-coverd.service)
		# Under the unit's sandbox: the store gets sections (FILE_SUPPLY,
		# /proc/PID/map_files), and a program run now is reported (perf).
		wait_for '[[ $(coverd_field pid) == "$pid" && ${pid:-0} != 0 ]]' 60 ||
			problems+=("no status file of pid $pid in /run/sframe-coverd")
		wait_for '[[ $(coverd_field covered) -gt 0 ]]' 300 ||
			problems+=("nothing covered in 300 s: covered=$(coverd_field covered) failed=$(coverd_field failed)")
		records=$(coverd_field mmap_records)
		xz --version > /dev/null
		wait_for '[[ $(coverd_field mmap_records) -gt ${records:-0} ]]' 60 ||
			problems+=("a new program's mappings were not reported (mmap_records ${records:-?})")
		entries=$(sframe-client stats 2>/dev/null | sed -n 's/^ *file_entries *:\{0,1\} *//p' | head -n 1)
		echo "  | status: $(sed -n 2p /run/sframe-coverd/status 2>/dev/null)"
		echo "  | the module's file store: ${entries:-?} entries"
		scans=$(coverd_field process_scans)
		systemctl reload sframe-coverd.service ||
			problems+=("systemctl reload failed")
		wait_for '[[ $(coverd_field process_scans) -gt ${scans:-0} ]]' 120 ||
			problems+=("reload did not scan again (process_scans ${scans:-?})")
		systemctl stop sframe-coverd.service
		state=$(systemctl show -P ActiveState sframe-coverd.service)
		result=$(systemctl show -P Result sframe-coverd.service)
		[[ $state == inactive && $result == success ]] ||
			problems+=("after systemctl stop: $state, result $result")
	fi
	journalctl --no-pager -b -u sframe-coverd.service 2>/dev/null | tail -n 15 | sed 's/^/  | /'
	if [[ ${#problems[@]} -eq 0 ]]; then
		pass coverd-service
	else
		fail coverd-service "$(IFS=';'; echo "${problems[*]}")"
	fi
	# Running again for the steps below, as on a user's machine.
	systemctl start sframe-coverd.service
fi

# ---- users ----------------------------------------------------------------------
useradd -m -s /bin/bash -G sframe sfmember 2>/dev/null
useradd -m -s /bin/bash sfother 2>/dev/null
chmod 0755 "$W" "$W/src"
as() { # USER CMD...
	local u=$1
	shift
	runuser -u "$u" -- env -i PATH=/usr/bin:/bin HOME="/home/$u" LANG=C.UTF-8 "$@"
}

# ---- build-c, build-cxx -----------------------------------------------------------
step build
src=$W/src/downstream
if make -C "$src" O="$W" > "$W/build-c.log" 2>&1; then
	pass build-c
else
	fail build-c "pkg-config build failed"
fi
sed 's/^/  | /' "$W/build-c.log" | tail -n 20
if cmake -S "$src" -B "$W/cmake-build" > "$W/build-cxx.log" 2>&1 &&
	cmake --build "$W/cmake-build" >> "$W/build-cxx.log" 2>&1; then
	pass build-cxx
else
	fail build-cxx "find_package build failed"
fi
sed 's/^/  | /' "$W/build-cxx.log" | tail -n 20
for b in "$W/session_reader" "$W/cmake-build/unwind_self"; do
	[[ -x $b ]] || continue
	echo "$b: $(readelf -d "$b" | grep -E 'NEEDED.*sframe|RUNPATH|RPATH' | tr -s ' ')"
	ldd "$b" | grep sframe
done

# ---- unwind-self, denied ----------------------------------------------------------------
step unwind-self
if as sfmember "$W/cmake-build/unwind_self" > "$W/unwind.log" 2>&1; then
	pass unwind-self
else
	fail unwind-self "exit $? as a member of group sframe"
fi
sed 's/^/  | /' "$W/unwind.log"
out=$(as sfother "$W/cmake-build/unwind_self" 2>&1)
rc=$?
echo "  | $out"
prof_out=$(cd /tmp && as sfother /usr/bin/sframe-prof record -o /tmp/denied.data -- /bin/true 2>&1)
prof_rc=$?
echo "  | $prof_out"
if [[ $rc -ne 0 && $out == *EACCES* && $prof_rc -ne 0 && $prof_out == *"group sframe"* ]]; then
	pass denied
else
	fail denied "a user outside group sframe: unwind_self exit $rc ($out), sframe-prof exit $prof_rc"
fi

# ---- session --------------------------------------------------------------------------
step session
if "$W/session_reader" > "$W/session.log" 2>&1; then
	pass session
else
	fail session "exit $?"
fi
sed 's/^/  | /' "$W/session.log" | tail -n 20

# ---- prof ---------------------------------------------------------------------------------
step prof
cd "$W" || exit 125
head -c 3000000 /usr/lib/x86_64-linux-gnu/libstdc++.so.6 > "$W/input"
if /usr/bin/sframe-prof record -F 499 -o "$W/prof.data" -- xz -6 -T1 -kf "$W/input" \
	> "$W/prof.log" 2>&1 &&
	/usr/bin/sframe-prof report -i "$W/prof.data" --folded > "$W/prof.folded" 2>> "$W/prof.log"; then
	read -r total with_main < <(awk '{n = $NF; t += n; if ($0 ~ /(^|;)(main|__libc_start_call_main)(;| )/) m += n}
		END {printf "%d %d\n", t, m}' "$W/prof.folded")
	echo "  | $total samples, $with_main reach main"
	if [[ $total -ge 50 && $((with_main * 100)) -ge $((total * 90)) ]]; then
		pass prof
	else
		fail prof "$with_main of $total samples reach main (need >= 90 % of >= 50)"
	fi
else
	fail prof "sframe-prof failed"
fi
sed 's/^/  | /' "$W/prof.log" | tail -n 10

# ---- trigger ------------------------------------------------------------------------------
step trigger
if [[ $UPGRADE != upgrade ]]; then
	skip trigger "SFrame for every library of the linker's paths runs with KERNELS=all only"
else
	before=$(find /var/cache/sframe-unwind -maxdepth 1 -type f 2>/dev/null | wc -l)
	# With the service running, the trigger asks it to scan again instead.
	service=no
	[[ -d /run/systemd/system ]] && systemctl --quiet is-active sframe-coverd.service && service=yes
	scans=$(coverd_field process_scans)
	lib=$(ls "$W/debs/libsframe-client0_"*.deb | head -n 1)
	# dpkg -i of a package already installed: it is unpacked again, its
	# /usr/lib/... files activate sframe-tools's trigger, processed at the
	# end of this dpkg run.
	dpkg -i "$lib" > "$W/trigger.log" 2>&1
	rc=$?
	sed 's/^/  | /' "$W/trigger.log" | tail -n 15
	after=$(find /var/cache/sframe-unwind -maxdepth 1 -type f 2>/dev/null | wc -l)
	status=$(dpkg-query -W -f='${db:Status-Abbrev}' sframe-tools 2>/dev/null)
	echo "  | cache files: $before before, $after after; sframe-tools '$status'"
	if [[ $rc -ne 0 ]]; then
		fail trigger "dpkg -i exited $rc"
	elif [[ $status != "ii " ]]; then
		fail trigger "sframe-tools is '$status' after its trigger, not installed (ii)"
	elif [[ $service == yes ]]; then
		if wait_for '[[ $(coverd_field process_scans) -gt ${scans:-0} ]]' 120; then
			pass trigger
		else
			fail trigger "the running service did not scan again (process_scans ${scans:-?})"
		fi
	elif ! grep -q '^sframe-coverd: cache /var/cache/sframe-unwind: ' "$W/trigger.log"; then
		fail trigger "the trigger did not run sframe-coverd --once --cache-only (no summary line)"
	elif grep -q 'sframe-tools: ' "$W/trigger.log"; then
		fail trigger "sframe-coverd --once --cache-only failed (above)"
	elif ! grep -Eq '^sframe-coverd: cache .*: ([1-9][0-9]* sections made|[0-9]+ sections made, [1-9][0-9]* up to date)' \
		"$W/trigger.log"; then
		fail trigger "no library's section made or found in /var/cache/sframe-unwind"
	else
		pass trigger
	fi
fi

# ---- upgrade ------------------------------------------------------------------------------
step upgrade
if [[ $UPGRADE != upgrade ]]; then
	skip upgrade "a second kernel's DKMS build runs with KERNELS=all only"
elif [[ -z $other_kernel ]]; then
	fail upgrade "no second kernel with headers to upgrade to"
else
	mv "/lib/modules/$other_kernel/build.hidden" "/lib/modules/$other_kernel/build"
	# What installing linux-image-$other_kernel runs.
	/etc/kernel/postinst.d/dkms "$other_kernel" > "$W/upgrade.log" 2>&1
	sed 's/^/  | /' "$W/upgrade.log" | tail -n 15
	if modinfo -k "$other_kernel" -F filename sframe_unwind 2>/dev/null | grep -q updates/dkms; then
		pass upgrade
	else
		fail upgrade "no module for $other_kernel after its postinst hook"
	fi
fi
dkms status -m sframe-unwind

# ---- remove -------------------------------------------------------------------------------
step remove
for p in "${PKGS[@]}"; do dpkg -L "$p" 2>/dev/null; done | sort -u > "$W/files.list"
if apt-get remove -y "${PKGS[@]}" > "$W/remove.log" 2>&1; then
	left=()
	while read -r f; do
		[[ -e $f && ! -d $f ]] && left+=("$f")
	done < "$W/files.list"
	mods=$(find /lib/modules -name 'sframe_unwind.ko*' 2>/dev/null)
	trees=$(ls -d /var/lib/dkms/sframe-unwind /usr/src/sframe-unwind-* 2>/dev/null)
	if [[ ${#left[@]} -eq 0 && -z $mods && -z $trees ]]; then
		pass remove
	else
		fail remove "left behind: ${left[*]} $mods $trees"
	fi
else
	fail remove "apt-get remove exited $?"
fi
sed 's/^/  | /' "$W/remove.log" | tail -n 15
grep '^sframe_unwind ' /proc/modules && echo "(module still loaded: removing a package does not unload it)"

echo
echo "package test: $failures failure(s)"
exit "$failures"
