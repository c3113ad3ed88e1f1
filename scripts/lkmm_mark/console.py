# SPDX-License-Identifier: GPL-2.0-only
"""A guest's console log: the guest init's @@LKMM markers (steps, ops, DONE,
stress seconds, KCSAN counters) and the kernel's splats (BUG, WARNING, Oops,
panic, lockdep, hung tasks, the target subsystem's errors, UBSAN, KCSAN),
each with the 25 lines that follow it; the splats matching an 'expected'
pattern apart.

Standalone: python3 -m lkmm_mark.console LOG [--kcsan] [--expect REGEX]...
re-scans a saved console log (e.g. qemu-test/results/*-console.log[.gz]);
exit status 0 when the guest passed.
"""
import argparse
import collections
import gzip
import re
import sys

from .target import verify_spec

MARK = "@@LKMM"

SPLAT_PATTERNS = [
    ("BUG", re.compile(r"\bBUG: (?!KCSAN)")),
    ("KCSAN", re.compile(r"BUG: KCSAN: ")),
    ("WARNING", re.compile(r"\bWARNING: ")),
    ("Oops", re.compile(r"\bOops\b|general protection fault|kernel BUG at")),
    ("panic", re.compile(r"Kernel panic - not syncing")),
    ("lockdep", re.compile(r"possible (?:circular|recursive) locking|inconsistent lock state|"
                           r"turning off the locking correctness validator|"
                           r"suspicious RCU usage|INFO: lockdep")),
    ("hung", re.compile(r"INFO: task .* blocked for more than|soft lockup|rcu_sched self-detected"
                        r"|rcu: INFO: rcu_.* stall")),
    # here: the subsystem's own errors (splat_patterns())
    ("UBSAN", re.compile(r"UBSAN: ")),
]
# the patterns of a KCSAN run: its reports are what it looks for
KCSAN_EXPECTED = [r"BUG: KCSAN: "]


def splat_patterns():
    """SPLAT_PATTERNS with the target subsystem's error lines (verify.json's
    console_errors, a splat named after the subsystem) before UBSAN's."""
    spec = verify_spec()
    return SPLAT_PATTERNS[:-1] + [(spec.subsystem, spec.console_errors)] + SPLAT_PATTERNS[-1:]


class GuestResult:
    def __init__(self):
        self.console = ""
        self.timed_out = False
        self.rc = None
        self.seconds = 0.0
        self.accel = None
        self.steps = collections.OrderedDict()
        self.ops = {}
        self.done = None          # "PASS" / "FAIL..." / None
        self.splats = []          # (kind, line, context)
        self.unexpected = []
        self.stress_seconds = None
        self.kcsan_stats = {}     # /sys/kernel/debug/kcsan counters after the stress
        self.cmd = []

    def tail(self, n=40):
        return "\n".join(self.console.splitlines()[-n:])

    def ok(self):
        return (not self.timed_out and self.done == "PASS" and not self.unexpected
                and all(v == "PASS" for v in self.steps.values()))

    def failure(self):
        """One clear sentence on why the guest failed (None if it passed)."""
        if self.timed_out:
            return "guest timed out after %.0f s (hang?); console tail:\n%s" % (
                self.seconds, self.tail())
        if self.unexpected:
            k, line, _ = self.unexpected[0]
            return "kernel %s splat on the console: %s (%d unexpected splat(s))" % (
                k, line.strip(), len(self.unexpected))
        if self.done is None:
            return "guest exited (rc %s) without the completion marker; console tail:\n%s" % (
                self.rc, self.tail())
        bad = [k for k, v in self.steps.items() if v != "PASS"]
        if bad or self.done != "PASS":
            return "guest reported failure: %s" % (", ".join(bad) or self.done)
        return None


def scan_console(text, expected=()):
    """All splats as (kind, line, context); those not matching expected regexes separately."""
    lines = text.splitlines()
    splats, unexpected = [], []
    exp = [re.compile(e) for e in expected]
    patterns = splat_patterns()
    for i, line in enumerate(lines):
        if MARK in line:
            continue
        for kind, rx in patterns:
            if rx.search(line):
                ctx = "\n".join(lines[i:i + 25])
                splats.append((kind, line, ctx))
                if not any(e.search(line) for e in exp):
                    unexpected.append((kind, line, ctx))
                break
    return splats, unexpected


def parse_markers(res):
    for line in res.console.splitlines():
        i = line.find(MARK + " ")
        if i < 0:
            continue
        words = line[i + len(MARK) + 1:].split()
        if not words:
            continue
        if words[0] == "step" and len(words) >= 3:
            res.steps[words[1]] = words[2]
        elif words[0] == "ops" and len(words) >= 2:
            res.ops[words[1]] = " ".join(words[2:])
        elif words[0] == "DONE" and len(words) >= 2:
            res.done = " ".join(words[1:])
        elif words[0] == "verified" and len(words) >= 4:
            res.ops["verified"] = "%s files verified, %s bad" % (words[1], words[3])
        elif words[0] == "kcsan-stats":
            res.kcsan_stats = dict(w.split("=", 1) for w in words[1:] if "=" in w)
        elif words[0] == "stress" and len(words) >= 3 and words[1] == "seconds":
            res.stress_seconds = int(words[2]) if words[2].isdigit() else None


def analyse(res, expected=()):
    """Fill res (console already set) from its console: markers and splats."""
    parse_markers(res)
    res.splats, res.unexpected = scan_console(res.console, expected)
    return res


def read_log(path):
    """A saved console log's text (gzip-compressed when it ends in .gz)."""
    opener = gzip.open if str(path).endswith(".gz") else open
    with opener(path, "rt", errors="replace") as f:
        return f.read()


def from_log(path, expected=()):
    res = GuestResult()
    res.console = read_log(path)
    return analyse(res, expected)


def describe(res):
    """The scan of one console log, as printed by the standalone command."""
    out = ["steps: " + (" ".join("%s=%s" % kv for kv in res.steps.items()) or "none"),
           "ops: " + ("; ".join("%s %s" % kv for kv in sorted(res.ops.items())) or "none"),
           "stress seconds: %s" % res.stress_seconds,
           "done: %s" % res.done]
    if res.kcsan_stats:
        out.append("kcsan: " + " ".join("%s=%s" % kv for kv in res.kcsan_stats.items()))
    kinds = collections.Counter(k for k, _, _ in res.splats)
    out.append("splats: %d (%s), unexpected %d" % (len(res.splats), ", ".join(
        "%s %d" % kv for kv in sorted(kinds.items())) or "none", len(res.unexpected)))
    for k, line, _ in res.unexpected[:10]:
        out.append("  unexpected %s: %s" % (k, line.strip()))
    out.append("verdict: " + (res.failure() or "PASS").splitlines()[0])
    return "\n".join(out)


def main(argv=None):
    ap = argparse.ArgumentParser(prog="python3 -m lkmm_mark.console", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("logs", nargs="+", metavar="LOG")
    ap.add_argument("--kcsan", action="store_true", help="KCSAN reports are expected")
    ap.add_argument("--expect", action="append", default=[], metavar="REGEX",
                    help="a splat line matching REGEX is expected (repeatable)")
    args = ap.parse_args(argv)
    expected = args.expect + (KCSAN_EXPECTED if args.kcsan else [])
    rc = 0
    for p in args.logs:
        res = from_log(p, expected)
        if len(args.logs) > 1:
            print("== %s" % p)
        print(describe(res))
        rc |= 0 if res.ok() else 1
    return rc


if __name__ == "__main__":
    sys.exit(main())
