# SPDX-License-Identifier: GPL-2.0-only
"""Stage 5b, accessor style: the words `series --style helpers` adds to
the default series' messages (messages.py): in each patch, a paragraph
saying which accessors it adds next to which struct, with the field's
comment, and which fields of the patch keep READ_ONCE()/WRITE_ONCE();
in the cover letter, the style, its threshold and its counts.

Reads helperstyle.Helpers and the groups; returns text.
"""
from .messages import plural, short, wrap
from .target import subsystem_of


def _names(F, get, put):
    fs = [x for x, used in ((F.getter, get), (F.setter, put)) if used]
    return " and ".join("%s()" % x for x in fs)


def _lock_clause(F):
    if not F.lock:
        return "saying that no lock protects it"
    return "naming %s, the lock %s" % (F.lock.replace(".", "::"), "most of its writers hold"
                                      if F.partial else "its writers hold")


def _built_on(uses):
    m = [x for x, i in (("READ_ONCE()", 0), ("WRITE_ONCE()", 1)) if any(u[i] for u in uses)]
    return " and ".join(m)


def patch_text(g, H, target):
    """The paragraph of one patch: the accessors it adds and the fields of
    the patch that keep READ_ONCE()/WRITE_ONCE(), and why; None when it
    has neither."""
    bystruct = {}
    for n in g["fields"]:
        if n in H.fields:
            bystruct.setdefault((H.fields[n].struct, H.fields[n].file), []).append(n)
    paras = [(_one if len(names) == 1 else _many)(H, names, struct, short(f, target))
             for (struct, f), names in sorted(bystruct.items())]
    for n in g["fields"]:
        if n in H.fields or n not in H.counts:
            continue
        why = H.refused.get(n) or "%s marked with READ_ONCE() or WRITE_ONCE(), " \
            "accessors start at %d" % (plural(H.counts[n], "site"), H.min_sites)
        paras.append("%s keeps READ_ONCE()/WRITE_ONCE() (%s)." % (
            n.replace(".", "::"), _short_why(why, target)))
    return wrap(" ".join(paras)) if paras else None


def _one(H, names, struct, where):
    F = H.fields[names[0]]
    get, put = H.uses.get(names[0], (False, False))
    return "This patch adds %s, static inline wrappers of %s, next to struct %s (%s), " \
        "and a comment on %s %s; the marked sites of the field call them." % (
            _names(F, get, put), _built_on([(get, put)]), struct, where,
            names[0].replace(".", "::"), _lock_clause(F))


def _many(H, names, struct, where):
    F = H.fields[names[0]]
    fs = [n.split(".", 1)[1] for n in names]
    return "This patch adds static inline accessors for %s and %s next to struct %s " \
        "(%s): %s<field>() wrapping READ_ONCE() and %s<field>() wrapping WRITE_ONCE(), " \
        "and a comment on each of these fields naming the lock its writers hold, if " \
        "any; the marked sites of these fields call them." % (
            ", ".join(fs[:-1]), fs[-1], struct, where, F.getter[:-len(F.field)],
            F.setter[:-len(F.field)])


def cover_text(H, target):
    """The cover letter's paragraph on the style."""
    sub = subsystem_of(target)
    few = sorted(n for n, c in H.counts.items() if c < H.min_sites)
    nsites = len(H.converted)
    text = wrap(
        "Style: accessors (lkmm-mark series --style helpers). A field with at least "
        "%d sites marked with READ_ONCE() or WRITE_ONCE() gets static inline "
        "%s_get_<struct>_<field>() and %s_set_<struct>_<field>() accessors on them "
        "next to its struct (in the header or the .c file that defines it) and a "
        "comment on the field naming its protecting lock; its marked sites call "
        "them. Its loads under the lock every store holds stay plain, as does the "
        "read of a read-modify-write under that lock, and its data_race() sites "
        "stay. %s have accessors, called at %s; %s with fewer marked sites keep "
        "READ_ONCE()/WRITE_ONCE()." % (
            H.min_sites, sub, sub, plural(len(H.fields), "field"), plural(nsites, "site"),
            plural(len(few), "field")))
    if H.refused:
        text += "\n\n" + wrap("Fields with enough marked sites that keep "
                              "READ_ONCE()/WRITE_ONCE():") + "\n" + "\n".join(
            wrap("  %s: %s" % (n.replace(".", "::"), _short_why(why, target)), indent="    ")
            for n, why in sorted(H.refused.items()))
    return text


def summary(H):
    """The command's line on the style."""
    return "accessors: %d fields, %d sites call them; %d fields with fewer than %d " \
        "marked sites and %d others keep READ_ONCE()/WRITE_ONCE()" % (
            len(H.fields), len(H.converted),
            sum(1 for c in H.counts.values() if c < H.min_sites), H.min_sites, len(H.refused))


def _short_why(why, target):
    t = target.rstrip("/") + "/"
    return why.replace(t, "") if t in why else why


REPRODUCE = "  scripts/lkmm-mark series --style helpers   # writes patches/helpers/"
