# SPDX-License-Identifier: GPL-2.0-only
"""Stage 2b, the part of the call graph the sources alone decide (no facts,
no lock flow): where a function's name is used other than in a call (its
address taken, or a callback handed to a synchronous helper), the
functions macro bodies name, the preprocessor-disabled lines, the names
the kernel's trace event headers mention and the ones a header of the
target declares.  Plain data, so that it can be computed in a thread or a
forked child beside the facts pass (commands.analyse()).

Reads .src, .tree, .P (sync_callers, non_calling); sets nothing: its
result goes to call_graph() (callgraph.py).  A function wrongly taken
for address-taken loses its call sites there (no locks held on entry).
"""
import collections
import os
import re

from . import correlate, csrc
from .accessors import all_macro_defs
from .locks import KEYWORDS
from .tokutil import _declares, _owner, _ops_member, _call_start, _split


class SourceScan:
    def warm_source_caches(self):
        """Fill the caches the Source object keeps for every stage that
        reads the sources alone (each function's declared types, the
        function-like macro definitions), while the facts pass runs:
        the analysis that follows finds them done."""
        for fn in self.src.funcs.values():
            self._decl_types(fn)
        all_macro_defs(self.src)

    # the caches of the Analysis that depend on the sources alone, which
    # warm_function_caches() fills and commands.analyse() hands on
    SOURCE_CACHES = ("_paramcache", "_idcache", "_flagranges", "_opsentrycache")

    def warm_function_caches(self):
        """Each function's parameters, identifiers and the ranges its
        parameters' tests decide (flagargs.py): the sources alone, while
        the facts pass runs (SOURCE_CACHES)."""
        for fn in self.src.funcs.values():
            self.params(fn)
            self._ids(fn)
            self._flag_ranges(fn)
            # the lock flow's (locks.py: the flow runs over the body and
            # its closing brace)
            correlate.tracked_locals(self.src.toks[fn.file], fn.body_start, fn.body_end + 1)
        self.ops_entry_members()

    def source_scan(self):
        """The parts of the call graph that depend on the sources alone (no
        facts, no lock flow), as plain data: it can be computed in another
        process while this one reads the facts (commands.analyse()).

        addr: (name, file, owner function key, call index) for each use of
        a function's name that is not a call; the call index is set, with
        the name's own index, when the name is a whole argument of a
        synchronous caller (list_sort(), rb_find()..., or a function that
        only calls that parameter), whose call is then its call site.  Also the
        functions named in macro bodies, the preprocessor-disabled lines,
        the function names the kernel's trace event headers mention, and
        those a header of the target declares."""
        src = self.src
        addr = self._mentions()
        macro_used, dead_lines = _macro_names(src, self.tree)
        # a function named only in the bodies of its wrapper macros is
        # called where they are (the precise contexts of contexts.py
        # live_apart() follow them; the others do not)
        wrappers, only = _wrapper_macros(src, macro_used)
        wrapped = {}
        for m, fn in sorted(wrappers.items()):
            if fn in only:
                wrapped.setdefault(fn, []).append(m)
        # non-static functions named by the kernel's trace event headers
        # are called from there
        outside = _trace_event_names(self.tree)
        # a non-static function is internal API when a header of the target
        # declares it; one no header declares is an entry point
        declared = set()
        for f, toks in src.toks.items():
            if f.endswith(".h"):
                declared.update(toks[i].text for i in range(len(toks) - 1)
                                if toks[i].kind == "id" and toks[i + 1].text == "(")
        names = set(src.by_name)
        return {"addr": addr, "macro_used": macro_used, "dead_lines": dead_lines,
                "wrapped": wrapped,
                "outside": outside & names, "declared": declared & names}

    def _mentions(self):
        """source_scan()'s addr: each use of a function's name that is not
        a call, (name, file, owner function key, (call index, name index)
        of a synchronous helper's call or None, ops member or None)."""
        src = self.src
        fns_of = collections.defaultdict(list)
        for fn in src.funcs.values():
            fns_of[fn.file].append(fn)
        starts_of = {}
        for f, fl in fns_of.items():
            fl.sort(key=lambda fn: fn.body_start)
            starts_of[f] = [fn.body_start for fn in fl]
        local = self._shadowing_names()
        call_only = self._call_only_params()
        addr = []
        for f, toks in src.toks.items():
            for i, t in enumerate(toks):
                if t.kind == "id" and t.text in src.by_name and \
                        not (i + 1 < len(toks) and toks[i + 1].text == "("):
                    if _not_the_function(toks, i):
                        continue
                    owner = _owner(fns_of[f], starts_of.get(f, []), i)
                    if owner and t.text in local.get((f, owner[0].body_start,
                                                      owner[0].body_end), ()):
                        continue
                    # ALLOW_ERROR_INJECTION(foo_cow_block, ERRNO) at file
                    # scope: it names the function and calls nothing
                    if not owner and toks[i - 1].text == "(" and \
                            toks[i - 2].text in self.P.non_calling:
                        continue
                    c = self._call_arg(toks, i, owner[0].body_start) if owner else None
                    jcall = None
                    amp = toks[i - 1].text == "&"            # '&foo_initxattrs'
                    if c and (c[0] in self.P.sync_callers or c[0] in self.P.waited_work or
                              (c[0], c[1]) in call_only) and \
                            toks[i - 1 - amp].text in (",", "(") and \
                            toks[i + 1].text in (",", ")"):
                        # the helper's call, the callback's name
                        jcall = (_call_start(toks, i - amp, owner[0].body_start), i)
                    addr.append((t.text, f, (owner[0].file, owner[0].name) if owner else None,
                                 jcall, None if owner else _ops_member(toks, i)))
        return addr

    def _shadowing_names(self):
        """(file, body start, body end) of a function -> the names of
        target functions it declares as locals or parameters."""
        src = self.src
        # a local variable or a member with a function's name is not the
        # function ('u64 foo_end = ...' next to static foo_end())
        local = {}
        for fn in src.funcs.values():
            toks = src.toks[fn.file]
            names = set()
            for i in range(fn.body_start + 1, fn.body_end):
                t = toks[i]
                if t.kind == "id" and t.text in src.by_name and \
                        (toks[i - 1].kind == "id" and toks[i - 1].text not in KEYWORDS or
                         toks[i - 1].text == "*" or
                         toks[i - 1].text == "," and _declares(toks, i - 1, fn.body_start)) and \
                        toks[i + 1].text in (";", "=", ",", "["):
                    names.add(t.text)
            # a parameter too ('u64 *foo_reserve' beside static
            # foo_reserve())
            names.update(n for n in self.params(fn) if n in src.by_name)
            if names:
                local[(fn.file, fn.body_start, fn.body_end)] = names
        return local

    def _call_only_params(self):
        """{(function name, argument index)}: function-pointer parameters
        that every definition of that name only calls ('iterate(...)') or
        hands whole to such a parameter of another function, and never
        keeps: a function passed there runs inside the call, like a
        comparator handed to list_sort() (an iterator whose callback
        parameter is only ever called)."""
        src = self.src
        cand = {}
        for fn in src.funcs.values():
            toks = src.toks[fn.file]
            for n, name in enumerate(self.params(fn)):
                if not name:
                    continue
                uses = []
                ok = True
                for i in range(fn.body_start + 1, fn.body_end):
                    t = toks[i]
                    if t.kind != "id" or t.text != name or toks[i - 1].text in (".", "->"):
                        continue
                    if toks[i + 1].text == "(":
                        continue                                # called
                    c = self._call_arg(toks, i, fn.body_start)
                    if c is not None and c[2] and c[0] not in KEYWORDS:
                        uses.append((c[0], c[1]))               # handed on whole
                        continue
                    ok = False
                    break
                if not ok or (not uses and not any(
                        toks[i].text == name and toks[i + 1].text == "("
                        for i in range(fn.body_start + 1, fn.body_end))):
                    cand.setdefault((fn.name, n), []).append(None)
                else:
                    cand.setdefault((fn.name, n), []).append(uses)
        good = {k for k, v in cand.items() if None not in v}
        while True:
            drop = {k for k in good
                    if any(u not in good for uses in cand[k] for u in uses)}
            if not drop:
                return good
            good -= drop


