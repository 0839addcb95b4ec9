#!/usr/bin/env python3
"""The tables of bench/coverd_guest.sh, from the directory it filled.

Per workload and program (comm, with at least 20 samples): the samples of
sframe-prof with per-process coverage (process-NAME.folded), with
sframe-coverd's file store the first time the service sees the programs
(service-NAME.folded) and after the module was reloaded and the service
started again, as after a reboot (restarted-NAME.folded), and the share whose user
stack reaches its thread's start: main, or __libc_start_main /
__libc_start_call_main (Debian's programs are stripped), or start_thread
(threads).  Of the others, the share taken in the dynamic loader's start-up
before main exists (_dl_start, dl_main, _dl_sysdep_start, _dl_start_user:
no stack of those can reach main) and the share without a user stack:
no user frame at all (taken in the kernel during exit: the module unwinds
a user stack at the return to user space, which an exiting task never
makes), or taken in execve after the old image was dropped (a kernel
frame that load_elf_binary() reaches only after begin_new_exec():
setup_new_exec, setup_arg_pages, elf_map, ...): the user registers still
hold the old program's PC, which no mapping of the new one contains (one
frame the report cannot name, "[unknown]"), and there is no stack behind
it for any unwinder to walk.
Each cell: "reach main % / complete % / complete % of the samples with a
user stack, of samples", where complete also counts the stacks taken
before main exists whose walk reached the entry of the thread (the
loader's _start, or clone3 before start_thread), and the last share leaves
out the samples without any user frame.
Then the program started during the -a recording (its first samples), and
memory.txt and exec-to-coverage.txt as written.  Prints Markdown."""
import os
import re
import sys

from stacks import add, classify, folded_frames, perf_script, user_frames

WORKLOADS = ["python3", "perl", "xz", "zstd", "sqlite3", "sort", "openssl", "node", "gxx", "make"]


def folded(path):
    out = {}
    try:
        f = open(path)
    except OSError:
        return out
    with f:
        for line in f:
            stack, _, count = line.rstrip("\n").rpartition(" ")
            if not stack:
                continue
            frames = stack.split(";")
            add(out, frames[0], frames[1:], int(count))
    return out


def cell(t):
    if not t or not t["all"]:
        return "-"
    a = t["all"]
    complete = t["main"] + t["loader"]
    # Of the samples with a user stack: a task in exit, or in execve past
    # its old image, has none to unwind, for any unwinder.
    with_user = a - t["nouser"]
    of_user = f"{100.0 * complete / with_user:.1f} %" if with_user else "-"
    return (f"{100.0 * t['main'] / a:.1f} % / {100.0 * complete / a:.1f} % / {of_user} of {a} "
            f"(no user stack {100.0 * t['nouser'] / a:.1f})")


def late_program(d):
    """The first samples of the process started during the -a recording,
    from its exec on: the shell forked it before, and the report names
    those samples by the process's last comm too.  Its exec shows as the
    first sample in the dynamic loader (what an exec'd program runs
    first)."""
    try:
        pid = open(os.path.join(d, "late.txt")).read().split()[-1]
    except OSError:
        return
    mine = []  # (time, frames root first)
    for head, frames in perf_script(os.path.join(d, "all.script")):
        parts = head.split()
        m = re.search(r"\s(\d+\.\d+):", head)
        if len(parts) > 1 and parts[1].split("/")[0] == pid and m:
            mine.append((float(m.group(1)), folded_frames(frames)))
    mine.sort(key=lambda t: t[0])
    start = next((i for i, (_, root_first) in enumerate(mine)
                  if any("ld-linux" in fr or fr.startswith("_dl_") or fr == "dl_main"
                         for fr in user_frames(root_first))), None)
    if start is None:
        print(f"\nprogram started during the -a recording (pid {pid}): no sample after its exec")
        return
    after = [classify(root_first) for _, root_first in mine[start:]]
    first = after[:10]
    print(f"\nprogram started during the -a recording (pid {pid}): {len(mine) - start} samples "
          f"from its exec on ({start} before it, in the shell that forked it); first 10: "
          f"{first.count('main') + first.count('loader')} complete ({first.count('main')} reach "
          f"main, {first.count('loader')} in the loader's start-up down to its entry), "
          f"{first.count('nouser')} without a user stack, {first.count('other')} incomplete; all "
          f"from its exec on: {after.count('main')} reach main, "
          f"{after.count('main') + after.count('loader')} complete of {len(after)}")


def main():
    d = sys.argv[1]
    print("| workload | program | per-process coverage | sframe-coverd's store, first run | "
          "sframe-coverd's store after a reboot |")
    print("|---|---|---|---|---|")
    for w in WORKLOADS:
        p = folded(os.path.join(d, f"process-{w}.folded"))
        s = folded(os.path.join(d, f"service-{w}.folded"))
        r = folded(os.path.join(d, f"restarted-{w}.folded"))
        comms = sorted({c for v in (p, s, r) for c in v if v[c]["all"] >= 20},
                       key=lambda c: -max(v.get(c, {"all": 0})["all"] for v in (p, s, r)))
        for c in comms:
            print(f"| {w} | {c} | {cell(p.get(c))} | {cell(s.get(c))} | {cell(r.get(c))} |")
    print("\nWhere the incomplete stacks end (their outermost user frame; the three most "
          "frequent per run and program):\n")
    for w in WORKLOADS:
        for tag in ("process", "service", "restarted"):
            for comm, t in sorted(folded(os.path.join(d, f"{tag}-{w}.folded")).items()):
                if t["all"] < 20 or not t["ends"]:
                    continue
                top = sorted(t["ends"].items(), key=lambda kv: -kv[1])[:3]
                print(f"    {tag} {w} {comm}: {t['other']} of {t['all']}: " +
                      ", ".join(f"{n} {name}" for name, n in top))
    late_program(d)
    for name in ("memory.txt", "idle.txt", "exec-to-coverage.txt"):
        try:
            print(f"\n{name}:\n")
            for line in open(os.path.join(d, name)):
                print("    " + line.rstrip("\n"))
        except OSError:
            pass


main()
