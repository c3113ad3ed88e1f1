// SPDX-License-Identifier: GPL-2.0-only
/// Access facts for lkmm-mark: every struct field access E->f / E.f with
/// its position and enclosing function (the driver reads the field, the
/// base and its struct type from the source), plus how it is used: plain read, write, read-modify-write,
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
expression E, E2;
identifier f;
position p;
assignment operator aop != =;
@@
\( E->f@p aop E2 \| E.f@p aop E2 \| ++E->f@p \| ++E.f@p \| --E->f@p \| --E.f@p \|
   E->f@p++ \| E.f@p++ \| E->f@p-- \| E.f@p-- \)

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
