# SPDX-License-Identifier: GPL-2.0-only
"""Stage 4b: `series --style helpers`, upstream's accessor style.

The default series marks each site in place: READ_ONCE(p->f),
WRITE_ONCE(p->f, v).  In this style a field with at least MIN_SITES such
marks gets static inline accessors next to its struct (helperdefs.py),
a comment on the field naming its protecting lock, and its marked sites
call them: get(p), set(p, v), set(p, get(p) + 1); a read-modify-write
under the lock every store holds keeps its plain read, set(p, p->f + 1),
and so do the loads under that lock, which the default series leaves
plain too.  data_race() sites, owner-read comments and the sites the
default series leaves for a human stay as they are; so do the fields
with fewer marks, the fields whose struct is not defined once in the
target, and those whose accessor names are taken (cover letter).

The edits are the default series' (rewrite.py), turned into accessor
calls after the fact, so the patches, their grouping and every other
hunk stay the default series'; a site whose converted line would pass
100 columns makes its field keep the default marks.  The accessors and
the comment of a field are whole-line edits of the struct's file under
the key ('helpers', struct.field): series.py puts them into the patch
that converts the field's sites.
"""
import collections

from . import csrc, helperdefs as hd, rewrite
from .cstmt import Skip
from .facts import source_files
from .target import subsystem_of

MIN_SITES = 3
MARKS = ("READ_ONCE", "WRITE_ONCE")


class Helpers:
    """What the style did: fields -> helperdefs.Field, the accessors each
    uses, the sites converted, and why other fields keep the marks."""

    def __init__(self, min_sites):
        self.min_sites = min_sites
        self.fields = {}        # struct.field -> Field
        self.uses = {}          # struct.field -> (getter used, setter used)
        self.converted = set()  # site keys calling an accessor
        self.refused = {}       # struct.field -> why it keeps the marks
        self.counts = {}        # struct.field -> its marked sites

    def key(self, name):
        return ("helpers", name)

    def group_keys(self, g):
        """{file: keys} of the accessors and comments of a patch's fields."""
        out = collections.defaultdict(set)
        for n in g["fields"]:
            if n in self.fields:
                out[self.fields[n].file].add(self.key(n))
        return out


def marked_sites(sites, applied):
    """struct.field -> the sites the default series marks with READ_ONCE()
    or WRITE_ONCE()."""
    out = collections.defaultdict(list)
    for s in sites:
        k = (s["file"], s["line"], s["column"])
        if k in applied and s["action"] in MARKS and s["rule"] != "owner-read":
            out["%s.%s" % (s["struct"], s["field"])].append(s)
    return out


def apply(tree, plan, sites, edits, applied, min_sites=MIN_SITES, policies_dir=None):
    """Turn the default edits ({file: rewrite.Edits}, changed in place) into
    accessor calls and add the accessors; returns Helpers."""
    H = Helpers(min_sites)
    per = marked_sites(sites, applied)
    H.counts = {n: len(v) for n, v in per.items()}
    cands = sorted(n for n, v in per.items() if len(v) >= min_sites)
    choose(H, tree, plan, cands, policies_dir)
    orig = {f: list(E.items) for f, E in edits.items()}
    for E in edits.values():
        E.wide = True
    while True:
        for f, E in edits.items():
            E.items = list(orig[f])
        bad = convert(H, edits, per, applied)
        if not bad:
            break
        for name, why in bad.items():
            H.refused[name] = why
            del H.fields[name]
    for name in sorted(H.fields):
        add_definitions(H, edits, name)
    return H


