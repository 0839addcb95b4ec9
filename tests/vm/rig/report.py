#!/usr/bin/env python3
"""Judge a VM test run (called by tests/vm/run-vm.sh on the host).

Reads the results export the guest wrote (GoogleTest XML, exit codes, logs,
rig.status, dmesg.txt) and the console log, prints one line per test and per
failed check, and ends with the machine-readable line

    vm: N passed, N failed

Exit status 0 only if nothing failed.  A failure is: a failed test; a test
binary (per mode) without complete XML (crash, timeout, never ran) or with a
nonzero exit; the module not loading or its device missing; rmmod failing;
the guest kernel not being the expected one; a panic setting of the guest
(panic_on_warn, panic_on_oops, softlockup_panic, hung_task_panic, ...) not in
force; the VM not reaching its end marker (a panic stops it before); a kernel log line matching one of BAD_PATTERNS (not excused by the
allow file); a benchmark exiting nonzero.
"""
import argparse
import os
import re
import sys
import xml.etree.ElementTree as ET

END_MARKER = "SFRAME-VM-RIG-END"

# Kernel log lines that fail the run.
BAD_PATTERNS = [
    r"Oops",
    r"BUG:",
    r"WARNING:",
    r"Call Trace",
    r"\bpanic\b",
    r"Kernel panic",
    r"hung_task",
    r"blocked for more than \d+ seconds",
    r"general protection",
    r"kmemleak",
    r"UBSAN",
    r"KASAN",
    r"soft lockup",
    r"hard LOCKUP",
    r"rcu.*detected stalls",
    r"unable to handle",
    r"list_(add|del) corruption",
    r"refcount_t:",
    r"stack-protector",
    r"double fault",
]
BAD_RE = re.compile("|".join("(?:%s)" % p for p in BAD_PATTERNS))
# Lines never judged: the rig's own markers and the echo of the command line
# (which contains "panic=-1").
IGNORE_RE = re.compile(r"vmrig:|Command line:|Kernel command line:")
KLINE_RE = re.compile(r"^\[\s*\d+\.\d+\]")


class Tally:
    def __init__(self):
        self.passed = 0
        self.failed = 0
        self.skipped = 0
        self.disabled = 0

    def ok(self, what):
        self.passed += 1
        print("  PASS  %s" % what)

    def fail(self, what, detail=None):
        self.failed += 1
        print("  FAIL  %s" % what)
        if detail:
            for line in detail.rstrip("\n").split("\n"):
                print("        | %s" % line)

    def skip(self, what):
        self.skipped += 1
        print("  SKIP  %s" % what)


def read(path, default=None):
    try:
        with open(path, errors="replace") as f:
            return f.read()
    except OSError:
        return default


def tail(text, n=25):
    if not text:
        return "(no output)"
    lines = text.rstrip("\n").split("\n")
    return "\n".join(lines[-n:])


def rc_text(rc):
    if rc is None:
        return "never ran or never finished"
    if rc in (124, 137):
        return "timed out (exit %d)" % rc
    if rc > 128:
        return "killed by signal %d" % (rc - 128)
    return "exit %d" % rc


def judge_binary(t, res, name, mode):
    base = os.path.join(res, "%s.%s" % (name, mode))
    rc_s = read(base + ".rc")
    rc = int(rc_s.strip()) if rc_s and rc_s.strip().lstrip("-").isdigit() else None
    log = read(base + ".log", "")
    label = "%s [%s]" % (name, mode)
    for line in fuzz_lines(res, name, mode):
        print("  %s %s" % (label, line))
    try:
        root = ET.parse(base + ".xml").getroot()
    except OSError:
        t.fail("%s: no XML written (%s)" % (label, rc_text(rc)), tail(log))
        return
    except ET.ParseError as e:
        t.fail("%s: incomplete XML (%s; %s)" % (label, rc_text(rc), e), tail(log))
        return
    failed_here = 0
    ncases = 0
    for case in root.iter("testcase"):
        ncases += 1
        what = "%s %s.%s" % (label, case.get("classname", "?"), case.get("name", "?"))
        tm = case.get("time")
        if tm:
            what += " (%ss)" % tm
        failures = case.findall("failure") + case.findall("error")
        if failures:
            failed_here += 1
            msgs = "\n".join((f.get("message") or f.text or "").strip() for f in failures)
            t.fail(what, msgs[:4000])
        elif case.get("status") == "notrun" or case.get("result") == "suppressed":
            t.disabled += 1
        elif case.find("skipped") is not None or case.get("result") == "skipped":
            t.skip(what)
        else:
            t.ok(what)
    if rc != 0 and failed_here == 0:
        t.fail("%s: %s though no test failed" % (label, rc_text(rc)), tail(log))
    elif ncases == 0:
        print("  NOTE  %s ran no tests (%s)" % (label, rc_text(rc)))


