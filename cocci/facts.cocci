// SPDX-License-Identifier: GPL-2.0-only
/// Access facts for lkmm-mark: every struct field access E->f / E.f with
/// its position, enclosing function and (when spatch can infer it) the
/// struct type, plus how it is used: plain read, write, read-modify-write,
/// address taken, already marked (and with which macro), or an operand of
/// sizeof (typeof operands are found by the
/// driver's token scan, SmPL has no typeof expression).  Also every function definition spatch could parse, so
/// that the driver can list the functions that were not analysed.
///
/// This is the first stage of the lkmm-mark pipeline; it changes nothing.
/// One JSON line per fact goes to $LKMM_FACTS_DIR/<pid>.jsonl (one file
/// per spatch worker, so --jobs is safe).
///
// Confidence: High
// Options: --include-headers -I fs/btrfs -I include
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

// Every field access, typed when spatch knows the type of the base.
// Four rules, not one disjunction: in a disjunction the arrow branch
// matching a->b hides the dot access (a->b).c around it, and an untyped
// branch does not match where a typed one failed.
@arrowt@
type T;
T *E;
identifier f;
position p;
@@
E->f@p

@script:python@
p << arrowt.p;
f << arrowt.f;
T << arrowt.T;
E << arrowt.E;
@@
lkmm_emit("acc", p, field=f, type=T, base=E, arrow=True)

@arrowu@
expression E;
identifier f;
position p;
@@
E->f@p

@script:python@
p << arrowu.p;
f << arrowu.f;
E << arrowu.E;
@@
lkmm_emit("acc", p, field=f, type="", base=E, arrow=True)

@dott@
type T;
T E;
identifier f;
position p;
@@
E.f@p

@script:python@
p << dott.p;
f << dott.f;
T << dott.T;
E << dott.E;
@@
lkmm_emit("acc", p, field=f, type=T, base=E, arrow=False)

@dotu@
expression E;
identifier f;
position p;
@@
E.f@p

@script:python@
p << dotu.p;
f << dotu.f;
E << dotu.E;
@@
lkmm_emit("acc", p, field=f, type="", base=E, arrow=False)

@wr@
expression E, E2;
identifier f;
position p;
@@
(
E->f@p = E2
|
E.f@p = E2
)

@script:python@
p << wr.p;
@@
lkmm_emit("write", p)

@rmw@
expression X, E2;
position p;
assignment operator aop != =;
@@
\( X@p aop E2 \| ++X@p \| --X@p \| X@p++ \| X@p-- \)

@script:python@
p << rmw.p;
@@
lkmm_emit("rmw", p)

@addr@
expression E;
identifier f;
position p;
@@
\( &E->f@p \| &E.f@p \)

@script:python@
p << addr.p;
@@
lkmm_emit("addr", p)

@marked@
expression E, E2;
identifier f;
identifier m = {READ_ONCE, WRITE_ONCE, smp_load_acquire, smp_store_release,
                smp_store_mb, xchg, cmpxchg, try_cmpxchg, xchg_relaxed,
                cmpxchg_relaxed, rcu_dereference, rcu_assign_pointer,
                rcu_access_pointer};
position p;
@@
\( m(E->f@p, ...) \| m(E.f@p, ...) \| m(&E->f@p, ...) \| m(&E.f@p, ...) \)

@script:python@
p << marked.p;
m << marked.m;
@@
lkmm_emit("marked", p, macro=m)

// data_race(E->f): the access itself is marked.
@dr@
expression E;
identifier f;
position p;
@@
data_race(\(E->f@p\|E.f@p\))

@script:python@
p << dr.p;
@@
lkmm_emit("marked", p, macro="data_race")

// data_race(... E->f ...): inside a data_race() expression, not itself the
// marked operand (e.g. data_race(args->start >= inode->disk_i_size)).
@dri@
expression E;
identifier f;
position p != dr.p;
@@
data_race(<+... \(E->f@p\|E.f@p\) ...+>)

@script:python@
p << dri.p;
@@
lkmm_emit("marked", p, macro="data_race-expr")

@sz@
expression E;
identifier f;
position p;
@@
sizeof(<+... \(E->f@p\|E.f@p\) ...+>)

@script:python@
p << sz.p;
@@
lkmm_emit("sizeof", p)

@fndef@
identifier fn;
position p;
@@
fn@p(...) { ... }

@script:python@
p << fndef.p;
fn << fndef.fn;
@@
lkmm_emit("fn", p, name=fn)
