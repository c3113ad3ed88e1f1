// SPDX-License-Identifier: GPL-2.0-only
/// Access facts for lkmm-mark: every struct field access E->f / E.f with
/// its position and enclosing function (the driver reads the field, the
/// base and its struct type from the source, and how the access is used,
/// written, read-modify-written, address taken, marked, inside sizeof,
/// from the tokens around it: scripts/lkmm_mark/kinds.py, whose SmPL
/// reference is cocci/kinds.cocci).  A function whose tokens have a
/// field access of which no fact comes is one spatch could not parse:
/// the driver lists it as not analysed (a rule matching every function
/// definition cost a seventh of the pass).
///
/// This is the first stage of the lkmm-mark pipeline; it changes nothing.
/// One JSON line per fact goes to $LKMM_FACTS_DIR/<pid>.jsonl (one file
/// per spatch worker, so --jobs is safe).
///
// Confidence: High
// Options: --include-headers -I include
// (the driver, scripts/lkmm_mark/facts.py, adds -I and --dir of the target)
// Keywords: READ_ONCE, WRITE_ONCE, data_race, LKMM

@initialize:python@
@@
import json, os
_lkmm_out = None

def lkmm_emit(kind, p, **kw):
    global _lkmm_out
    if _lkmm_out is None:
        d = os.environ.get("LKMM_FACTS_DIR", ".")
        _lkmm_out = open(os.path.join(d, "%d.jsonl" % os.getpid()), "a", buffering=1)
    q = p[0]
    rec = {"k": kind, "file": q.file, "line": int(q.line), "col": int(q.column),
           "eline": int(q.line_end), "ecol": int(q.column_end),
           "fn": q.current_element}
    rec.update(kw)
    _lkmm_out.write(json.dumps(rec) + "\n")

// Every field access.  Two rules, not one disjunction: in a disjunction
// the arrow branch matching a->b hides the dot access (a->b).c around it.
// Only the position is handed to Python (binding E and f costs as much
// again, and typed variants of these rules doubled the run time): p covers
// the field name, and the driver reads the field and its base expression
// from the tokens before it and infers the struct type from the
// declarations in scope.
@arrowu@
expression E;
identifier f;
position p;
@@
E->f@p

@script:python@
p << arrowu.p;
@@
lkmm_emit("acc", p)

@dotu@
expression E;
identifier f;
position p;
@@
E.f@p

@script:python@
p << dotu.p;
@@
lkmm_emit("acc", p)
