"""Reading the directory a guest benchmark script filled (bench/*_guest.sh):
its files as text, and info.txt's "key value" lines.  Shared by
bench/perf_programs_table.py and bench/perf_tools_table.py."""
import os


def read(path):
    """The file's text, or None if it cannot be read."""
    try:
        with open(path, errors="replace") as f:
            return f.read()
    except OSError:
        return None


def info(d):
    """info.txt of directory d as a dict, the first value of each key."""
    out = {}
    for line in (read(os.path.join(d, "info.txt")) or "").splitlines():
        key, _, value = line.partition(" ")
        out.setdefault(key, value)
    return out