def choose(H, tree, plan, cands, policies_dir=None):
    """The candidate fields' structs, declarations and names."""
    target = plan["target"]
    files = source_files(tree, target)
    sub = subsystem_of(target)
    prefix = sub + "_"
    names = hd.naming(sub, policies_dir)["struct_names"]
    structs = {n.split(".", 1)[0] for n in cands}
    defs = hd.find_struct_defs(tree, files, structs)
    taken = hd.taken_names(tree, files, prefix) if cands else set()
    given = set()
    for name in cands:
        struct, field = name.split(".", 1)
        d = defs.get(struct, [])
        if len(d) != 1:
            H.refused[name] = "struct %s is defined %s in %s" % (
                struct, "%d times" % len(d) if d else "nowhere", target)
            continue
        sdef = hd.StructDef(d[0][0], d[0][1], d[0][2], struct, d[0][3])
        got, why = hd.field_decl(sdef, field)
        if got is None:
            H.refused[name] = "%s is %s" % (field, why)
            continue
        F = hd.Field(struct, field, sdef, got[0], got[1], got[2])
        if F.conds is None:
            H.refused[name] = "%s is declared in an #else branch" % field
            continue
        short = hd.short_name(struct, prefix, names)
        F.getter = "%sget_%s_%s" % (prefix, short, field)
        F.setter = "%sset_%s_%s" % (prefix, short, field)
        clash = [x for x in (F.getter, F.setter) if x in taken or x in given]
        if clash:
            H.refused[name] = "%s() is already a name in the tree" % clash[0]
            continue
        given.update((F.getter, F.setter))
        F.param = hd.param_name(plan, struct, field)
        F.value = field if field != F.param else "val"
        if hd.getter_text(F) is None or hd.setter_text(F) is None:
            H.refused[name] = "the accessors' heads would pass 100 columns"
            continue
        info = plan["fields"].get(name, {})
        F.lock = info.get("lock")
        share = info.get("share") or [0, 0]
        F.partial = bool(F.lock) and share[0] < share[1]
        H.fields[name] = F


# ------------------------------------------------------------ the sites

def convert(H, edits, per, applied):
    """Convert the sites of H.fields; {field: why} of the fields a site of
    which could not be converted (they keep the default marks)."""
    bad = {}
    H.converted = set()
    H.uses = {}
    byfile = collections.defaultdict(list)
    for name in H.fields:
        for s in per[name]:
            byfile[s["file"]].append(s)
    for f, ss in sorted(byfile.items()):
        E = edits[f]
        orig = list(E.items)
        ss.sort(key=lambda s: _span(E, s))
        for s in ss:
            name = "%s.%s" % (s["struct"], s["field"])
            try:
                get, put = convert_site(E, orig, s, H.fields[name])
            except Skip as e:
                bad.setdefault(name, "%s:%d: %s" % (f, s["line"], e))
                continue
            H.converted.add(_key(s))
            g0, p0 = H.uses.get(name, (False, False))
            H.uses[name] = (g0 or get, p0 or put)
        keys = {k for k in applied if k[0] == f}
        for k in rewrite.long_line_keys(E, keys) & H.converted:
            s = next(x for x in ss if _key(x) == k)
            bad.setdefault("%s.%s" % (s["struct"], s["field"]),
                           "%s:%d: the line with the accessor would pass 100 columns"
                           % (f, s["line"]))
    return bad


def _key(s):
    return (s["file"], s["line"], s["column"])


def _span(E, s):
    """Inner sites first: the length of the access."""
    i = E.S.at.get((s["line"], s["column"]))
    j = csrc.base_start(E.S.toks, i - 1) if i else None
    return E.S.end(i) - E.S.off(j) if j is not None else 0


def _render(E, items, key, a, b):
    """The text [a, b) with the edits, in items, of the sites inside it
    other than key (as rewrite._resolve_late renders a copied target)."""
    keep = E.items
    E.items = items
    try:
        keys = {x[0] for x in items if x[0] != key and a <= x[2] and x[5] <= b}
        return E.render(keys, a, b)
    finally:
        E.items = keep


