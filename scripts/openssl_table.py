#!/usr/bin/env python3
"""The table of scripts/openssl-guest.sh: for each workload NAME, from what
it left in DIR (NAME.sframe-prof.folded, NAME.perf.script), the share of the
openssl process's samples whose stack reaches main, with sframe-prof and
with perf --call-graph dwarf, and where the others stop.

/usr/bin/openssl is stripped, so its main has no name: a stack reaches main
when it holds main or the libc frame main returns to,
__libc_start_call_main (named from libc6-dbg's symbols; the counting is
scripts/demo_table.py's).  Prints Markdown.

  openssl_table.py DIR NAME...
"""
import collections
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import demo_table  # noqa: E402

COMM = "openssl"
ROOTS = {"main", "__libc_start_call_main"}


def share(total, complete):
    return f"{100.0 * complete / total:.1f} % ({complete}/{total})" if total else "no samples"


def folded_leaves(path, n=5):
    """The leaf functions of the incomplete stacks, most frequent first."""
    leaves = collections.Counter()
    with open(path) as f:
        for line in f:
            stack, _, count = line.rstrip("\n").rpartition(" ")
            frames = stack.split(";")
            if not frames or frames[0] != COMM:
                continue
            if any(demo_table.function(fr) in ROOTS for fr in frames):
                continue
            user = [fr for fr in frames[1:] if not (fr.endswith("_[k]") or fr == "[kernel]")]
            leaves[demo_table.function(user[-1]) if user else "(no user frame)"] += int(count)
    return ", ".join(f"{k} {v}" for k, v in leaves.most_common(n))


def main():
    d = sys.argv[1]
    print("| workload | sframe-prof: reach main | perf --call-graph dwarf: reach main "
          "| sframe-prof's incomplete stacks end in |")
    print("|---|---|---|---|")
    for name in sys.argv[2:]:
        folded = os.path.join(d, f"{name}.sframe-prof.folded")
        script = os.path.join(d, f"{name}.perf.script")
        try:
            sp = share(*demo_table.folded_counts(folded, COMM, ROOTS))
            leaves = folded_leaves(folded)
        except OSError:
            sp, leaves = "(no data)", ""
        try:
            pd = share(*demo_table.perf_counts(script, COMM, ROOTS))
        except OSError:
            pd = "(no data)"
        print(f"| {name} | {sp} | {pd} | {leaves} |")


if __name__ == "__main__":
    main()
