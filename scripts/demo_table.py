#!/usr/bin/env python3
"""The comparison table of `make demo`, from what scripts/demo-guest.sh left
in one directory:

  baseline.out                 "elapsed_ns N" lines of runs without profiling
  sframe-prof.out, .folded     the run under sframe-prof, its folded stacks
  sframe-prof.data             its data file
  perf-g-module.out, .script, .data  the run under perf record -g with the
                               module's perf_callchain switch on
  perf-fp.out, .script, .data  the run under perf record --call-graph fp
  perf-dwarf.out, .script, .data   ... --call-graph dwarf

A sample counts as complete when its stack reaches the root of the work:
main on the main thread, demo_thread on the others.  Prints Markdown.
"""
import os
import re
import statistics
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "bench"))
import stacks  # noqa: E402

ROOTS = {"main", "demo_thread"}
COMM = "demo_workload"


def elapsed(path):
    try:
        with open(path) as f:
            return [int(m.group(1)) for m in re.finditer(r"elapsed_ns (\d+)", f.read())]
    except OSError:
        return []


def function(frame):
    """The function of a frame name: no offset, no clone suffix, no [k]."""
    name = frame.split("+0x")[0]
    name = re.sub(r"\.(constprop|part|isra|cold)\.\d+.*$", "", name)
    return name.split("(")[0]


def folded_counts(path, comm=COMM, roots=ROOTS):
    total = complete = 0
    with open(path) as f:
        for line in f:
            line = line.rstrip("\n")
            if not line:
                continue
            stack, _, count = line.rpartition(" ")
            frames = stack.split(";")
            if frames[0] != comm:
                continue
            n = int(count)
            total += n
            if any(function(fr) in roots for fr in frames):
                complete += n
    return total, complete


def perf_counts(path, comm=COMM, roots=ROOTS):
    """perf script output (bench/stacks.py reads it)."""
    total = complete = 0
    for head, frames in stacks.perf_script(path):
        if head.startswith(comm):
            total += 1
            if any(function(sym) in roots for _, sym, _ in frames):
                complete += 1
    return total, complete


def main():
    d = sys.argv[1]
    p = lambda name: os.path.join(d, name)
    base = elapsed(p("baseline.out"))
    base_ns = statistics.median(base) if base else None
    rows = []
    for label, out, data, counter, source in [
        ("**perf record -g**, the module's perf_callchain on (sframe-coverd)",
         "perf-g-module.out", "perf-g-module.data", perf_counts, "perf-g-module.script"),
        ("**sframe-prof** (SFrame from .eh_frame)", "sframe-prof.out", "sframe-prof.data",
         folded_counts, "sframe-prof.folded"),
        ("perf --call-graph fp", "perf-fp.out", "perf-fp.data", perf_counts, "perf-fp.script"),
        ("perf --call-graph dwarf", "perf-dwarf.out", "perf-dwarf.data", perf_counts,
         "perf-dwarf.script"),
    ]:
        try:
            total, complete = counter(p(source))
        except OSError:
            rows.append(f"| {label} | (no data) | | | |")
            continue
        t = elapsed(p(out))
        slowdown = (f"{100.0 * (t[0] / base_ns - 1):+.1f} %" if t and base_ns else "?")
        size = os.path.getsize(p(data)) if os.path.exists(p(data)) else 0
        share = f"{100.0 * complete / total:.1f} % ({complete}/{total})" if total else "no samples"
        per = f"{size / total:.0f}" if total else "?"
        rows.append(f"| {label} | {share} | {per} | {slowdown} |")
    print("| profiler | samples whose stack reaches main / demo_thread | bytes per sample "
          "(data file) | workload slowdown |")
    print("|---|---|---|---|")
    for r in rows:
        print(r)
    if base:
        print()
        print(f"Baseline: median of {len(base)} unprofiled runs, "
              f"{base_ns / 1e9:.2f} s. Slowdown: one profiled run against it.")


if __name__ == "__main__":
    main()
