# SPDX-License-Identifier: GPL-2.0-only
"""Verification stage: which of the series' changed lines the verification
kernel compiles.  A line in a file whose object the build did not make
(foofs_rt.c without CONFIG_FOOFS_RT), or under an #if of a
configuration option the .config leaves unset, is checked by neither the
build nor the boot: verify reports it apart from the live code.

Reads the patches (the files they change), the pristine and the patched
tree's sources (the changed lines, as the build numbers them) and the
build directory (.config, the objects).  A condition this stage cannot decide (one that names anything
but CONFIG_ options) counts as compiled: the report under-counts what is
left out, never what is checked.
"""
import difflib
import re
from pathlib import Path

_DIRECTIVE = re.compile(r"^\s*#\s*(if|ifdef|ifndef|elif|else|endif)\b(.*)$")


def patched_files(patch_texts):
    """The files the patches change (their '+++ b/...' lines)."""
    return sorted({line[6:] for text in patch_texts for line in text.splitlines()
                   if line.startswith("+++ b/")})


def added_lines(old, new):
    """The line numbers of new (text) that are not in old: the series'
    changed lines in the patched file, numbered as the build sees them
    (each patch's own hunk numbers shift with the patches after it)."""
    sm = difflib.SequenceMatcher(None, old.splitlines(), new.splitlines(), autojunk=False)
    return [j + 1 for op, _, _, j1, j2 in sm.get_opcodes() if op in ("replace", "insert")
            for j in range(j1, j2)]


def read_config(path):
    """{CONFIG_X: value} of the options a .config sets."""
    cfg = {}
    for line in Path(path).read_text(errors="replace").splitlines():
        m = re.match(r"^(CONFIG_\w+)=(.*)$", line)
        if m:
            cfg[m.group(1)] = m.group(2)
    return cfg


def condition(kind, expr, cfg):
    """True, False, or None (undecided) for a directive's condition."""
    expr = re.sub(r"/\*.*?\*/|//.*$", "", expr).strip()
    if kind in ("ifdef", "ifndef"):
        if not re.fullmatch(r"CONFIG_\w+", expr):
            return None
        return (expr in cfg) == (kind == "ifdef")
    e = re.sub(r"\b(?:defined|IS_ENABLED|IS_BUILTIN)\s*\(\s*(CONFIG_\w+)\s*\)", r"\1", expr)
    e = re.sub(r"\bdefined\s+(CONFIG_\w+)", r"\1", e)
    e = re.sub(r"\bCONFIG_\w+", lambda m: " True " if m.group(0) in cfg else " False ", e)
    e = e.replace("&&", " and ").replace("||", " or ")
    e = re.sub(r"!(?!=)", " not ", e)
    if re.search(r"[^\s()a-zA-Z]|\b(?!True\b|False\b|and\b|or\b|not\b)[A-Za-z_]\w*", e):
        return None
    try:
        return bool(eval(e, {"__builtins__": {}}))
    except Exception:       # noqa: BLE001 (a malformed condition: undecided)
        return None


def dead_lines(text, cfg):
    """The line numbers of text that the configuration cfg compiles out."""
    dead, stack = set(), []     # each: (this branch live, an earlier branch taken)
    for n, line in enumerate(text.splitlines(), 1):
        m = _DIRECTIVE.match(line)
        if m:
            kind, rest = m.group(1), m.group(2)
            if kind in ("if", "ifdef", "ifndef"):
                c = condition(kind, rest, cfg)
                stack.append((c is not False, c is True))
            elif kind == "elif" and stack:
                _, taken = stack[-1]
                c = condition("if", rest, cfg)
                stack[-1] = (not taken and c is not False, taken or c is True)
            elif kind == "else" and stack:
                _, taken = stack[-1]
                stack[-1] = (not taken, True)
            elif kind == "endif" and stack:
                stack.pop()
            continue
        if not all(live for live, _ in stack):
            dead.add(n)
    return dead


def coverage(files, pristine, patched, out):
    """(changed lines, [(file, line, why)] of those the build in out does not
    compile) of files, from the tree pristine to the tree patched."""
    cfg_path = Path(out) / ".config"
    cfg = read_config(cfg_path) if cfg_path.exists() else {}
    total, left = 0, []
    for f in files:
        try:
            new = (Path(patched) / f).read_text(errors="replace")
            old = (Path(pristine) / f).read_text(errors="replace")
        except OSError:
            continue
        lines = added_lines(old, new)
        total += len(lines)
        if f.endswith(".c") and not (Path(out) / f).with_suffix(".o").exists():
            left += [(f, ln, "file not built") for ln in lines]
            continue
        dead = dead_lines(new, cfg)
        left += [(f, ln, "under an unset option") for ln in lines if ln in dead]
    return total, left


def coverage_row(patches, pristine, patched, out):
    """The summary row: how many changed lines the build compiles."""
    files = patched_files([Path(p).read_text(errors="replace") for p in patches])
    total, left = coverage(files, pristine, patched, out)
    built = sorted({f for f, _, why in left if why == "file not built"})
    opts = sum(1 for _, _, why in left if why != "file not built")
    detail = "%d of %d changed lines compiled" % (total - len(left), total)
    parts = []
    if built:
        parts.append("%d in %d files not built (%s)" % (
            len(left) - opts, len(built),
            ", ".join(Path(f).name for f in built[:4]) + (", ..." if len(built) > 4 else "")))
    if opts:
        parts.append("%d under unset options" % opts)
    if parts:
        detail += "; not by this config: " + ", ".join(parts)
    return ("coverage", True, detail), left
