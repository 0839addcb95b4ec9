#!/usr/bin/env bash
# The flame graph's script, run by a headless Chromium: renders a known
# folded input with `sframe-client flamegraph`, opens the SVG with a URL
# fragment (#search=..., #zoom=...) and checks the DOM Chromium dumps once
# the page has run: the script ran (data-ready), every frame is there, the
# search marked exactly the frames it should and wrote their share, the zoom
# hid and dimmed the right frames.
#
#   flamegraph_browser_test.sh SFRAME_CLIENT_TOOL
#
# Exit 77 (CTest's skip) when there is no Chromium (scripts/install-deps.sh
# installs Debian's chromium package).  CHROMIUM overrides the browser.
set -euo pipefail

tool=${1:?usage: $0 SFRAME_CLIENT_TOOL}
chromium=${CHROMIUM:-}
if [[ -z $chromium ]]; then
	for c in chromium chromium-browser google-chrome; do
		if command -v "$c" >/dev/null; then
			chromium=$c
			break
		fi
	done
fi
if [[ -z $chromium ]]; then
	echo "SKIP: no chromium (scripts/install-deps.sh installs Debian's chromium)"
	exit 77
fi

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

cat >"$tmp/in.folded" <<'EOF'
main;parse;std::vector<int>::push_back 3
main;parse;std::map<a&b>::find 2
main;work;compute 4
main;work;compute;sys_write_[k] 1
main 1
other;compute 1
EOF
"$tool" flamegraph -t 'browser test <&>' "$tmp/in.folded" >"$tmp/fg.svg"

fail=0
check() { # check WHAT GOT WANT
	if [[ $2 == "$3" ]]; then
		echo "ok: $1: $2"
	else
		echo "FAIL: $1: got '$2', want '$3'"
		fail=1
	fi
}

# dump FRAGMENT: the DOM after the page's scripts have run.
dump() {
	local t0 t1
	t0=$(date +%s%N)
	# --no-sandbox: Chromium refuses to run as root without it.  The
	# wrapper of Debian's package and Chromium itself chatter on stderr
	# (D-Bus, GPU): kept in a file, shown on failure.
	if ! timeout 120 "$chromium" --headless --no-sandbox --disable-gpu \
		--user-data-dir="$tmp/profile" --virtual-time-budget=2000 \
		--dump-dom "file://$tmp/fg.svg#$1" >"$tmp/dom" 2>"$tmp/stderr"; then
		echo "FAIL: chromium on #$1:"
		tail -20 "$tmp/stderr"
		exit 1
	fi
	t1=$(date +%s%N)
	echo "chromium #$1: $(((t1 - t0) / 1000000)) ms"
}
# attr NAME: an attribute of the root element.
attr() { grep -o "<svg [^>]*>" "$tmp/dom" | head -1 | grep -o " $1=\"[^\"]*\"" | sed 's/.*="\(.*\)"/\1/' || true; }
# frames [CLASS]: how many frame groups (with that class too).
frames() {
	grep -o '<g class="f[a-z ]*"' "$tmp/dom" | { if [[ -n ${1:-} ]]; then grep -E "[\" ]$1[\" ]"; else cat; fi; } | wc -l
}
matched_text() { grep -o '<text id="matched"[^>]*>[^<]*<' "$tmp/dom" | sed 's/.*>\(.*\)</\1/'; }

"$chromium" --version 2>/dev/null | head -1 || true

dump "search=compute"
check "script ran" "$(attr data-ready)" 1
check "frames in the DOM" "$(frames)" 10
check "data-frames" "$(attr data-frames)" 10
check "frames marked by search=compute" "$(frames m)" 2
check "magenta frames" "$(grep -c 'fill="rgb(230,0,230)"' "$tmp/dom")" 2
check "data-matched" "$(attr data-matched)" 2
check "matched share (6 of 12 samples)" "$(matched_text)" "Matched: 50.00%"
check "marked frames are compute's" \
	"$(grep -o '<g class="f m"[^>]*><title>[^<]*' "$tmp/dom" | sed 's/.*<title>//' | sort | tr '\n' '|')" \
	"compute (1 samples, 8.33%)|compute (5 samples, 41.67%)|"

# A regex with characters that need escaping in the URL and in the SVG.
dump "search=$(printf %s 'map<a&b>|^work$' | sed 's/&/%26/g; s/</%3C/g; s/>/%3E/g; s/|/%7C/g; s/\$/%24/g; s/\^/%5E/g')"
check "script ran" "$(attr data-ready)" 1
check "frames marked by map<a&b>|^work\$" "$(frames m)" 2
check "matched share (2 + 5 of 12 samples)" "$(matched_text)" "Matched: 58.33%"

# Nested matches count once: main contains everything but "other".
dump "search=main|parse"
check "frames marked by main|parse" "$(frames m)" 2
check "matched share (11 of 12)" "$(matched_text)" "Matched: 91.67%"

dump "zoom=%5Ework%24"
check "script ran" "$(attr data-ready)" 1
check "zoomed into" "$(attr data-zoomed)" work
check "ancestors dimmed (all, main)" "$(frames parent)" 2
check "frames hidden (parse and its 2, other and its 1)" "$(frames hide)" 5
check "work at full width" \
	"$(grep -o '<title>work [^<]*</title><rect x="[0-9.]*" y="[0-9]*" width="[0-9.]*"' "$tmp/dom" | grep -o 'x="[0-9.]*" y="[0-9]*" width="[0-9.]*"')" \
	'x="10.00" y="68" width="1180.00"'
check "no search" "$(frames m)" 0

dump ""
check "script ran" "$(attr data-ready)" 1
check "no search, no zoom" "$(frames m) $(frames hide) $(attr data-matched)" "0 0 "

exit $fail
