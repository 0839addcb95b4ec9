#!/usr/bin/env bash
# The corpus of the differential test libsframe_v3_diff: SFrame version 3
# sections made by Debian sid's gas and ld (binutils 2.47), and their
# comparison, PC by PC, between this project's decoder and sid's libsframe.
#
#   corpus.sh build OUT            fetch sid's binutils and libsframe
#                                  (scripts/sid-binutils.sh), build the
#                                  corpus into OUT, check with sid's readelf
#                                  that every section is version 3 and that
#                                  each kind of frame is there
#   corpus.sh check OUT CHECKER    run CHECKER (libsframe_diff, built on the
#                                  host) under sid's loader against sid's
#                                  libsframe.so.3 on every ELF of OUT
#
# The host's gcc and g++ (CC, CXX) compile; -B makes them use sid's as
# (--gsframe: version 3) and ld (which adds PC-mask FDEs for .plt, .plt.got
# and .plt.sec).  The corpus:
#   c_O2, c_O0, c_fp   tests/host/progs/shapes.c, progs/frames.c (alloca,
#                      VLAs: CFA on RBP), module/sframe_decode.c: -O2; -O0
#                      (frame-pointer rows everywhere); -O2
#                      -fno-omit-frame-pointer -fcf-protection
#   cxx_O2.so          userlib/client's C++ sources, -O2 -fPIC -shared
#   drap_O2, drap_O0   progs/drap.c with -mstackrealign: DRAP (flexible FDEs,
#                      CFA in R10, then loaded from RBP - 8)
#   cfi.so             progs/cfi.s: hand-written CFI (signal frames, CFA on
#                      other registers, remember/restore state, the
#                      outermost frame, RA and FP in registers, big offsets,
#                      a body over 64 KiB)
#   plt, libplt.so, plt_ibt, libplt_ibt.so
#                      progs/plt_*.c linked lazily, and with IBT
#                      (-fcf-protection -z ibtplt: .plt.sec)
# Every function has fewer than 8192 FREs (the decoder refuses an FDE with
# more: SFRAME_MAX_FRES_PER_FDE).  LIBSFRAME_V3_KNOWN_DIFFS=1 adds
# known_diffs.so (progs/known_diffs.s): the differences found and not yet
# settled, which fail the comparison.
#
# Any missing piece (sid's packages, a compiler, a kind of frame the tools
# no longer make) fails, saying which; nothing is skipped.
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
PROGS=$HERE/progs

die() { echo "libsframe_v3: FAIL: $*" >&2; exit 1; }