# The guest's panic settings, as guest-run.sh read them back (rig.status):
# what each must be for a WARN, an oops, a soft lockup, a hung task or an RCU
# stall to stop the VM (a failed run: no end marker) instead of leaving a log
# line that a test could outlive.  key -> (check, what it must be).
PANIC_SETTINGS = [
    ("kernel.panic_on_warn", lambda v: v == 1, "1"),
    ("kernel.panic_on_oops", lambda v: v == 1, "1 (oops=panic)"),
    ("kernel.softlockup_panic", lambda v: v == 1, "1"),
    ("kernel.soft_watchdog", lambda v: v == 1, "1 (the soft-lockup detector on)"),
    ("kernel.hung_task_panic", lambda v: v == 1, "1"),
    # Within a test binary's timeout (300 s), or a task stuck in D state
    # would be killed by the rig's timeout before the detector fires.
    ("kernel.hung_task_timeout_secs", lambda v: 0 < v <= 120, "between 1 and 120"),
    ("kernel.panic_on_rcu_stall", lambda v: v == 1, "1"),
    ("rcupdate.rcu_cpu_stall_suppress", lambda v: v == 0, "0 (stall warnings on)"),
]


def check_panic_settings(t, status):
    """Fails the run once per setting not in force in the guest.  Nothing
    to check when stage 2 never ran (that failure is reported elsewhere)."""
    if "stage2" not in status:
        return
    for key, good, want in PANIC_SETTINGS:
        raw = status.get(key)
        try:
            ok = raw is not None and good(int(raw))
        except ValueError:
            ok = False
        if not ok:
            t.fail("guest setting %s is %s, must be %s: a lockup, hang, stall or WARN "
                   "would not fail the run" % (key, raw if raw is not None else "not recorded",
                                               want))


def fuzz_lines(res, name, mode):
    """The lines a test program printed that start with "fuzz:" (the ioctl
    fuzzer's call counts), so that they appear in the CI log."""
    log = read(os.path.join(res, "%s.%s.log" % (name, mode)), "") or ""
    return [l for l in log.split("\n") if l.startswith("fuzz:")]


def kernel_log_problems(res, console, allow):
    """Returns (problem lines, context: the log around the first one)."""
    found = []
    context = None
    seen = set()
    sources = []
    dm = read(os.path.join(res, "dmesg.txt"))
    if dm:
        sources.append(("dmesg", dm.split("\n")))
    con = read(console, "")
    sources.append(("console", [l for l in con.split("\n") if KLINE_RE.match(l)]))
    for src, lines in sources:
        for i, line in enumerate(lines):
            if not BAD_RE.search(line) or IGNORE_RE.search(line):
                continue
            if any(a.search(line) for a in allow):
                continue
            key = re.sub(r"^\[\s*\d+\.\d+\]\s*", "", line)
            if key in seen:
                continue
            seen.add(key)
            found.append("%s: %s" % (src, line))
            if context is None:
                context = "%s, around the first problem:\n%s" % (
                    src, "\n".join(lines[max(0, i - 3):i + 40]))
    return found, context


