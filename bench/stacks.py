"""How the benchmarks that profile Debian's own programs judge a sample's
stack (bench/coverd_table.py, bench/perf_programs_table.py) and read
`perf script` output (those two and scripts/demo_table.py).

A stack reaches main when it holds main, or __libc_start_main /
__libc_start_call_main (Debian's programs are stripped: their main has no
name, the libc frames it returns to have), or start_thread (the other
threads).  Frames are names as in folded stacks: root first, kernel frames
ending in "_[k]"."""
import re

ROOT = re.compile(r"^(main|__libc_start_main.*|__libc_start_call_main|start_thread)$")
LOADER = re.compile(r"^(_dl_start|_dl_start_final|_dl_sysdep_start|dl_main|_dl_start_user)$")
# The outermost frame of a walk that went all the way: the loader's entry
# (_start of ld.so, unnamed in its symbol table: "[ld-linux-x86-64.so.2]"),
# the program's _start (a walk through frames the report could not name),
# a new thread still in clone3 before start_thread.
ENTRY = re.compile(r"^(_start|\[ld-linux-x86-64\.so\.2\]|_dl_start_user|__GI___clone3|__clone3|clone3|__clone|clone)$")

# Called by load_elf_binary() only past the point of no return of execve.
NEW_IMAGE = re.compile(r"^(setup_new_exec|setup_arg_pages|elf_map|elf_load|load_elf_interp|"
                       r"create_elf_tables|set_brk|finalize_exec)_\[k\]$")

# The lowest kernel address of x86-64 (either paging mode).
KERNEL_START = 0xff00000000000000


def function(frame):
    name = frame.split("+0x")[0]
    name = name.split("@")[0]
    return name.split("(")[0]


def user_frames(frames):
    return [f for f in frames if not f.endswith("_[k]")]


def classify(frames):
    """frames: root first, without the comm.  Returns "main" (reaches
    main/start_thread), "loader" (taken before main exists, the walk down
    to the thread's entry), "nouser" (no user stack to walk: a task in
    exit, or in execve past its old image) or "other"."""
    user = user_frames(frames)
    if not user:
        return "nouser"
    # In execve past the old image: its PC, in none of the new mappings.
    if all(f == "[unknown]" for f in user) and any(NEW_IMAGE.match(f) for f in frames):
        return "nouser"
    names = [function(f) for f in user]
    if any(ROOT.match(n) for n in names):
        return "main"
    # Before main exists (the loader's start-up, a thread being made): the
    # stack is whole when its outermost frame is the entry.
    if ENTRY.match(names[0]):
        return "loader"
    return "other"


def add(tallies, comm, frames, n=1):
    """Counts n samples of comm whose stack is frames (root first) in
    tallies[comm]: all, and per kind of classify(); for "other", its
    outermost user frame's function in "ends"."""
    t = tallies.setdefault(comm, {"all": 0, "main": 0, "loader": 0, "nouser": 0, "other": 0,
                                  "ends": {}})
    t["all"] += n
    kind = classify(frames)
    t[kind] += n
    if kind == "other":
        end = function(user_frames(frames)[0])
        t["ends"][end] = t["ends"].get(end, 0) + n


FRAME = re.compile(r"^\s*([0-9a-fA-F]+)\s+(.*?)(?:\s+\(([^()]*)\))?\s*$")


def perf_script(path):
    """The samples of a `perf script` output (perf's, or sframe-prof
    report --format perf-script): a header line, one line a frame
    ("\\t addr sym (dso)", leaf first), a blank line.  Yields (header,
    frames), frames a list of (ip, sym, dso) leaf first (dso "" where the
    output has none)."""
    head, frames = None, []
    with open(path, errors="replace") as f:
        for line in f:
            if not line.strip():
                if head is not None:
                    yield head, frames
                head, frames = None, []
            elif line[0] in " \t":
                m = FRAME.match(line)
                if m:
                    frames.append((int(m.group(1), 16), m.group(2), m.group(3) or ""))
            else:
                if head is not None:
                    yield head, frames
                head, frames = line.rstrip("\n"), []
    if head is not None:
        yield head, frames


def folded_frames(frames):
    """perf_script()'s frames (leaf first) as folded-stack names, root
    first: a kernel frame's name gets "_[k]"; ld.so's unnamed frame (its
    entry) is "[ld-linux-x86-64.so.2]", as sframe-prof's report names it."""
    out = []
    for ip, sym, dso in reversed(frames):
        if ip >= KERNEL_START or dso == "[kernel.kallsyms]":
            out.append(sym + "_[k]")
        elif sym == "[unknown]" and dso.endswith("/ld-linux-x86-64.so.2"):
            out.append("[ld-linux-x86-64.so.2]")
        else:
            out.append(sym)
    return out
