#!/usr/bin/env python3
"""The table of bench/perf_programs_guest.sh, from the directory it filled:
stock perf on Debian's own programs, per program and way of recording.

  perf_programs_table.py DIR

Per program, the samples of its own comm (cc1plus for g++: the compiler
proper; the workload's other processes are listed below the table) in
round 1's `perf script`: the share whose user stack reaches main (main,
__libc_start_main / __libc_start_call_main: Debian's programs are
stripped; start_thread for other threads), and the share that is
complete: those, and the stacks taken before main exists whose walk
reached the thread's entry (the loader's start-up).  bench/stacks.py
judges them, as for bench/coverd_table.py.  Bytes per sample: round 1's
data file over all its samples.  Slowdown: the median of the rounds'
wall times against the median of the runs without perf; for openssl
speed, which runs for a fixed time, its hashed bytes instead.  The
module's counters (callchain_*): round 1's difference, on the rows with
the switch on.  Below the table, round by round: how far the runs
without perf spread, and -g's and fp,defer's measure over fp's of the
same round.  Prints Markdown."""
import os
import re
import statistics
import sys

from guest_results import info, read
from stacks import add, folded_frames, perf_script

ROWS = [
    ("g", "`perf record -g`, perf_callchain=Y"),
    ("fp", "`perf record --call-graph fp`, perf_callchain=N"),
    ("dwarf", "`perf record --call-graph dwarf`, perf_callchain=N"),
    ("defer", "`perf record --call-graph fp,defer`, perf_callchain=Y"),
]
COMM = {"gxx": "cc1plus"}
COUNTERS = ("callchain_served", "callchain_declined", "callchain_fp_continued")


def work(d, name, row, r):
    """A run's measure: its wall time, or for openssl speed the seconds it
    would take to hash a fixed amount at the run's rate (so that, as for
    the others, more is slower)."""
    err = read(os.path.join(d, f"{name}.{row}.{r}.err"))
    done = re.findall(r"for (\d+)s on (\d+) size blocks: (\d+) ", err or "")
    if done:
        hashed = sum(int(size) * int(n) for _, size, n in done)
        seconds = sum(int(s) for s, _, _ in done)
        return seconds / hashed * 1e9 if hashed else None
    t = read(os.path.join(d, f"{name}.{row}.{r}.time"))
    try:
        return float(t)
    except (TypeError, ValueError):
        return None


def median_work(d, name, row, runs):
    values = [v for v in (work(d, name, row, r) for r in range(1, runs + 1)) if v]
    return (statistics.median(values), len(values)) if values else (None, 0)


def round_ratios(d, name, row, runs):
    """Each round's measure of row over fp's in the same round.  The load
    of an emulated host drifts between rounds far more than any method
    differs (runs without perf vary up to twofold), so a ratio inside one
    round reads the cost that the medians of separate runs blur."""
    out = []
    for r in range(1, runs + 1):
        a, b = work(d, name, row, r), work(d, name, "fp", r)
        if a and b:
            out.append(a / b)
    return out


def tallies(path):
    """Per comm: bench/stacks.py's counts of a perf script output."""
    out = {}
    if not os.path.exists(path):
        return None
    for head, frames in perf_script(path):
        comm = head.rsplit(None, 1)[0] if len(head.split()) > 1 else head.strip()
        add(out, comm, folded_frames(frames))
    return out


def counters(d, name, row):
    def parse(text):
        return {m.group(1): int(m.group(2))
                for m in re.finditer(r"^(callchain_\w+)\s+(\d+)", text or "", re.M)}
    before = parse(read(os.path.join(d, f"{name}.{row}.1.stats0")))
    after = parse(read(os.path.join(d, f"{name}.{row}.1.stats1")))
    if not before or not after:
        return None
    return {k: after.get(k, 0) - before.get(k, 0) for k in after}


def pct(n, total):
    return f"{100.0 * n / total:.1f} % ({n}/{total})" if total else "-"