def convert_site(E, orig, s, F):
    """Replace the marks of one site by accessor calls; (getter used,
    setter used).  orig: the items before any conversion (the default
    rewrite copied targets rendered with them)."""
    S, key = E.S, _key(s)
    i = S.at.get((s["line"], s["column"]))
    j = csrc.base_start(S.toks, i - 1) if i else None
    if j is None:
        raise Skip("the access is not found")
    a, b, opoff = S.off(j), S.end(i), S.off(i - 1)
    amp = "&" if S.txt(i - 1) == "." else ""
    if amp and S.txt(i - 2) == ")" and _is_call(S, i - 2):
        raise Skip("the struct is the value of a call")
    old = _render(E, orig, key, a, b)
    base = _render(E, E.items, key, a, opoff)
    tgt = base + S.text[opoff:b]
    mine = [it for it in E.items if it[0] == key]
    rest = [it for it in E.items if it[0] != key]
    head = [it for it in mine if it[4] in ("READ_ONCE(", "WRITE_ONCE(") and a in (it[2], it[5])]
    tail = [it for it in mine if it[2] == b and it[1] in ("ins", "rep") and
            (it[4] == ")" or it[4].startswith(","))]
    hoist = [it for it in mine if it[1] == "ins" and
             it[4].startswith("WRITE_ONCE(%s, %s " % (old, old))]
    other = [it for it in mine if it not in head + tail + hoist]
    if hoist and not head and not tail:
        it = hoist[0]
        text = "%s(%s%s, %s" % (F.setter, amp, base, tgt) + \
            it[4][len("WRITE_ONCE(%s, %s" % (old, old)):]
        E.items = rest + other + [it[:4] + (text,) + it[5:]]
        return False, True
    if len(head) != 1 or len(tail) != 1:
        raise Skip("a form the accessors do not take")
    h, t = head[0], tail[0]
    if h[4] == "READ_ONCE(":
        if t[4] != ")":
            raise Skip("a form the accessors do not take")
        new = [h[:4] + (F.getter + "(" + amp,) + h[5:], (key, "rep", opoff, (1, 0), ")", b)]
        E.items = rest + other + new
        return True, False
    get, text = _value(t[4], old, tgt, F, amp + base)
    new = [h[:4] + (F.setter + "(" + amp,) + h[5:], (key, "rep", opoff, (1, 0), text, t[5])]
    E.items = rest + other + new
    return get, True


def _value(text, old, tgt, F, arg):
    """The text after the target of a store or read-modify-write: ', v',
    ', READ_ONCE(<target>) op v' or ', <target> op v'; (getter used,
    text with the accessor)."""
    if text in (",", ", "):
        return False, text
    marked = ", READ_ONCE(%s)" % old
    if text.startswith(marked):
        return True, ", %s(%s)" % (F.getter, arg) + text[len(marked):]
    plain = ", %s " % old
    if text.startswith(plain):
        return False, ", %s " % tgt + text[len(plain):]
    raise Skip("a form the accessors do not take")


def _is_call(S, k):
    o = S.open_of(k)
    return o is not None and o > 0 and S.toks[o - 1].kind == "id" and \
        S.txt(o - 1) not in ("sizeof", "typeof", "__typeof__")


# ------------------------------------------------------------ definitions

def add_definitions(H, edits, name):
    """The accessors of a field after its struct, the comment above its
    declaration: whole lines under the field's key."""
    F = H.fields[name]
    get, put = H.uses.get(name, (False, False))
    E = edits.get(F.file)
    if E is None:
        E = edits[F.file] = rewrite.Edits(F.sdef.text)
    key = H.key(name)
    order = (0, F.decl_line)
    text = hd.definitions(F, get, put)
    if F.sdef.blank_after:
        # after the blank line that follows the struct, each with its own
        E.line(key, _next_line(F.sdef.text, F.sdef.after), text, order)
    else:
        E.line(key, F.sdef.after, "\n" + text[:-1], order)
        E.line(key, F.sdef.after, "\n", (1, 0))
    for it in hd.field_comment(F, get, put):
        if it[0] == "cut":
            E.replace(key, it[1], it[2], "")
        else:
            E.line(key, it[1], it[2], order)


def _next_line(text, off):
    n = text.find("\n", off)
    return len(text) if n < 0 else n + 1
