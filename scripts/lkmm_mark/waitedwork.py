# SPDX-License-Identifier: GPL-2.0-only
"""Stage 2a, part of the call graph (callgraph.py): a work item a task
runs on its own stack and waits for.

A registration of policies/ 'waited_work' ('INIT_WORK_ONSTACK(&w.work,
fn)') whose work item is a member of a local of the registering
function, queued by the next statement that names it (a 'queue' call
passing the same '&w.work') and waited for by the statement right after
that one (a 'wait' call), makes fn run only between the two, while the
task that queued it sleeps in the wait with every lock it holds there:
fn runs as that task.  Only when fn's body ends with a 'signal' call
(the 'complete()' that wakes the waiter: nothing fn does comes after the
wake-up), or the wait is one on the work item itself (it returns when fn
has returned).  Then the registration is a call site of fn, with the
lock state of the queue call (callgraph.py _callback_uses() asks
waited_state()).

Reads .src, .P.waited_work, _call_args(), _decl_types(); sets nothing.
"""
from .tokutil import _stmt_end


class WaitedWork:
    def waited_state(self, f, owner, jcall, state_at):
        """The lock state at the queue call of the waited-for on-stack work
        item registered by the call toks[jcall[0]] of function owner in
        file f, or None when the registration is not one."""
        toks = self.src.toks[f]
        spec = self.P.waited_work.get(toks[jcall[0]].text)
        fn = self.src.funcs.get(owner)
        args = self._call_args(f, jcall[0])
        if spec is None or fn is None or not args or len(args) <= max(spec["work"], spec["fn"]):
            return None
        a, b = args[spec["fn"]]
        lo, hi = args[spec["work"]]
        work = [t.text for t in toks[lo:hi]]
        if b - a != 1 or a != jcall[1] or len(work) < 4 or work[0] != "&" or \
                work[2] != "." or not _local(toks, fn, work[1]):
            return None
        q = self._next_use(fn, toks, jcall[0], work)
        if q is None or toks[q].text not in spec["queue"]:
            return None
        w = _stmt_end(toks, q, fn.body_end) + 1
        if toks[w].text not in spec["wait"] or toks[w + 1].text != "(":
            return None
        on_work = [t.text for t in toks[w + 2:w + 2 + len(work)]] == work
        if not on_work and not self._ends_signalling(toks[jcall[1]].text, spec["signal"]):
            return None
        return state_at.get((f, q))

    def _next_use(self, fn, toks, k, work):
        """The call (its name's token) of the first statement after toks[k]'s
        that names work, the statement being that one call; None if
        another statement names it first, or none does."""
        i = _stmt_end(toks, k, fn.body_end) + 1
        n = len(work)
        while i < fn.body_end:
            e = _stmt_end(toks, i, fn.body_end)
            if any([t.text for t in toks[j:j + n]] == work for j in range(i, e)):
                if toks[i].kind == "id" and toks[i + 1].text == "(" and \
                        self._call_args(fn.file, i) is not None:
                    return i
                return None
            i = e + 1
        return None

    def _ends_signalling(self, name, signal):
        """Work function name (one definition) ends with a call of signal."""
        fns = self.src.by_name.get(name, ())
        if len(fns) != 1:
            return False
        fn = fns[0]
        toks = self.src.toks[fn.file]
        e = fn.body_end - 1
        if toks[e].text != ";":
            return False
        i = e - 1
        depth = 0
        while i > fn.body_start:
            t = toks[i].text
            if t == ")":
                depth += 1
            elif t == "(":
                depth -= 1
                if depth == 0:
                    break
            i -= 1
        return i > fn.body_start + 1 and toks[i - 1].text in signal and \
            toks[i - 2].text in (";", "{", "}")


def _local(toks, fn, name):
    """name is declared in fn's body ('struct t name;', '... name = ...')."""
    return any(toks[i].text == name and toks[i - 1].kind == "id" and
               toks[i + 1].text in (";", "=", ",", "[")
               for i in range(fn.body_start + 1, fn.body_end))
