# Shared helpers of the VM rig (sourced by scripts/dkms-install.sh and
# tests/vm/run-vm.sh).  Bash.

# The kernel version the VM boots and DKMS builds for: the newest kernel that
# has /lib/modules/<ver>/build (headers) and whose /boot/vmlinuz-<ver> belongs
# to a Debian linux-image-<ver> package.  Never the host's `uname -r`: the
# host kernel has no module support and no headers.  SFRAME_KVER overrides.
rig_default_kver() {
	if [[ -n "${SFRAME_KVER:-}" ]]; then
		echo "$SFRAME_KVER"
		return 0
	fi
	local d k best=
	for d in /lib/modules/*/build; do
		[[ -d "$d" ]] || continue
		k=${d#/lib/modules/}
		k=${k%/build}
		[[ -f "/boot/vmlinuz-$k" ]] || continue
		dpkg-query -W -f='${db:Status-Abbrev}' "linux-image-$k" 2>/dev/null |
			grep -q '^ii' || continue
		best+="$k"$'\n'
	done
	best=$(printf '%s' "$best" | sort -V | tail -n 1)
	[[ -n "$best" ]] || return 1
	echo "$best"
}

# Read PACKAGE_NAME / PACKAGE_VERSION from a dkms.conf.
rig_dkms_field() { # FILE FIELD
	sed -n "s/^$2=\"\\{0,1\\}\\([^\"]*\\)\"\\{0,1\\}\$/\\1/p" "$1" | head -n 1
}
