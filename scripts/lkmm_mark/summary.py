# SPDX-License-Identifier: GPL-2.0-only
"""The summary table of verify: one row per check (check, PASS/FAIL, detail),
and the rows a guest's stress run gives (boot, stress, data check, the file
system's check) from its console (console.GuestResult).

Standalone: python3 -m lkmm_mark.summary CONSOLE_LOG [--accel tcg] [--smp 4]
the guest rows of verify's table for a saved console log of a stress run.
"""
import argparse
import sys

from .target import verify_spec


def table(rows, headers):
    w = [max(len(str(r[i])) for r in rows + [headers]) for i in range(len(headers))]
    sep = "+" + "+".join("-" * (x + 2) for x in w) + "+"
    out = [sep, "| " + " | ".join(str(h).ljust(w[i]) for i, h in enumerate(headers)) + " |", sep]
    for r in rows:
        out.append("| " + " | ".join(str(c).ljust(w[i]) for i, c in enumerate(r)) + " |")
    out.append(sep)
    return "\n".join(out)


def check_table(rows):
    return table(rows, ["check", "result", "detail"])


def secs(s):
    return "%dm%02ds" % (s // 60, s % 60)


def ops_summary(ops):
    """'write 403 files, fsync 441, ...' from the guest's ops markers."""
    parts = []
    for k, v in sorted(ops.items()):
        if k == "verified":
            continue
        w = v.split()
        if k == "stress-ng":
            n = sum(int(x.split("=")[1]) for x in w if "=" in x and x.split("=")[1].isdigit())
            parts.append("stress-ng %d bogo-ops" % n)
        elif k == "scrub" and len(w) >= 3:
            parts.append("scrub %s, balance %s%s" % (w[0], w[2], " (%s refused)" % w[4]
                                                     if len(w) >= 5 and w[4] != "0" else ""))
        elif w:
            parts.append("%s %s" % (k, w[0]))
    return ", ".join(parts)


def guest_rows(res, accel, smp):
    """[(check, ok, detail)] of a stress run: boot, stress, data check, and
    the file system's check (the guest's step '<subsystem>-check')."""
    rows = []
    boot_ok = not res.timed_out and res.done is not None
    took = "%.0f s" % res.seconds if res.seconds is not None else "? s"
    rows.append(("boot (%s, %d vCPUs)" % (accel, smp), boot_ok and not res.unexpected,
                 "%s in QEMU; %s" % (took, "no splats" if not res.unexpected else
                                     "%d unexpected splat(s): %s" % (
                                         len(res.unexpected),
                                         res.unexpected[0][1].strip()[:60]))))
    stress_steps = [k for k in res.steps if k.startswith("stress-")]
    sbad = [k for k in stress_steps if res.steps[k] != "PASS"]
    rows.append(("stress", bool(stress_steps) and not sbad,
                 "%s s, %d jobs: %s%s" % (res.stress_seconds, len(stress_steps),
                                          ops_summary(res.ops) or "no ops reported",
                                          (" FAILED: " + ",".join(sbad)) if sbad else "")))
    # a guest's final check of the data ('final-scrub') counts too
    dsteps = ["umount", "remount", "verify"] + sorted(k for k in res.steps
                                                      if k.startswith("final-"))
    dbad = [k for k in dsteps if res.steps.get(k) != "PASS"]
    rows.append(("data check", not dbad, ("%s after remount%s" % (
        res.ops.get("verified", "?"), "; scrub clean" if "final-scrub" in res.steps else ""))
        if not dbad else "FAILED: " + ",".join(dbad)))
    sub = verify_spec().subsystem
    rows.append(("%s check" % sub, res.steps.get(sub + "-check") == "PASS",
                 res.steps.get(sub + "-check", "not run")))
    return rows


def result_row(name, ok, detail):
    """A row of the table: ok True/False/None -> PASS/FAIL/-."""
    return (name, "PASS" if ok else ("FAIL" if ok is False else "-"), detail)


def main(argv=None):
    from .console import from_log
    ap = argparse.ArgumentParser(prog="python3 -m lkmm_mark.summary", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("log", metavar="CONSOLE_LOG")
    ap.add_argument("--accel", default="tcg")
    ap.add_argument("--smp", type=int, default=4)
    args = ap.parse_args(argv)
    res = from_log(args.log)
    res.seconds = None                  # not in the log
    rows = [result_row(*r) for r in guest_rows(res, args.accel, args.smp)]
    print(check_table(rows))
    return 0 if all(r[1] == "PASS" for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