def _not_the_function(toks, i):
    """toks[i], a function's name not followed by '(', is something else
    of that name: a member, a tag, a declaration, a label, a function
    pointer declarator."""
    if i > 0 and toks[i - 1].text in (".", "->"):
        return True
    # a struct, union or enum tag of the same name ('struct
    # foo_inherit *inherit'), a goto label ('goto foo_cleanup;',
    # 'foo_cleanup:')
    if i > 0 and toks[i - 1].text in ("struct", "union", "enum", "goto"):
        return True
    # a declaration of a variable or parameter of the same
    # name ('u64 *foo_reserve)' in a parameter list)
    if i > 0 and (toks[i - 1].kind == "id" and toks[i - 1].text not in KEYWORDS or
                  toks[i - 1].text == "*") and \
            i + 1 < len(toks) and toks[i + 1].text in (";", "=", ",", "[", ")"):
        return True
    if i + 1 < len(toks) and toks[i + 1].text == ":" and \
            toks[i - 1].text in (";", "{", "}", ":") and \
            not (i + 2 < len(toks) and toks[i + 2].text == ":"):
        return True
    if i > 1 and toks[i - 1].text == "*" and toks[i - 2].text == "(" and \
            toks[i + 1].text == ")":
        # '(*name)(...)': a function pointer declarator
        return True
    return False


def _kernel_headers(tree):
    """The texts of the kernel's own headers, one at a time."""
    for d in ("include", os.path.join("arch", "x86", "include")):
        for root, _, files in os.walk(os.path.join(tree, d)):
            for f in sorted(files):
                if f.endswith(".h"):
                    with open(os.path.join(root, f), "rb") as fh:
                        yield fh.read().decode("latin-1")