def clock_jump(console):
    """The first forward jump of more than an hour between two consecutive
    kernel log timestamps, as (before, after), or None.  Under TCG the
    guest's TSC follows the host's clock, which has jumped by some 460,000 s
    twice in this project's runs: the kernel then reports an RCU stall (or a
    lockup) that never happened, and panics.  Said, never excused: the run
    still fails, but its log tells a reader what it was."""
    last = None
    for line in read(console, "").split("\n"):
        m = re.match(r"^\[\s*(\d+\.\d+)\]", line)
        if not m:
            continue
        now = float(m.group(1))
        if last is not None and now - last > 3600:
            return last, now
        last = now
    return None


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--results", required=True)
    ap.add_argument("--console", required=True)
    ap.add_argument("--tests", required=True)
    ap.add_argument("--kver", required=True)
    ap.add_argument("--timed-out", default="0")
    ap.add_argument("--vm-timeout", default="?")
    ap.add_argument("--qemu-rc", default="?")
    ap.add_argument("--device", default="")
    ap.add_argument("--allow", default=None)
    ap.add_argument("--run", default="")
    ap.add_argument("--no-module", default="0")
    a = ap.parse_args()
    res = a.results

    allow = []
    if a.allow:
        for line in (read(a.allow, "") or "").split("\n"):
            line = line.strip()
            if line and not line.startswith("#"):
                allow.append(re.compile(line))

    status = {}
    for line in (read(os.path.join(res, "rig.status"), "") or "").split("\n"):
        if "=" in line:
            k, v = line.split("=", 1)
            status[k] = v

    t = Tally()
    print("vm: results")

    # The VM itself.
    con = read(a.console, "") or ""
    if status.get("kernel") != a.kver:
        t.fail("guest kernel is %r, expected %s" % (status.get("kernel"), a.kver))
    if a.no_module == "1":
        if status.get("module_load") != "skipped":
            t.fail("the rig loaded a module although told not to (%s)"
                   % status.get("module_load", "never ran"))
    elif status.get("module_load") != "0":
        t.fail("module load (modprobe exit %s)" % status.get("module_load", "never ran"))
    elif a.device and status.get("device") != "0":
        t.fail("device %s missing after the module loaded" % a.device)

    check_panic_settings(t, status)

    tests = [l for l in (read(a.tests, "") or "").split("\n") if l]
    # guest-run.sh runs the programs from a bind mount of the build tree that
    # uid 65534 can enter; without it the user runs of a checkout under
    # /root (say) fail for a reason that is the rig's, not the tests'.
    if tests and status.get("build_view") == "failed":
        t.fail("the rig could not bind-mount the build tree where uid 65534 can reach it")
    for path in tests:
        name = os.path.basename(path)
        for mode in ("root", "user"):
            judge_binary(t, res, name, mode)

    if a.run:
        rc_s = (read(os.path.join(res, "run.rc")) or "").strip()
        rc = int(rc_s) if rc_s.lstrip("-").isdigit() else None
        if rc == 0:
            t.ok("--run %s" % a.run)
        else:
            t.fail("--run %s: %s" % (a.run, rc_text(rc)))

    bdir = os.path.join(res, "bench")
    if os.path.isdir(bdir):
        for f in sorted(os.listdir(bdir)):
            if f.endswith(".rc"):
                rc = int((read(os.path.join(bdir, f)) or "1").strip() or 1)
                if rc != 0:
                    out = (read(os.path.join(bdir, f[:-3] + ".stderr"), "") or
                           read(os.path.join(bdir, f[:-3] + ".txt"), ""))
                    t.fail("benchmark %s: %s" % (f[:-3], rc_text(rc)), tail(out, 10))
                else:
                    print("  BENCH %s: ok, output in %s" % (f[:-3], os.path.join(bdir, f[:-3] + ".txt")))

    if "stuck" in status:
        t.fail("a program could not be killed (stuck; later ones not run): %s"
               % status["stuck"])
    if status.get("module_load") == "0":
        if status.get("rmmod") != "0":
            t.fail("rmmod (exit %s)" % status.get("rmmod", "never ran"),
                   read(os.path.join(res, "rmmod.log"), ""))

    problems, context = kernel_log_problems(res, a.console, allow)
    if problems:
        t.fail("kernel log shows %d problem line(s)" % len(problems),
               "\n".join(problems[:40]) + "\n\n" + context)

    reached_end = "end" in status and END_MARKER in con
    if not reached_end:
        why = "VM did not reach its end marker"
        if a.timed_out == "1":
            why += " (whole-VM timeout of %ss)" % a.vm_timeout
        elif "Kernel panic" in con:
            why += " (kernel panic)"
        else:
            why += " (qemu exit %s)" % a.qemu_rc
        t.fail(why)

    if problems:
        # Again at the very end, where a shortened CI log still shows it:
        # the first problem, and where the CPU was.
        rip = [l for l in (context or "").split("\n") if "RIP:" in l][:1]
        print("vm: first kernel problem: %s" % problems[0])
        for l in rip:
            print("vm:   %s" % l.strip())
        jump = clock_jump(a.console)
        if jump:
            print("vm:   the guest clock jumped by %.0f s before it ([%.1f] to [%.1f]):"
                  " a stall or lockup reported after such a jump is the host's clock"
                  " seen through the guest's TSC under TCG (docs/benchmarks.md,"
                  " \"The VM suite per kernel\"), not one of the guest's"
                  % (jump[1] - jump[0], jump[0], jump[1]))
    if t.skipped or t.disabled:
        print("vm: %d skipped, %d disabled (not counted)" % (t.skipped, t.disabled))
    print("vm: %d passed, %d failed" % (t.passed, t.failed))
    return 1 if t.failed else 0


if __name__ == "__main__":
    sys.exit(main())
