# SPDX-License-Identifier: GPL-2.0-only
"""Verification stage: which of the series' changed lines the verification
kernel compiles.  A line in a file whose object the build did not make
(foofs_rt.c without CONFIG_FOOFS_RT), or under an #if of a
configuration option the .config leaves unset, is checked by neither the
build nor the boot: verify reports it apart from the live code.

Reads the patches (each hunk's added lines, numbered in the patched
tree), the patched tree's sources and the build directory (.config, the
objects).  A condition this stage cannot decide (one that names anything
but CONFIG_ options) counts as compiled: the report under-counts what is
left out, never what is checked.
"""
import re
from pathlib import Path

_HUNK = re.compile(r"^@@ -\d+(?:,\d+)? \+(\d+)(?:,\d+)? @@")
_DIRECTIVE = re.compile(r"^\s*#\s*(if|ifdef|ifndef|elif|else|endif)\b(.*)$")


def added_lines(patch_texts):
    """{file: sorted line numbers in the patched tree} of every added line."""
    out = {}
    for text in patch_texts:
        f, ln = None, 0
        for line in text.splitlines():
            if line.startswith("+++ "):
                f = line[4:].split("/", 1)[1] if line[4:].startswith("b/") else None
            elif line.startswith("@@"):
                m = _HUNK.match(line)
                ln = int(m.group(1)) if m else 0
            elif f and ln and line.startswith("+"):
                out.setdefault(f, set()).add(ln)
                ln += 1
            elif f and ln and not line.startswith("-") and not line.startswith("\\"):
                ln += 1
    return {f: sorted(v) for f, v in out.items()}


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


def coverage(patch_texts, src, out):
    """(changed lines, [(file, line, why)] of those the build in out does not
    compile) for the series patch_texts applied in the tree src."""
    cfg_path = Path(out) / ".config"
    cfg = read_config(cfg_path) if cfg_path.exists() else {}
    total, left = 0, []
    for f, lines in sorted(added_lines(patch_texts).items()):
        total += len(lines)
        p = Path(src) / f
        if f.endswith(".c") and not (Path(out) / f).with_suffix(".o").exists():
            left += [(f, ln, "file not built") for ln in lines]
            continue
        try:
            dead = dead_lines(p.read_text(errors="replace"), cfg)
        except OSError:
            continue
        left += [(f, ln, "under an unset option") for ln in lines if ln in dead]
    return total, left


def coverage_row(patches, src, out):
    """The summary row: how many changed lines the build compiles."""
    total, left = coverage([Path(p).read_text(errors="replace") for p in patches], src, out)
    files = sorted({f for f, _, why in left if why == "file not built"})
    opts = sum(1 for _, _, why in left if why != "file not built")
    detail = "%d of %d changed lines compiled" % (total - len(left), total)
    parts = []
    if files:
        parts.append("%d in %d files not built (%s)" % (
            len(left) - opts, len(files),
            ", ".join(Path(f).name for f in files[:4]) + (", ..." if len(files) > 4 else "")))
    if opts:
        parts.append("%d under unset options" % opts)
    if parts:
        detail += "; not by this config: " + ", ".join(parts)
    return ("coverage", True, detail), left