build() {
	local out=$1
	CC=${CC:-gcc}
	CXX=${CXX:-g++}
	command -v "$CC" >/dev/null || die "no C compiler ($CC)"
	command -v "$CXX" >/dev/null || die "no C++ compiler ($CXX)"

	local sid
	if ! sid=$("$ROOT/scripts/sid-binutils.sh"); then
		die "could not fetch Debian sid's binutils and libsframe (scripts/sid-binutils.sh, above): the test needs them"
	fi
	[[ -x $sid/bin/as && -x $sid/bin/ld && -x $sid/bin/readelf && -x $sid/bin/run ]] ||
		die "$sid lacks bin/as, bin/ld, bin/readelf or bin/run"
	# shellcheck source=/dev/null
	. "$sid/env"
	[[ -e $sid/$SID_LIBSFRAME ]] || die "no $sid/$SID_LIBSFRAME"
	echo "libsframe_v3: sid's binutils $SID_BINUTILS_VERSION in $sid"

	rm -rf "$out"
	mkdir -p "$out"
	echo "$sid" >"$out/sid-dir"
	local B=(-B"$sid/bin/" "-Wa,--gsframe")
	local list=()
	cc() { # cc OUTPUT ARGS...: compile and link with sid's as and ld
		local o=$1
		shift
		echo "libsframe_v3: building $o"
		"$@" -o "$out/$o" || die "building $o failed: $*"
		list+=("$o")
	}
	local csrc=("$ROOT/tests/host/progs/shapes.c" "$PROGS/frames.c"
		"$ROOT/module/sframe_decode.c" "$ROOT/host/sframe_source_mem.c")
	local cinc=(-I"$ROOT/module" -I"$ROOT/host")
	cc c_O2 "$CC" "${B[@]}" -O2 -fomit-frame-pointer "${cinc[@]}" "${csrc[@]}"
	cc c_O0 "$CC" "${B[@]}" -O0 "${cinc[@]}" "${csrc[@]}"
	cc c_fp "$CC" "${B[@]}" -O2 -fno-omit-frame-pointer -fcf-protection "${cinc[@]}" "${csrc[@]}"
	cc cxx_O2.so "$CXX" "${B[@]}" -std=c++17 -O2 -fPIC -shared \
		-DSFRAME_CLIENT_VERSION_STRING='"0"' \
		-I"$ROOT/userlib/client/include" -I"$ROOT/uapi" -I"$ROOT/userlib/internal" \
		"$ROOT"/userlib/client/src/*.cc -lpthread
	cc drap_O2 "$CC" "${B[@]}" -O2 -mstackrealign "$PROGS/drap.c"
	cc drap_O0 "$CC" "${B[@]}" -O0 -mstackrealign "$PROGS/drap.c"
	cc cfi.so "$CC" "${B[@]}" -nostdlib -shared "$PROGS/cfi.s"
	cc libplt.so "$CC" "${B[@]}" -O2 -fPIC -shared -Wl,-z,lazy "$PROGS/plt_lib.c"
	cc plt "$CC" "${B[@]}" -O2 -Wl,-z,lazy "$PROGS/plt_main.c" -L"$out" -lplt
	cc libplt_ibt.so "$CC" "${B[@]}" -O2 -fPIC -shared -fcf-protection \
		-Wl,-z,ibtplt "$PROGS/plt_lib.c"
	cc plt_ibt "$CC" "${B[@]}" -O2 -fcf-protection -Wl,-z,ibtplt \
		"$PROGS/plt_main.c" -L"$out" -lplt_ibt
	# Known differences (progs/known_diffs.s), on request only.
	if [[ ${LIBSFRAME_V3_KNOWN_DIFFS:-0} == 1 ]]; then
		cc known_diffs.so "$CC" "${B[@]}" -nostdlib -shared "$PROGS/known_diffs.s"
	fi

	# What sid's readelf says of each: version 3, and the kinds wanted.
	local f dump
	for f in "${list[@]}"; do
		dump=$("$sid/bin/readelf" --sframe "$out/$f") || die "sid's readelf --sframe $f failed"
		echo "$dump" >"$out/$f.readelf"
		grep -q 'Version: SFRAME_VERSION_3' <<<"$dump" ||
			die "$f: not SFrame version 3: $(grep -m1 'Version:' <<<"$dump")"
	done
	want() { # want FILE WHAT REGEX [MIN]: at least MIN (1) lines match
		local n
		n=$(grep -cE -- "$3" "$out/$1.readelf" || true)
		[[ $n -ge ${4:-1} ]] || die "$1: no $2 in its .sframe (readelf --sframe: $n lines match '$3')"
		printf 'libsframe_v3:   %-14s %-40s %5d\n' "$1" "$2" "$n"
	}
	echo "libsframe_v3: kinds of frames (sid's readelf --sframe: matching lines)"
	want c_O2 "-O2 FDEs" 'func idx' 30
	want c_O2 "alloca/VLA rows (CFA on FP)" '^ +[0-9a-f]+ +fp\+' 4
	want c_O0 "frame-pointer rows (-O0)" '^ +[0-9a-f]+ +fp\+16 +c-16' 50
	want c_fp "frame-pointer rows (-O2)" '^ +[0-9a-f]+ +fp\+16 +c-16' 20
	want cxx_O2.so "C++ -O2 FDEs" 'func idx' 100
	want drap_O2 "DRAP flexible FDEs" 'attr = "F"' 2
	want drap_O2 "DRAP loaded CFA (fp-8)" '^ +[0-9a-f]+ +\(fp-8\)'
	want drap_O0 "DRAP flexible FDEs (-O0)" 'attr = "F"' 2
	want cfi.so "signal-frame FDEs" 'attr = "S' 3
	want cfi.so "signal and flexible FDE" 'attr = "SF"'
	want cfi.so "CFA on R12" '^ +[0-9a-f]+ +r12\+'
	want cfi.so "CFA on RBX" '^ +[0-9a-f]+ +r3\+'
	want cfi.so "FP in a register" '^ +[0-9a-f]+ +[^ ]+ +r13\+0'
	want cfi.so "RA in a register" ' r0\+0 *$'
	want cfi.so "RA at CFA-16" ' c-16 *$'
	want cfi.so "outermost frame" 'RA undefined'
	want cfi.so "4-byte CFA offsets" '^ +[0-9a-f]+ +sp\+100016'
	want cfi.so "body over 64 KiB" 'size = 70[0-9]{3} bytes'
	want plt "PC-mask (PLT) FDEs" 'STARTPC\[m\]' 2
	want libplt.so "PC-mask (PLT) FDEs" 'STARTPC\[m\]' 2
	want plt_ibt "PC-mask FDEs (.plt, .plt.got, .plt.sec)" 'STARTPC\[m\]' 3
	want libplt_ibt.so "PC-mask FDEs (.plt, .plt.got, .plt.sec)" 'STARTPC\[m\]' 3
	printf '%s\n' "${list[@]}" >"$out/corpus.list"
	echo "libsframe_v3: corpus of ${#list[@]} ELF files in $out"
}

check() {
	local out=$1 checker=$2
	[[ -f $out/corpus.list && -f $out/sid-dir ]] ||
		die "no corpus in $out (the fixture test libsframe_v3_corpus builds it)"
	[[ -x $checker ]] || die "no checker $checker"
	local sid
	sid=$(cat "$out/sid-dir")
	# shellcheck source=/dev/null
	. "$sid/env" || die "no $sid/env (scripts/sid-binutils.sh)"
	local files=()
	while read -r f; do files+=("$out/$f"); done <"$out/corpus.list"
	[[ ${#files[@]} -gt 0 ]] || die "empty corpus"
	exec "$sid/bin/run" "$checker" --libsframe "$sid/$SID_LIBSFRAME" --version 3 "${files[@]}"
}

case ${1:-} in
build) [[ $# -eq 2 ]] || die "usage: $0 build OUT"; build "$2" ;;
check) [[ $# -eq 3 ]] || die "usage: $0 check OUT CHECKER"; check "$2" "$3" ;;
*) echo "usage: $0 build OUT | check OUT CHECKER" >&2; exit 2 ;;
esac
