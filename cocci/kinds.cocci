// SPDX-License-Identifier: GPL-2.0-only
/// How each field access is used, as SmPL patterns: written (E->f = E2),
/// read-modify-written (E->f op= E2, ++E->f, E->f--, ..., swap(E->f, E2)), address taken
/// (&E->f), the operand of a marking macro (READ_ONCE(E->f) and friends,
/// data_race(E->f)), inside a data_race() expression or a sizeof operand.
///
/// This is the reference for scripts/lkmm_mark/kinds.py, which reads the
/// same from the tokens around each access that cocci/facts.cocci
/// reports: matching these patterns cost a third of the facts pass.
/// tests/test_kinds.py runs this file over every fixture and over all of
/// the default target and checks that both agree on every access.  It changes
/// nothing; one JSON line per fact goes to $LKMM_FACTS_DIR/<pid>.jsonl.
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
   E->f@p++ \| E.f@p++ \| E->f@p-- \| E.f@p-- \|
   swap(E->f@p, E2) \| swap(E.f@p, E2) \)

@script:python@
p << rmw.p;
@@
lkmm_emit("rmw", p)

// swap()'s second argument: a rule of its own (in one disjunction the
// first argument's match hides it)
@rmw2@
expression E, E2;
identifier f;
position p;
@@
\( swap(E2, E->f@p) \| swap(E2, E.f@p) \)

@script:python@
p << rmw2.p;
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
// marked operand (e.g. data_race(args->start >= inode->i_size)).
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
