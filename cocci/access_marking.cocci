// SPDX-License-Identifier: GPL-2.0-only
/// Plain accesses to shared struct fields that the LKMM access-marking
/// policies require to be marked: READ_ONCE() for a load that races with a
/// store, WRITE_ONCE() for a store that races with a load or a store, and
/// data_race() for a racy load used only for diagnostics.  Verdicts come
/// from the lkmm-mark analysis of the whole directory (locks held at each
/// access, including locks held by every caller, the lock held by the
/// field's writes, owner and handler facts from policies/), read from a
/// plan file: $LKMM_PLAN if set, otherwise the plan is computed once for
/// the --dir being checked and cached under ~/.cache/lkmm-mark/.
///
/// Each report names the rule (locked-write, unlocked-write, unlocked-read,
/// refetch-after-lock, diagnostic-read) and the evidence.
///
// Confidence: Low (a hand review of the flagged sites of the default
//  target is in tests/hand-review.md of lkmm-mark)
// Copyright: (C) 2026 lkmm-mark authors.
// Comments: Sites the policies leave plain (locked reads, owner reads,
//  initialisation, private objects) are not reported; see the plan.
// Options: --no-includes --include-headers
// Keywords: READ_ONCE, WRITE_ONCE, data_race, LKMM, KCSAN

virtual patch
virtual context
virtual org
virtual report

@initialize:python@
@@
import json, os, subprocess, sys

def _lkmm_argv():
    try:
        with open("/proc/self/cmdline", "rb") as f:
            return [a.decode(errors="replace") for a in f.read().split(b"\0") if a]
    except OSError:
        return []

def _lkmm_load():
    plan = os.environ.get("LKMM_PLAN")
    argv = _lkmm_argv()
    if not plan:
        cocci = target = None
        for i, a in enumerate(argv[:-1]):
            if a in ("--sp-file", "--cocci-file"):
                cocci = argv[i + 1]
            if a == "--dir":
                target = argv[i + 1]
        if cocci is None or target is None:
            sys.stderr.write("access_marking.cocci: run with --dir DIR (or set LKMM_PLAN)\n")
            return {}
        repo = os.path.dirname(os.path.dirname(os.path.abspath(cocci)))
        tree = os.getcwd()
        target = os.path.relpath(os.path.abspath(target), tree)
        cache = os.environ.get("LKMM_MARK_CACHE") or os.path.join(
            os.path.expanduser("~"), ".cache", "lkmm-mark")
        os.makedirs(cache, exist_ok=True)
        plan = os.path.join(cache, "plan-%d.json" % os.getpid())
        import fcntl
        with open(os.path.join(cache, "plan.lock"), "w") as lk:
            fcntl.flock(lk, fcntl.LOCK_EX)
            r = subprocess.run([sys.executable or "python3",
                                os.path.join(repo, "scripts", "lkmm-mark"), "plan",
                                "--tree", tree, "--target", target, "--json", plan],
                               stdout=subprocess.DEVNULL)
        if r.returncode != 0:
            sys.stderr.write("access_marking.cocci: lkmm-mark plan failed\n")
            return {}
    with open(plan) as f:
        d = json.load(f)
    if not os.environ.get("LKMM_PLAN"):
        os.unlink(plan)
    sites = {}
    for s in d["sites"]:
        if s["action"] != "none":
            sites[(s["file"], s["line"], s["column"])] = s
    return sites

LKMM_SITES = _lkmm_load()

def _norm(path):
    p = os.path.relpath(os.path.abspath(path), os.getcwd())
    return p

def lkmm_site(p, actions=None, kinds=None, rules=None):
    s = LKMM_SITES.get((_norm(p[0].file), int(p[0].line), int(p[0].column)))
    if s is None:
        return False
    if actions and s["action"] not in actions:
        return False
    if kinds and s["access"] not in kinds:
        return False
    rule = s["rule"]
    if s["access"] == "rmw" and rule in ("locked-write", "unlocked-write"):
        # the read half of an update is READ_ONCE() only when a store
        # races with it (a store made without the lock, or the same
        # update in another task): the rule of the form that reads so
        rule = "unlocked-write" if s.get("read_races") else "locked-write"
    if rules and rule not in rules:
        return False
    if actions and (s.get("rewrite") or s.get("nested")):
        # patch mode: the plan says this site is left for a human, or it is
        # a load whose base is rewritten too (one SmPL rule cannot add two
        # tokens in front of the same token; the series rewriter does it)
        return False
    return True

