#!/usr/bin/env bash
# Install everything the build and the tests need, with apt (Debian 12).
# With BENCH=1 in the environment, also what only the benchmarks use.
# With KERNELS=all in the environment (`make check KERNELS=all`), or a
# KERNELS list naming 6.1-rt or 6.12-rt, also the PREEMPT_RT kernels and
# their headers.
#
# Idempotent: checks which packages are missing and does nothing when none
# is; otherwise (as root, or through passwordless sudo) installs them with
# --no-install-recommends, running `apt-get update` first only if the package
# lists are absent or a missing package has no install candidate, and again
# once if the install fails (stale lists).  Non-interactive.
#
# Then the test tools from npm, pinned, into .cache/npm of the tree (see
# npm_tools below): missing npm or network only skips the tests using them.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
# speedscope's importers read sframe-prof's folded and perf-script output in
# userlib_test (userlib/tests/speedscope_folded.js, speedscope_perf.js);
# pprof-format, an independent reader of profile.proto, decodes its pprof
# output (userlib/tests/pprof_read.js).
NPM_PREFIX=$ROOT/.cache/npm
NPM_PKGS=(speedscope@1.25.0 pprof-format@2.3.2)
npm_tools() {
	local pkg name version have missing_npm=()
	if ! command -v npm >/dev/null; then
		echo "install-deps: npm not found: tests using ${NPM_PKGS[*]} will be skipped"
		return 0
	fi
	for pkg in "${NPM_PKGS[@]}"; do
		name=${pkg%@*}
		version=${pkg##*@}
		have=$(sed -n 's/^  "version": "\(.*\)",$/\1/p' \
			"$NPM_PREFIX/node_modules/$name/package.json" 2>/dev/null || true)
		if [[ $have == "$version" ]]; then
			echo "install-deps: npm $pkg present"
		else
			missing_npm+=("$pkg")
		fi
	done
	[[ ${#missing_npm[@]} -eq 0 ]] && return 0
	# All of them in one install: with --no-save, npm removes from the
	# prefix what the command does not name.
	if npm install --prefix "$NPM_PREFIX" --no-audit --no-fund --no-save "${NPM_PKGS[@]}"; then
		echo "install-deps: npm ${missing_npm[*]} installed in $NPM_PREFIX"
	else
		echo "install-deps: npm install ${missing_npm[*]} failed: tests using them will be skipped" >&2
	fi
}

PKGS=(
	# build
	build-essential make gcc g++ cmake pkg-config binutils
	# host tests, benchmarks, fuzzing
	libgtest-dev libgmock-dev libbenchmark-dev libelf-dev libdw-dev
	# sframe-prof report --format pprof: pprof's profile.proto as Debian
	# ships it, compiled with protoc; libprotobuf; gzip by zlib
	libprotobuf-dev protobuf-compiler golang-github-google-pprof-dev zlib1g-dev
	clang-14 libclang-rt-14-dev llvm-14
	python3
	# the kernels the VM boots (Debian 12's 6.1 and Debian 13's 6.12, the
	# latter from bookworm-security), their headers, and the module's
	# installation; 6.12's headers ship a vmlinux with BTF, so Kbuild runs
	# pahole (dwarves) on every module it builds for it
	linux-image-amd64 linux-headers-amd64
	linux-image-6.12-amd64 linux-headers-6.12-amd64 dwarves
	dkms kmod openssl
	# the VM rig (tests/vm/run-vm.sh); the Debian 13 and sid root file
	# systems it boots (tests/vm/images/build.sh)
	qemu-system-x86 busybox-static cpio xz-utils zstd util-linux coreutils
	mmdebstrap debian-archive-keyring
	# perf record, the comparison of bench/profile_vmbench in the VM
	linux-perf
	# prof_vmtest: the files a recording opens, traced
	strace
	# the flame graph's tests: its SVG parsed as XML (userlib/tests), and
	# its script run by a headless browser (userlib/tests/flamegraph_browser_test.sh)
	libxml2-dev chromium
	# the Debian packages (`make deb`, scripts/build-deb.sh)
	debhelper dh-dkms dpkg-dev fakeroot lintian
	# ABI check (scripts/abi-check.sh)
	abigail-tools
	# the package test in the VM (tests/vm/package/guest.sh): udevd applies
	# the package's rule; libc's symbols name __libc_start_call_main, the
	# frame below a stripped program's main
	udev libc6-dbg
)
# The PREEMPT_RT flavours of both kernels, for `make check KERNELS=all` (or a
# KERNELS list naming 6.1-rt / 6.12-rt; scripts/run-tests.sh passes KERNELS
# on): the VM suite boots them too.  Not installed otherwise: they are big
# and the default check does not boot them.
rt_wanted() { # KERNELS: the RT kernel packages it asks for, one a line
	local spec
	for spec in $1; do
		case $spec in
		all) printf '%s\n' linux-image-rt-amd64 linux-headers-rt-amd64 \
			linux-image-6.12-rt-amd64 linux-headers-6.12-rt-amd64 ;;
		6.1-rt) printf '%s\n' linux-image-rt-amd64 linux-headers-rt-amd64 ;;
		6.12-rt) printf '%s\n' linux-image-6.12-rt-amd64 linux-headers-6.12-rt-amd64 ;;
		esac
	done
}
mapfile -t rt_pkgs < <(rt_wanted "${KERNELS:-}" | sort -u)
PKGS+=("${rt_pkgs[@]}")
# With BENCH=1, what only the benchmarks use: bpftrace and bcc's tools
# (bench/perf_tools_guest.sh: BPF's user stacks, bpf_get_stack(), come
# from the same perf_callchain_user()), hotspot (a reader of
# perf.data, run headless under Xvfb by bench/hotspot_shot.sh, which
# drives it with xdotool and turns the screen into PNG with netpbm), some
# hundred packages of Qt and KDE that no test needs.
[[ ${BENCH:-} == 1 ]] && PKGS+=(bpftrace bpfcc-tools hotspot xvfb xauth xdotool netpbm)

SUDO=()
if [[ $(id -u) -ne 0 ]] && command -v sudo >/dev/null && sudo -n true 2>/dev/null; then
	SUDO=(sudo -n)
fi
as_root() { if [[ $(id -u) -eq 0 || ${#SUDO[@]} -gt 0 ]]; then "${SUDO[@]}" "$@"; else return 1; fi; }

# The project's own apt sources (scripts/apt/): trixie, trixie-backports and
# sid, pinned at priority 1 so that the host's bookworm packages are never
# replaced.  The VM images and the SFrame version 3 tools are resolved and
# downloaded through them.  Installed before anything else, and the lists
# refreshed once when they are new; checked afterwards: no installed package
# may have a candidate from them.
apt_sources() {
	local f dst changed=0
	for f in sources:sources.list.d/sframe-unwind.sources pref:preferences.d/sframe-unwind; do
		dst=/etc/apt/${f#*:}
		if ! cmp -s "$ROOT/scripts/apt/sframe-unwind.${f%%:*}" "$dst"; then
			as_root install -m 0644 "$ROOT/scripts/apt/sframe-unwind.${f%%:*}" "$dst" || {
				echo "install-deps: need root to install $dst" >&2
				return 1
			}
			changed=1
		fi
	done
	if [[ $changed == 1 ]] || ! compgen -G '/var/lib/apt/lists/*_dists_sid_*Packages*' >/dev/null; then
		as_root env DEBIAN_FRONTEND=noninteractive apt-get -q update || return 1
	fi
	# The pin's promise, checked: an upgrade would take nothing from them.
	local bad
	bad=$(apt-get -s -o Debug::NoLocking=1 upgrade 2>/dev/null | grep -E '^Inst .*(Debian:(1[3-9]|unstable|testing)|Debian Backports|bpo1[3-9])' || true)
	if [[ -n $bad ]]; then
		echo "install-deps: the pin of scripts/apt/sframe-unwind.pref would upgrade the host:" >&2
		echo "$bad" >&2
		return 1
	fi
	echo "install-deps: apt sources trixie, trixie-backports, sid present (priority 1)"
}
apt_sources

missing=()
for p in "${PKGS[@]}"; do
	if ! dpkg-query -W -f='${db:Status-Abbrev}' "$p" 2>/dev/null | grep -q '^ii'; then
		missing+=("$p")
	fi
done
if [[ ${#missing[@]} -eq 0 ]]; then
	echo "install-deps: all ${#PKGS[@]} packages present"
	npm_tools
	exit 0
fi
echo "install-deps: missing: ${missing[*]}"

if [[ $(id -u) -ne 0 && ${#SUDO[@]} -eq 0 ]]; then
	echo "install-deps: need root to install: ${missing[*]}" >&2
	exit 1
fi

export DEBIAN_FRONTEND=noninteractive
APT=("${SUDO[@]}" env DEBIAN_FRONTEND=noninteractive apt-get -q -y
	-o Dpkg::Options::=--force-confdef -o Dpkg::Options::=--force-confold)

need_update=0
if ! compgen -G '/var/lib/apt/lists/*_Packages*' >/dev/null; then
	need_update=1
else
	for p in "${missing[@]}"; do
		cand=$(apt-cache policy "$p" 2>/dev/null | sed -n 's/^ *Candidate: //p')
		if [[ -z $cand || $cand == "(none)" ]]; then
			need_update=1
			break
		fi
	done
fi
if [[ $need_update -eq 1 ]]; then
	"${APT[@]}" update
fi

if ! "${APT[@]}" install --no-install-recommends "${missing[@]}"; then
	echo "install-deps: install failed; refreshing the package lists and retrying" >&2
	"${APT[@]}" update
	"${APT[@]}" install --no-install-recommends "${missing[@]}"
fi

still=()
for p in "${missing[@]}"; do
	dpkg-query -W -f='${db:Status-Abbrev}' "$p" 2>/dev/null | grep -q '^ii' || still+=("$p")
done
if [[ ${#still[@]} -gt 0 ]]; then
	echo "install-deps: still missing after apt-get: ${still[*]}" >&2
	exit 1
fi
echo "install-deps: installed ${missing[*]}"
npm_tools
