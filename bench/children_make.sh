#!/usr/bin/env bash
# Records `make -j2` of a small generated C project (FILES files of C, built
# with -O2 -fomit-frame-pointer: make, sh, gcc, cc1, as, collect2 and ld as
# Debian ships them, none with frame pointers or .sframe) end to end with
# `sframe-prof record -- make -j2` (following every descendant; once with an
# empty SFrame cache, once with the cache the first run filled) and with
# `perf record --call-graph dwarf -- make -j2`, in one VM run.  The reports
# are made on the host afterwards by bench/children_make_report.sh (the
# guest runs the host's root file system: same binaries, same symbols;
# under emulation `perf script` on 800 MB of DWARF samples and the reports
# take longer than the rig allows):
#
#   tests/vm/run-vm.sh --run "$PWD/bench/children_make.sh $PWD/build 6" build vm-out/make
#   bench/children_make_report.sh build vm-out/make/results/children_make
#
# Debian's programs are stripped: main has no name there, so a stack counts
# as reaching main when it reaches main or a frame outside it
# (__libc_start_main, which calls main through __libc_start_call_main).
set -uo pipefail

BUILD=${1:?usage: children_make.sh BUILD_DIR [FILES] [HZ]}
FILES=${2:-8}
HZ=${3:-1000}
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
PROF=$BUILD/userlib/sframe-prof
OUT=${SFRAME_VM_RESULTS:-/tmp}/children_make
PROJ=/tmp/children-make-project
mkdir -p "$OUT" "$PROJ"

# The project: FILES sources of 40 functions each, and a program of them.
for ((f = 0; f < FILES; f++)); do
	{
		echo "#include <stdint.h>"
		for ((i = 0; i < 40; i++)); do
			cat <<C
uint64_t f${f}_${i}(const uint64_t *v, int n, uint64_t seed)
{
	uint64_t h = seed ^ ${i}u;
	for (int k = 0; k < n; k++) {
		h ^= v[k] + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2);
		if ((h & 7) == ${i} % 8)
			h = h * 31 + (uint64_t)k * ${f};
		else
			h = (h >> 3) | (h << 61);
	}
	for (int k = 0; k < (int)(h & 15); k++)
		h += v[(k * 7) % (n ? n : 1)] * (uint64_t)(k + ${i});
	return h;
}
C
		done
	} > "$PROJ/file$f.c"
done
{
	echo "#include <stdint.h>"
	echo "#include <stdio.h>"
	for ((f = 0; f < FILES; f++)); do echo "uint64_t f${f}_0(const uint64_t *v, int n, uint64_t seed);"; done
	echo "int main(void) { uint64_t v[4] = {1, 2, 3, 4}, h = 0;"
	for ((f = 0; f < FILES; f++)); do echo "	h += f${f}_0(v, 4, h);"; done
	echo "	printf(\"%llu\\n\", (unsigned long long)h); return 0; }"
} > "$PROJ/main.c"
{
	echo "CFLAGS = -O2 -fomit-frame-pointer"
	printf 'OBJS = main.o'
	for ((f = 0; f < FILES; f++)); do printf ' file%d.o' "$f"; done
	echo
	printf 'prog: $(OBJS)\n\t$(CC) -o $@ $(OBJS)\n'
	printf '%%.o: %%.c\n\t$(CC) $(CFLAGS) -c $<\n'
	printf 'clean:\n\trm -f prog $(OBJS)\n'
} > "$PROJ/Makefile"

run() { # LABEL COMMAND...
	local label=$1 t0 t1
	shift
	make -s -C "$PROJ" clean
	sync
	t0=$(date +%s.%N)
	"$@" > "$OUT/$label.out" 2> "$OUT/$label.err"
	echo "exit $?" >> "$OUT/$label.out"
	t1=$(date +%s.%N)
	echo "$label: $(awk -v a="$t0" -v b="$t1" 'BEGIN{printf "%.1f", b-a}') s" | tee -a "$OUT/times.txt"
}

cd "$OUT" || exit 1
rm -f times.txt
rm -rf /var/cache/sframe-unwind
run warm-up make -j2 -C "$PROJ"  # reads the compilers once: page cache, not measured
run plain make -j2 -C "$PROJ"
run sframe-cold "$PROF" record -F "$HZ" -o sframe-cold.data -- make -j2 -C "$PROJ"
run perf-dwarf perf record -q -e cpu-clock -F "$HZ" --call-graph dwarf -o perf-dwarf.data \
	-- make -j2 -C "$PROJ"
run sframe-warm "$PROF" record -F "$HZ" -o sframe-warm.data -- make -j2 -C "$PROJ"
ls -l sframe-cold.data sframe-warm.data perf-dwarf.data
