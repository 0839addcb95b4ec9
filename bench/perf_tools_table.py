#!/usr/bin/env python3
"""The tables of bench/perf_tools_guest.sh, from the directory it filled:
the kernel's user callchains as perf record -g, bpftrace's ustack and bcc's
profile get them, with perf_callchain on and off, and the perf tool's own
test suite with it off and on.

  perf_tools_table.py DIR

Per program and switch, per profiler: its samples of the program's process
and the share whose user stack reaches main (bench/stacks.py's judgement:
main, __libc_start_main / __libc_start_call_main, start_thread).  Then
perf test's verdicts counted both ways, and every case whose verdict
differs.  Prints Markdown."""
import os
import re
import sys

from guest_results import info, read
from stacks import ROOT, add, folded_frames, function, perf_script


def reaches_main(names):
    # bpftrace writes a frame "sym+DECIMAL", perf "sym+0xHEX".
    return any(ROOT.match(function(re.sub(r"\+\d+$", "", n))) for n in names)


def perf_tally(path):
    """(samples, reaching main) of a perf script's output."""
    if not os.path.exists(path):
        return None
    t = {}
    for _, frames in perf_script(path):
        add(t, "all", folded_frames(frames))
    t = t.get("all")
    return (t["all"], t["main"]) if t else (0, 0)


# bpftrace's map: "@[" then one frame a line (leaf first: "sym+off", or an
# address), then "]: COUNT".
BPFTRACE_END = re.compile(r"^\]: (\d+)$")


def bpftrace_tally(path):
    text = read(path)
    if text is None:
        return None
    total = main = 0
    frames = None
    for line in text.splitlines():
        if line.startswith("@["):
            frames = []
        elif frames is not None:
            m = BPFTRACE_END.match(line)
            if m:
                n = int(m.group(1))
                total += n
                main += n if reaches_main(frames) else 0
                frames = None
            elif line.strip():
                frames.append(line.strip())
    return total, main


def bcc_tally(path):
    """profile -f: "comm;root;...;leaf COUNT" a line."""
    text = read(path)
    if text is None:
        return None
    total = main = 0
    for line in text.splitlines():
        stack, _, count = line.rpartition(" ")
        if not stack or not count.isdigit():
            continue
        n = int(count)
        total += n
        main += n if reaches_main(stack.split(";")[1:]) else 0
    return total, main


def shown(t):
    if t is None:
        return "not run"
    total, main = t
    if total == 0:
        return "no samples"
    return f"{100.0 * main / total:.1f} % of {total}"


def counter(d, stem, key):
    def value(suffix):
        for line in (read(os.path.join(d, stem + suffix)) or "").splitlines():
            k, _, v = line.partition(" ")
            if k == key and v.strip().isdigit():
                return int(v)
        return None
    a, b = value(".stats0"), value(".stats1")
    return None if a is None or b is None else b - a


VERDICT = re.compile(r"^\s*(\d+(?:\.\d+)?):\s+(.*?)\s*:\s+(Ok|FAILED!|Skip.*)$")


def perf_test(d, on):
    out = {}
    for line in (read(os.path.join(d, f"perftest.{on}")) or "").splitlines():
        m = VERDICT.match(line)
        if m:
            verdict = m.group(3)
            out[m.group(1) + " " + m.group(2)] = "Skip" if verdict.startswith("Skip") else verdict
    return out


def main():
    d = sys.argv[1]
    meta = info(d)
    programs = meta.get("programs", "").split()
    print(f"Kernel {meta.get('kernel', '?')}, {meta.get('perf', '?')}, "
          f"{meta.get('bpftrace', '?')}, bcc {meta.get('bcc', '?')}; {meta.get('hz', '?')} Hz "
          f"for {meta.get('seconds', '?')} s each, on one long-running process per program.\n")
    if programs:  # perf_tools_guest.sh's PROGRAM none: perf test alone
        print("| program | perf_callchain | perf record -g | bpftrace ustack | bcc profile -U "
              "| callchain_served |")
        print("|---|---|---|---|---|---|")
    for name in programs:
        for on in ("Y", "N"):
            stem = os.path.join(d, f"{name}.{on}")
            served = counter(d, f"{name}.{on}", "callchain_served")
            print(f"| {name} | {on} | {shown(perf_tally(stem + '.perf.script'))} | "
                  f"{shown(bpftrace_tally(stem + '.bpftrace'))} | "
                  f"{shown(bcc_tally(stem + '.bcc'))} | {served if served is not None else '?'} |")

    off, on = perf_test(d, "N"), perf_test(d, "Y")
    if off or on:
        print("\n`perf test`, every case the VM runs:\n")
        print("| perf_callchain | Ok | FAILED! | Skip | time |")
        print("|---|---|---|---|---|")
        for switch, verdicts in (("N", off), ("Y", on)):
            counts = {v: sum(1 for x in verdicts.values() if x == v) for v in ("Ok", "FAILED!", "Skip")}
            took = (read(os.path.join(d, f"perftest.{switch}.time")) or "?").strip()
            print(f"| {switch} | {counts['Ok']} | {counts['FAILED!']} | {counts['Skip']} | {took} |")
        for switch, verdicts in (("N", off), ("Y", on)):
            failed = [k for k, v in verdicts.items() if v == "FAILED!"]
            print(f"\nFAILED! with perf_callchain={switch}: " + ("; ".join(failed) or "none"))
        differ = sorted(k for k in set(off) | set(on) if off.get(k) != on.get(k))
        print(f"\nCases whose verdict differs: {len(differ)}")
        for k in differ:
            print(f"    {k}: off {off.get(k, 'absent')}, on {on.get(k, 'absent')}")


if __name__ == "__main__":
    main()
