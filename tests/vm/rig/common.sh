# Shared helpers of the VM rig (sourced by scripts/dkms-install.sh,
# scripts/run-tests.sh and tests/vm/run-vm.sh).  Bash.

# Every kernel the rig can boot and DKMS can build for, oldest first: a
# kernel that has /lib/modules/<ver>/build (headers) and whose
# /boot/vmlinuz-<ver> belongs to an installed Debian linux-image-<ver>
# package.  Never the host's `uname -r`: the host kernel has no module
# support and no headers.
rig_installed_kvers() {
	local d k list=
	for d in /lib/modules/*/build; do
		[[ -d "$d" ]] || continue
		k=${d#/lib/modules/}
		k=${k%/build}
		[[ -f "/boot/vmlinuz-$k" ]] || continue
		dpkg-query -W -f='${db:Status-Abbrev}' "linux-image-$k" 2>/dev/null |
			grep -q '^ii' || continue
		list+="$k"$'\n'
	done
	printf '%s' "$list" | sort -V
}

# Is KVER a PREEMPT_RT flavour?  Debian names them <ver>-rt-<arch>; the
# headers' .config is asked too, for kernels named otherwise.
rig_kver_is_rt() { # KVER
	[[ $1 == *-rt-* || $1 == *-rt ]] && return 0
	grep -q '^CONFIG_PREEMPT_RT=y' "/lib/modules/$1/build/.config" 2>/dev/null
}

# The guest root file systems besides the host's own (tests/vm/images/):
# whole Debian systems made by tests/vm/images/build.sh, each a directory
# with a .sframe-image file, in SFRAME_IMAGE_CACHE.  One line per image,
# "NAME DIR", in the order a bare series is looked up (trixie before sid);
# the newest build of a name if there are several.
RIG_IMAGE_ORDER=(trixie sid)
rig_images() {
	local cache=${SFRAME_IMAGE_CACHE:-/var/cache/sframe-unwind/images} n d best
	for n in "${RIG_IMAGE_ORDER[@]}"; do
		best=
		for d in "$cache/$n"-*/; do
			d=${d%/}
			[[ -f $d/.sframe-image ]] || continue
			[[ -z $best || $d/.sframe-image -nt $best/.sframe-image ]] && best=$d
		done
		[[ -n $best ]] && echo "$n $best"
	done
	return 0
}

# The root file system a kernel belongs to: "/" for the host's kernels,
# the image's directory for an image's.  Fails if KVER is nowhere.
rig_kver_root() { # KVER
	local n d
	if [[ -d /lib/modules/$1/build && -f /boot/vmlinuz-$1 ]]; then
		echo /
		return 0
	fi
	while read -r n d; do
		if [[ -d $d/lib/modules/$1/build && -f $d/boot/vmlinuz-$1 ]]; then
			echo "$d"
			return 0
		fi
	done < <(rig_images)
	return 1
}

# An image's kernels with headers, oldest first.
rig_image_kvers() { # DIR
	local d k list=
	for d in "$1"/lib/modules/*/build; do
		[[ -d $d ]] || continue
		k=${d#"$1"/lib/modules/}
		k=${k%/build}
		[[ -f $1/boot/vmlinuz-$k ]] && list+="$k"$'\n'
	done
	printf '%s' "$list" | sort -V
}

# The newest kernel named by SPEC: a series, "6.1", "6.12", "7.3" (the
# generic flavour), "6.1-rt" ... (PREEMPT_RT), or an exact version
# ("6.12.117+deb12-amd64"); a series may name its system, "trixie:6.12"
# (an image's) or "host:6.12" (bookworm's).  A bare series is the host's
# if the host has it, else the first image's that has it (rig_images).
# Fails if none.
rig_resolve_kver() { # SPEC
	local spec=$1 series rt=0 k best= where= n d
	if rig_kver_root "$spec" > /dev/null; then
		echo "$spec"
		return 0
	fi
	if [[ $spec == *:* ]]; then
		where=${spec%%:*}
		spec=${spec#*:}
	fi
	series=$spec
	if [[ $spec == *-rt ]]; then
		series=${spec%-rt}
		rt=1
	fi
	[[ $series =~ ^[0-9]+\.[0-9]+$ ]] || return 1
	pick() { # reads kernel versions, oldest first
		while IFS= read -r k; do
			[[ $k == "$series".* ]] || continue
			if rig_kver_is_rt "$k"; then
				[[ $rt == 1 ]] || continue
			else
				[[ $rt == 0 ]] || continue
			fi
			best=$k
		done
	}
	if [[ -z $where || $where == host ]]; then
		pick < <(rig_installed_kvers)
	fi
	if [[ -z $best && $where != host ]]; then
		while read -r n d; do
			[[ -z $where || $where == "$n" ]] || continue
			pick < <(rig_image_kvers "$d")
			[[ -n $best ]] && break
		done < <(rig_images)
	fi
	[[ -n $best ]] || return 1
	echo "$best"
}

# Run a command in a kernel's root file system: as it is for the host's, in
# a chroot of the image (with /dev, /proc and /sys, in a mount namespace of
# its own, so nothing stays mounted) for an image's.  Needs root for images.
rig_in_root() { # ROOT CMD...
	local root=$1
	shift
	if [[ $root == / ]]; then
		"$@"
		return
	fi
	unshare --mount --propagation private -- bash -c '
		r=$1; shift
		mount --rbind /dev "$r/dev" && mount -t proc proc "$r/proc" &&
			mount -t sysfs sysfs "$r/sys" && mount -t tmpfs tmpfs "$r/tmp" || exit 125
		exec chroot "$r" /usr/bin/env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin LANG=C.UTF-8 \
			${SFRAME_UNWIND_TEST_HOOKS:+SFRAME_UNWIND_TEST_HOOKS=$SFRAME_UNWIND_TEST_HOOKS} "$@"
	' rig_in_root "$root" "$@"
}

# The kernel version the VM boots and DKMS builds for when none is named:
# SFRAME_KVER if set; else the newest Debian 12 kernel (the 6.1 series,
# generic flavour), the module's first target and the kernel every figure
# in docs/ was measured on; else the newest installed kernel.  (Installing
# 6.12 beside 6.1 must not change what `make demo`, the benchmarks or a
# tree's `run-vm.sh` boot by default: scripts/run-tests.sh names its
# kernels, see KERNELS there.)
rig_default_kver() {
	if [[ -n "${SFRAME_KVER:-}" ]]; then
		echo "$SFRAME_KVER"
		return 0
	fi
	rig_resolve_kver 6.1 && return 0
	local best
	best=$(rig_installed_kvers | tail -n 1)
	[[ -n "$best" ]] || return 1
	echo "$best"
}

# Read PACKAGE_NAME / PACKAGE_VERSION from a dkms.conf.
rig_dkms_field() { # FILE FIELD
	sed -n "s/^$2=\"\\{0,1\\}\\([^\"]*\\)\"\\{0,1\\}\$/\\1/p" "$1" | head -n 1
}
