#!/usr/bin/env python3
"""The table of bench/children_make.sh, from what it left in one directory:
sframe-cold.folded, sframe-warm.folded (sframe-prof report --folded) and
perf-dwarf.script (perf script -F comm,tid,ip,sym).  Per program (comm):
samples, and the share whose stack reaches main or a frame outside it
(__libc_start_main: Debian's programs are stripped, main has no name).
Prints Markdown."""
import os
import re
import sys

ROOT = re.compile(r"^(main|__libc_start_main.*|__libc_start_call_main)$")


def function(frame):
    name = frame.split("+0x")[0]
    name = name.split("@")[0]
    return name.split("(")[0]


def folded_counts(path):
    out = {}
    with open(path) as f:
        for line in f:
            stack, _, count = line.rstrip("\n").rpartition(" ")
            if not stack:
                continue
            frames = stack.split(";")
            t = out.setdefault(frames[0], [0, 0])
            n = int(count)
            t[0] += n
            if any(ROOT.match(function(fr)) for fr in frames[1:]):
                t[1] += n
    return out


def perf_counts(path):
    out = {}
    comm, frames = None, []

    def flush():
        if comm is None:
            return
        t = out.setdefault(comm, [0, 0])
        t[0] += 1
        if any(ROOT.match(function(fr)) for fr in frames):
            t[1] += 1

    with open(path, errors="replace") as f:
        for line in f:
            if not line.strip():
                flush()
                comm, frames = None, []
            elif line[0] in " \t":
                parts = line.split()
                if len(parts) >= 2:
                    frames.append(parts[1])
            else:
                flush()
                comm, frames = line.split()[0], []
    flush()
    return out


def main():
    d = sys.argv[1]
    runs = [("sframe-prof, empty SFrame cache", folded_counts, "sframe-cold.folded"),
            ("sframe-prof, warm SFrame cache", folded_counts, "sframe-warm.folded"),
            ("perf --call-graph dwarf", perf_counts, "perf-dwarf.script")]
    counts = {}
    for label, fn, name in runs:
        try:
            counts[label] = fn(os.path.join(d, name))
        except OSError:
            counts[label] = {}
    comms = sorted({c for v in counts.values() for c in v},
                   key=lambda c: -max(v.get(c, [0])[0] for v in counts.values()))
    print("| program | " + " | ".join(label for label, _, _ in runs) + " |")
    print("|---|" + "---|" * len(runs))
    for c in comms + ["all"]:
        cells = []
        for label, _, _ in runs:
            if c == "all":
                t = [sum(v[0] for v in counts[label].values()),
                     sum(v[1] for v in counts[label].values())]
            else:
                t = counts[label].get(c, [0, 0])
            cells.append(f"{100.0 * t[1] / t[0]:.1f} % of {t[0]}" if t[0] else "-")
        print(f"| {c} | " + " | ".join(cells) + " |")


main()