def _build_flags(tree, files):
    """The texts of the Makefiles of the target's directories and the top
    one (where '-DX' defines a macro for its files)."""
    out = []
    dirs = {os.path.dirname(f) for f in files} | {""}
    for d in sorted(dirs):
        for name in ("Makefile", "Kbuild"):
            p = os.path.join(tree, d, name)
            if os.path.isfile(p):
                with open(p, "rb") as fh:
                    out.append(fh.read().decode("latin-1"))
    return out


def _macro_names(src, tree=None):
    """(the target's functions that macro bodies name, file -> its
    preprocessor-disabled lines)."""
    macro_used = set()
    pasted = set()
    dead_lines = {}
    never = csrc.never_defined(list(src.text.values()), _kernel_headers(tree),
                               _build_flags(tree, src.text)) if tree else frozenset()
    for f, text in src.text.items():
        dead_lines[f] = csrc.disabled_lines(text, never)
        for body in csrc.macro_bodies(text):
            for t in csrc.tokenize(body.replace("#", " ")):
                if t.kind == "id" and t.text in src.by_name:
                    macro_used.add(t.text)
            pasted |= _pasted(body)
    # the pasted-in part is one macro argument: a word without '_'
    for name in src.by_name:
        for kind, x in pasted:
            rest = name[len(x):] if kind == "prefix" and name.startswith(x) else \
                name[:-len(x)] if kind == "suffix" and name.endswith(x) else None
            if rest and "_" not in rest:
                macro_used.add(name)
    return macro_used, dead_lines


def _wrapper_macros(src, named):
    """({macro: function}, the functions of named that no other macro body
    names) for the function-like macros whose every definition is one call
    of a target function that passes the macro's parameters, in order, as
    its first arguments and names none of them after those
    ('#define f(h, i) __f((h), (i), __func__, __LINE__)'): a call of the
    macro is a call of the function, with the same first arguments."""
    defs = collections.defaultdict(list)
    for _, (name, params, body) in all_macro_defs(src):
        defs[name].append(_wrapped(src, params, body))
    wrappers = {m: fns[0] for m, fns in defs.items()
                if m not in src.by_name and fns[0] and all(x == fns[0] for x in fns)}
    uses = collections.Counter()
    for f, text in src.text.items():
        for body in csrc.macro_bodies(text):
            uses.update({t.text for t in csrc.tokenize(body.replace("#", " "))
                         if t.kind == "id" and t.text in named})
    defs_of = collections.Counter(fn for m, fn in wrappers.items() for _ in defs[m])
    return wrappers, {fn for fn, n in defs_of.items() if uses[fn] == n}


def _wrapped(src, params, body):
    """The target function a macro body is one wrapping call of, or None."""
    m = re.match(r"^\s*#\s*define\s+\w+\([^)]*\)(.*)$", body[0][1])
    text = " ".join([m.group(1) if m else ""] + [t for _, t in body[1:]])
    toks = list(csrc.tokenize(text.replace("\\", " ")))
    while len(toks) > 2 and toks[0].text == "(" and csrc.match_paren(toks, 0) == len(toks) - 1:
        toks = toks[1:-1]
    if len(toks) < 3 or toks[0].text not in src.by_name or toks[1].text != "(" or \
            csrc.match_paren(toks, 1) != len(toks) - 1 or any("." in p for p in params):
        return None
    args = [toks[lo:hi] for lo, hi in _split(toks, 2, len(toks) - 1)]
    for n, arg in enumerate(args):
        while len(arg) > 2 and arg[0].text == "(" and arg[-1].text == ")":
            arg = arg[1:-1]
        words = [t.text for t in arg]
        if n < len(params) and words != [params[n]] or \
                n >= len(params) and set(words) & set(params):
            return None
    return toks[0].text if len(args) >= len(params) else None


def _pasted(body):
    """{('prefix', x), ('suffix', x)} for the names a macro body pastes a
    call's name from ('x##name(', 'name##x(')."""
    pasted = set()
    # token pasting (prefix_##name, name##_suffix) in a call:
    # any function the pasted name may produce.  A pasted name
    # after a type (a definition the macro generates) is not a
    # call.
    bt = csrc.tokenize(body.replace("##", " @ "))
    for i, t in enumerate(bt):
        if t.text != "@" or i == 0 or i + 1 >= len(bt):
            continue
        j = i - 1
        while j > 0 and bt[j - 1].text == "@":
            j -= 2
        before = bt[j - 1] if j > 0 else None
        if before is not None and (before.text == "*" or (
                before.kind == "id" and before.text not in KEYWORDS)):
            continue
        if bt[i - 1].kind == "id" and len(bt[i - 1].text) >= 8:
            pasted.add(("prefix", bt[i - 1].text))
        if bt[i + 1].kind == "id" and len(bt[i + 1].text) >= 8:
            pasted.add(("suffix", bt[i + 1].text))
    return pasted


def _trace_event_names(tree):
    """Every word of the kernel's trace event headers."""
    outside = set()
    evdir = os.path.join(tree, "include", "trace", "events")
    if os.path.isdir(evdir):
        for name in sorted(os.listdir(evdir)):
            if name.endswith(".h"):
                with open(os.path.join(evdir, name), errors="replace") as fh:
                    outside.update(re.findall(r"\w+", fh.read()))
    return outside