def lkmm_msg(p):
    s = LKMM_SITES[(_norm(p[0].file), int(p[0].line), int(p[0].column))]
    return "%s: %s (%s)" % (s["action"], s["reason"], s["rule"])

// ------------------------------------------------------------ report modes

@c depends on context@
expression E;
identifier f;
position p : script:python() { lkmm_site(p) };
@@
(
* E->f@p
|
* E.f@p
)

@r depends on org || report@
expression E;
identifier f;
position p : script:python() { lkmm_site(p) };
@@
(
 E->f@p
|
 E.f@p
)

@script:python depends on report@
p << r.p;
@@
coccilib.report.print_report(p[0], lkmm_msg(p))

@script:python depends on org@
p << r.p;
@@
coccilib.org.print_todo(p[0], lkmm_msg(p))

// ------------------------------------------------------------- patch mode
// Only the sites of the plan are touched.  Stores become WRITE_ONCE()
// statements (a store inside a larger expression is left for a human and
// stays in the report); a read-modify-write keeps its plain read when no
// store races with it (under the lock every racing store holds: the
// commit's "locked write must use ONCE, may use plain read"; or the only
// writer), else it reads with READ_ONCE().  Prefix ++x->f and --x->f (SmPL
// takes no position there) are left to the series rewriter.
// One rule does every rewrite, keeping the matched code as context and
// adding tokens around it, so that nested sites (a load inside a stored
// value) are rewritten too: a later rule's script constraint would see the
// positions of code an earlier rule already rewrote.
// The series (scripts/lkmm-mark series) makes the same edits and adds the
// comments the seed commit and checkpatch ask for (refetch after lock,
// unlocked write, owner read, data_race), which SmPL cannot place well.

