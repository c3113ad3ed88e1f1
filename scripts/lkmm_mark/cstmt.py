# SPDX-License-Identifier: GPL-2.0-only
"""Statement-level helpers of the rewrite (stage 4): display width, the
statement a token is in, comment lines, indentation.  S is a
rewrite.Source (tokens with .txt() and .toks)."""


class Skip(Exception):
    """A site the rewrite leaves for a human; the message says why."""


def width(s):
    """Display width with 8-column tabs."""
    w = 0
    for ch in s:
        w = (w // 8 + 1) * 8 if ch == "\t" else w + 1
    return w


def statement_start(S, j):
    """Token index of the first token of the statement containing token j."""
    depth = 0
    k = j - 1
    while k >= 0:
        x = S.txt(k)
        if x in (")", "]"):
            depth += 1
        elif x in ("(", "["):
            if depth == 0:
                pass  # we are inside these parentheses; keep going out
            else:
                depth -= 1
        elif depth == 0 and x in (";", "{", "}"):
            return k + 1
        elif depth == 0 and x == ":" and k >= 1 and \
                (S.toks[k - 1].kind == "id" or S.txt(k - 1) == "default"):
            # label, 'default:' or 'case X:' (a ternary ':' has a '?' before)
            q = k - 1
            while q >= 0 and S.txt(q) not in (";", "{", "}", "?"):
                q -= 1
            if q < 0 or S.txt(q) != "?":
                return k + 1
        k -= 1
    return 0


def comment_words(text, indent, limit=80):
    """The words of text, filled into the lines of a block comment
    (' * ' lines at indent, none past limit columns)."""
    lines, cur = [], ""
    for w in text.split():
        if cur and width("%s * %s %s" % (indent, cur, w)) > limit:
            lines.append(cur)
            cur = w
        else:
            cur = (cur + " " + w).strip()
    return lines + [cur] if cur else lines


def comment_lines(text, indent, limit=80):
    one = "%s/* %s */\n" % (indent, text)
    if width(one.rstrip("\n")) <= limit:
        return one
    lines = comment_words(text, indent, limit)
    return "%s/*\n%s%s */\n" % (indent, "".join("%s * %s\n" % (indent, l) for l in lines),
                                indent)


def indent_to(col):
    """White space to display column col, tabs first (kernel style)."""
    return "\t" * (col // 8) + " " * (col % 8)
