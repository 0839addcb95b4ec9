# shellcheck shell=bash
# shellcheck disable=SC2034,SC2153 # COVERD, CLIENT, OUT: the caller's; coverd: for it
# Sourced by the benchmarks that run Debian's own programs in the VM
# (bench/coverd_guest.sh, bench/perf_programs_guest.sh): the workloads and
# their inputs, and sframe-coverd started and waited for.  The callers set
# OUT (their results directory), COVERD and CLIENT (the build's
# sframe-coverd and sframe-client).

now() { date +%s.%N; }
since() { awk -v a="$(now)" -v b="$1" 'BEGIN { printf "%.1f", a - b }'; } # T0: seconds since

# Writes the inputs into DIR (and DIR/proj) and sets WORKLOADS: "name|command"
# each.  CXXFLAGS: added to the g++ workload's (-DNO_REGEX: the same file
# without <regex>, some five times faster to compile).
workloads_prepare() { # DIR [CXXFLAGS]
	local w=$1 f i
	mkdir -p "$w/proj"
	cat /usr/bin/perl /usr/lib/x86_64-linux-gnu/libc.so.6 | head -c 3000000 > "$w/input"
	seq -f "%09g" 1 300000 | sort -R --random-source=/usr/bin/perl > "$w/lines"
	cat > "$w/t.cc" <<'CC'
#include <algorithm>
#include <map>
#ifndef NO_REGEX
#include <regex>
#endif
#include <string>
#include <vector>
std::map<std::string, int> count_words(const std::vector<std::string>& lines) {
  std::map<std::string, int> m;
#ifndef NO_REGEX
  std::regex word("[A-Za-z]+");
  for (const auto& l : lines)
    for (std::sregex_iterator it(l.begin(), l.end(), word), end; it != end; ++it) m[it->str()]++;
#else
  for (const auto& l : lines) {
    std::string w;
    for (char c : l + " ")
      if ((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z')) w += c;
      else if (!w.empty()) { m[w]++; w.clear(); }
  }
#endif
  return m;
}
std::vector<std::pair<int, std::string>> top(const std::map<std::string, int>& m) {
  std::vector<std::pair<int, std::string>> v;
  for (const auto& kv : m) v.emplace_back(kv.second, kv.first);
  std::sort(v.rbegin(), v.rend());
  return v;
}
CC
	for f in 0 1 2 3; do
		{
			echo "#include <stdint.h>"
			for ((i = 0; i < 30; i++)); do
				echo "uint64_t f${f}_${i}(const uint64_t *v, int n, uint64_t h) { for (int k = 0; k < n; k++) { h ^= v[k] + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2); if ((h & 7) == $((i % 8))) h = h * 31 + (uint64_t)k; } return h; }"
			done
		} > "$w/proj/f$f.c"
	done
	echo 'int main(void) { return 0; }' > "$w/proj/main.c"
	cat > "$w/proj/Makefile" <<'MK'
OBJS = f0.o f1.o f2.o f3.o main.o
prog: $(OBJS)
	$(CC) -o $@ $(OBJS)
%.o: %.c
	$(CC) -O2 -c $< -o $@
MK

	# name, then the command (for bash -c).
	WORKLOADS=(
		"python3|/usr/bin/python3 -c 'sum(i*i for i in range(1500000))'"
		"perl|/usr/bin/perl -e '\$s=0; for \$i (1..1500000) { \$s += \$i*\$i }'"
		"xz|/usr/bin/xz -2 -T1 -c $w/input"
		"zstd|/usr/bin/zstd -T2 -12 -c $w/input"
		"sqlite3|/usr/bin/sqlite3 :memory: 'WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x+1 FROM c WHERE x<600000) SELECT sum(x*x) FROM c;'"
		"sort|/usr/bin/sort $w/lines"
		"openssl|/usr/bin/openssl speed -seconds 2 sha256"
		"node|/usr/bin/node -e 'let s=0; for (let i=0;i<3e7;i++) s+=i*i'"
		"gxx|/usr/bin/g++ -O2${2:+ $2} -c $w/t.cc -o $w/t.o"
		"make|make -s -B -j2 -C $w/proj"
	)
}

# The command of workload NAME (empty if there is none).
workload_command() { # NAME
	local w
	for w in "${WORKLOADS[@]}"; do
		[ "${w%%|*}" = "$1" ] && { echo "${w#*|}"; return; }
	done
}

stat_of() { $CLIENT stats | awk -v k="$1" '$1 == k { print $2 }'; }

# Starts $COVERD with its defaults (its output in $OUT/LOG; its pid in
# $coverd) and waits, at most 30 minutes, until it has looked at every file
# (waiting=0 in its status); the time that took and its counters go to
# $OUT/REPORT (default memory.txt).
start_coverd() { # LOG WHAT [REPORT]
	local t0 i w line scans
	t0=$(now)
	$COVERD > "$OUT/$1" 2>&1 &
	coverd=$!
	# Idle: nothing waiting, in a status written after its first scan of
	# the processes (the service writes one before it, with nothing
	# waiting yet).
	for ((i = 0; i < 1800; i++)); do
		sleep 1
		line=$(sed -n 2p /run/sframe-coverd/status 2> /dev/null | tr ' ' '\n')
		w=$(echo "$line" | sed -n 's/^waiting=//p')
		scans=$(echo "$line" | sed -n 's/^process_scans=//p')
		[ "$w" = 0 ] && [ "${scans:-0}" -ge 1 ] && break
	done
	echo "$2 $(since "$t0") s after its start" | tee -a "$OUT/${3:-memory.txt}"
	head -2 /run/sframe-coverd/status >> "$OUT/${3:-memory.txt}"
}
