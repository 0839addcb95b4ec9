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

# The newest installed kernel named by SPEC: a series, "6.1" or "6.12"
# (the generic flavour), "6.1-rt" or "6.12-rt" (PREEMPT_RT), or an exact
# version ("6.12.117+deb12-amd64"), which must be installed.  Fails if none.
rig_resolve_kver() { # SPEC
	local spec=$1 series rt=0 k best=
	if [[ -d /lib/modules/$spec/build ]]; then
		echo "$spec"
		return 0
	fi
	series=$spec
	if [[ $spec == *-rt ]]; then
		series=${spec%-rt}
		rt=1
	fi
	[[ $series =~ ^[0-9]+\.[0-9]+$ ]] || return 1
	while IFS= read -r k; do
		[[ $k == "$series".* ]] || continue
		if rig_kver_is_rt "$k"; then
			[[ $rt == 1 ]] || continue
		else
			[[ $rt == 0 ]] || continue
		fi
		best=$k
	done < <(rig_installed_kvers)
	[[ -n $best ]] || return 1
	echo "$best"
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