@depends on patch@
expression E, V;
identifier f, I;
constant C;
position p1 : script:python() { lkmm_site(p1, ("WRITE_ONCE",), ("write",)) };
position p2 : script:python() { lkmm_site(p2, ("WRITE_ONCE",), ("rmw",), ("locked-write",)) };
position p3 : script:python() { lkmm_site(p3, ("WRITE_ONCE",), ("rmw",), ("unlocked-write",)) };
position p4 : script:python() { lkmm_site(p4, ("READ_ONCE",), ("read",)) };
position p5 : script:python() { lkmm_site(p5, ("data_race",), ("read",)) };
@@
(
+ WRITE_ONCE(
  E->f@p1
- =
+ ,
  V
+ )
|
+ WRITE_ONCE(
  E->f@p2
- +=
+ , E->f +
  I
+ )
|
+ WRITE_ONCE(
  E->f@p2
- +=
+ , E->f +
  C
+ )
|
- E->f@p2 += V
+ WRITE_ONCE(E->f, E->f + V)
|
+ WRITE_ONCE(
  E->f@p2
- -=
+ , E->f -
  I
+ )
|
+ WRITE_ONCE(
  E->f@p2
- -=
+ , E->f -
  C
+ )
|
- E->f@p2 -= V
+ WRITE_ONCE(E->f, E->f - V)
|
+ WRITE_ONCE(
  E->f@p2
- |=
+ , E->f |
  I
+ )
|
+ WRITE_ONCE(
  E->f@p2
- |=
+ , E->f |
  C
+ )
|
- E->f@p2 |= V
+ WRITE_ONCE(E->f, E->f | V)
|
+ WRITE_ONCE(
  E->f@p2
- &=
+ , E->f &
  I
+ )
|
+ WRITE_ONCE(
  E->f@p2
- &=
+ , E->f &
  C
+ )
|
- E->f@p2 &= V
+ WRITE_ONCE(E->f, E->f & V)
|
+ WRITE_ONCE(
  E->f@p2
- ++
+ , E->f + 1)
|
+ WRITE_ONCE(
  E->f@p2
- --
+ , E->f - 1)
|
+ WRITE_ONCE(
  E->f@p3
- +=
+ , READ_ONCE(E->f) +
  I
+ )
|
+ WRITE_ONCE(
  E->f@p3
- +=
+ , READ_ONCE(E->f) +
  C
+ )
|
- E->f@p3 += V
+ WRITE_ONCE(E->f, READ_ONCE(E->f) + V)
|
+ WRITE_ONCE(
  E->f@p3
- -=
+ , READ_ONCE(E->f) -
  I
+ )
|
+ WRITE_ONCE(
  E->f@p3
- -=
+ , READ_ONCE(E->f) -
  C
+ )
|
- E->f@p3 -= V
+ WRITE_ONCE(E->f, READ_ONCE(E->f) - V)
|
+ WRITE_ONCE(
  E->f@p3
- |=
+ , READ_ONCE(E->f) |
  I
+ )
|
+ WRITE_ONCE(
  E->f@p3
- |=
+ , READ_ONCE(E->f) |
  C
+ )
|
- E->f@p3 |= V
+ WRITE_ONCE(E->f, READ_ONCE(E->f) | V)
|
+ WRITE_ONCE(
  E->f@p3
- &=
+ , READ_ONCE(E->f) &
  I
+ )
|
+ WRITE_ONCE(
  E->f@p3
- &=
+ , READ_ONCE(E->f) &
  C
+ )
|
- E->f@p3 &= V
+ WRITE_ONCE(E->f, READ_ONCE(E->f) & V)
|
+ WRITE_ONCE(
  E->f@p3
- ++
+ , READ_ONCE(E->f) + 1)
|
+ WRITE_ONCE(
  E->f@p3
- --
+ , READ_ONCE(E->f) - 1)
|
+ READ_ONCE(
  E->f@p4
+ )
|
+ data_race(
  E->f@p5
+ )
|
+ WRITE_ONCE(
  E.f@p1
- =
+ ,
  V
+ )
|
+ WRITE_ONCE(
  E.f@p2
- +=
+ , E.f +
  I
+ )
|
+ WRITE_ONCE(
  E.f@p2
- +=
+ , E.f +
  C
+ )
|
- E.f@p2 += V
+ WRITE_ONCE(E.f, E.f + V)
|
+ WRITE_ONCE(
  E.f@p2
- -=
+ , E.f -
  I
+ )
|
+ WRITE_ONCE(
  E.f@p2
- -=
+ , E.f -
  C
+ )
|
- E.f@p2 -= V
+ WRITE_ONCE(E.f, E.f - V)
|
+ WRITE_ONCE(
  E.f@p2
- |=
+ , E.f |
  I
+ )
|
+ WRITE_ONCE(
  E.f@p2
- |=
+ , E.f |
  C
+ )
|
- E.f@p2 |= V
+ WRITE_ONCE(E.f, E.f | V)
|
+ WRITE_ONCE(
  E.f@p2
- &=
+ , E.f &
  I
+ )
|
+ WRITE_ONCE(
  E.f@p2
- &=
+ , E.f &
  C
+ )
|
- E.f@p2 &= V
+ WRITE_ONCE(E.f, E.f & V)
|
+ WRITE_ONCE(
  E.f@p2
- ++
+ , E.f + 1)
|
+ WRITE_ONCE(
  E.f@p2
- --
+ , E.f - 1)
|
+ WRITE_ONCE(
  E.f@p3
- +=
+ , READ_ONCE(E.f) +
  I
+ )
|
+ WRITE_ONCE(
  E.f@p3
- +=
+ , READ_ONCE(E.f) +
  C
+ )
|
- E.f@p3 += V
+ WRITE_ONCE(E.f, READ_ONCE(E.f) + V)
|
+ WRITE_ONCE(
  E.f@p3
- -=
+ , READ_ONCE(E.f) -
  I
+ )
|
+ WRITE_ONCE(
  E.f@p3
- -=
+ , READ_ONCE(E.f) -
  C
+ )
|
- E.f@p3 -= V
+ WRITE_ONCE(E.f, READ_ONCE(E.f) - V)
|
+ WRITE_ONCE(
  E.f@p3
- |=
+ , READ_ONCE(E.f) |
  I
+ )
|
+ WRITE_ONCE(
  E.f@p3
- |=
+ , READ_ONCE(E.f) |
  C
+ )
|
- E.f@p3 |= V
+ WRITE_ONCE(E.f, READ_ONCE(E.f) | V)
|
+ WRITE_ONCE(
  E.f@p3
- &=
+ , READ_ONCE(E.f) &
  I
+ )
|
+ WRITE_ONCE(
  E.f@p3
- &=
+ , READ_ONCE(E.f) &
  C
+ )
|
- E.f@p3 &= V
+ WRITE_ONCE(E.f, READ_ONCE(E.f) & V)
|
+ WRITE_ONCE(
  E.f@p3
- ++
+ , READ_ONCE(E.f) + 1)
|
+ WRITE_ONCE(
  E.f@p3
- --
+ , READ_ONCE(E.f) - 1)
|
+ READ_ONCE(
  E.f@p4
+ )
|
+ data_race(
  E.f@p5
+ )
)