def main():
    d = sys.argv[1]
    meta = info(d)
    runs = int(meta.get("runs", "1"))
    programs = meta.get("programs", "").split()
    skipped = {line.split()[1] for line in (read(os.path.join(d, "info.txt")) or "").splitlines()
               if line.startswith("skipped ")}
    print(f"Kernel {meta.get('kernel', '?')}, {meta.get('perf', '?')}, cpu-clock at "
          f"{meta.get('hz', '?')} Hz, {runs} rounds, {meta.get('date', '?')}.\n")
    print("| program (comm) | recorded with | reaches main / start_thread | complete "
          "(with the loader's start-up) | bytes / sample | slowdown | module: served / "
          "declined / fp_continued |")
    print("|---|---|---|---|---|---|---|")
    others, ends, notes, rounds = [], [], [], []
    for name in programs:
        if name in skipped:
            notes.append(f"{name}: not installed, skipped")
            continue
        comm = COMM.get(name, name)
        base, nbase = median_work(d, name, "base", runs)
        if not base:
            shown = "?"
        elif name == "openssl":
            shown = f"{1000 / base:.0f} MB/s hashed"
        else:
            shown = f"{base:.2f} s"
        print(f"| {name} ({comm}) | without perf | | | | {shown}, median of {nbase} | |")
        bases = [v for v in (work(d, name, "base", r) for r in range(1, runs + 1)) if v]
        line = (f"{name}: without perf max/min {max(bases) / min(bases):.2f}"
                if bases else f"{name}: no run without perf")
        for row in ("g", "defer"):
            ratios = round_ratios(d, name, row, runs)
            if ratios:
                line += (f"; {row} over fp " + " ".join(f"{x:.2f}" for x in ratios)
                         + f", median {statistics.median(ratios):.2f}")
        rounds.append(line)
        for row, label in ROWS:
            t = tallies(os.path.join(d, f"{name}.{row}.script"))
            if t is None:
                continue
            mine = t.get(comm, {"all": 0, "main": 0, "loader": 0, "nouser": 0, "other": 0,
                                "ends": {}})
            total = sum(v["all"] for v in t.values())
            size = read(os.path.join(d, f"{name}.{row}.1.size"))
            per = f"{int(size) / total:.0f}" if size and size.strip() and total else "?"
            m, n = median_work(d, name, row, runs)
            slow = f"{100.0 * (m / base - 1):+.1f} % (median of {n})" if m and base else "?"
            c = counters(d, name, row)
            cc = " / ".join(str(c.get(k, "?")) for k in COUNTERS) if c else ""
            print(f"| {name} ({comm}) | {label} | {pct(mine['main'], mine['all'])} | "
                  f"{pct(mine['main'] + mine['loader'], mine['all'])} | {per} | {slow} | {cc} |")
            for other, v in sorted(t.items(), key=lambda kv: -kv[1]["all"]):
                if other != comm and v["all"] >= 20:
                    others.append(f"{name} {row} {other}: reaches main {pct(v['main'], v['all'])}, "
                                  f"complete {pct(v['main'] + v['loader'], v['all'])}")
            if mine["other"] or mine["nouser"]:
                top = sorted(mine["ends"].items(), key=lambda kv: -kv[1])[:3]
                ends.append(f"{name} {row}: {mine['other']} incomplete of {mine['all']}"
                            + (": " + ", ".join(f"{k} {v}" for k, v in top) if top else "")
                            + f"; {mine['nouser']} without a user stack")
            log = read(os.path.join(d, f"{name}.{row}.1.perf")) or ""
            for line in log.splitlines():
                if "lost" in line.lower() or "error" in line.lower():
                    notes.append(f"{name} {row}: perf record: {line.strip()}")
    if rounds:
        print("\nRound by round (wall time, openssl's time per byte hashed): the spread "
              "of the runs without perf, and each round's run over fp's of the same "
              "round:\n")
        for line in rounds:
            print("    " + line)
    if others:
        print("\nThe workloads' other processes (at least 20 samples):\n")
        for line in others:
            print("    " + line)
    if ends:
        print("\nWhere the incomplete stacks end (outermost user frame, the three most "
              "frequent):\n")
        for line in ends:
            print("    " + line)
    for line in notes:
        print("\n" + line)


if __name__ == "__main__":
    main()
