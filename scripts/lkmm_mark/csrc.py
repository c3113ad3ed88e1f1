# SPDX-License-Identifier: GPL-2.0-only
"""Light C source reading: tokens, function bodies, struct layouts.

spatch supplies the access facts; this module supplies what SmPL does not
hand to a script easily: the token order inside each function (for lock
regions and call sites) and the declared type of each struct member (for
the exclusions: bitfields, arrays, __rcu, atomics, locks, embedded
structs).
"""
import re
import sys
from array import array
from bisect import bisect_left

# One match per token, the blanks before it included (a match per blank
# run as well made the tokenizer a fifth slower).
_TOKEN = re.compile(r"""
    [ \t\r\f\v]*
    (?:
      (?P<nl>\n)
    | (?P<lc>//[^\n]*)
    | (?P<bc>/\*.*?\*/)
    | (?P<pp>\#(?:[^\n\\]|\\.|\\\n)*)
    | (?P<str>"(?:[^"\\\n]|\\.)*")
    | (?P<chr>'(?:[^'\\\n]|\\.)*')
    | (?P<id>[A-Za-z_]\w*)
    | (?P<num>\.?\d(?:[\w.]|[eEpP][+-])*)
    | (?P<op>->|\+\+|--|<<=|>>=|<<|>>|<=|>=|==|!=|&&|\|\||[-+*/%&|^]=|\.\.\.|[^\s])
    )""", re.X | re.S)
_CODE = frozenset(("id", "op", "num", "str", "chr"))


class Tok:
    __slots__ = ("kind", "text", "line", "col", "ecol")

    def __init__(self, kind, text, line, col):
        self.kind = kind
        self.text = text
        self.line = line
        self.col = col
        self.ecol = col + len(text)

    def __repr__(self):
        return "%s@%d:%d" % (self.text, self.line, self.col)


class Toks(list):
    """A list of tokens; index_parens() keeps its bracket tables on it, so
    that they live exactly as long as the tokens."""
    __slots__ = ("closing", "opening")


def tokenize(src):
    """Tokens with 1-based line and 0-based column, as spatch reports them.
    Comments and preprocessor lines are dropped (code in both branches of an
    #ifdef is kept, as spatch does)."""
    toks = Toks()
    append = toks.append
    match = _TOKEN.match
    line = 1
    lstart = 0
    at_line_start = True
    pos = 0
    n = len(src)
    while pos < n:
        m = match(src, pos)
        if m is None:
            # blanks at the end, or an odd one (a no-break space): skipped
            while pos < n and src[pos] in " \t\r\f\v":
                pos += 1
            pos += 1
            continue
        pos = m.end()
        kind = m.lastgroup
        if kind in _CODE:
            at_line_start = False
            text = m.group(kind)
            # the 645 000 tokens of the default target spell 13 000
            # texts: one string each
            append(Tok(kind, _intern(text), line, pos - len(text) - lstart))
            continue
        if kind == "nl":
            line += 1
            lstart = pos
            at_line_start = True
            continue
        start = m.start(kind)
        if kind == "pp" and not at_line_start:
            # '#' inside a line (stringify in a macro body): an operator,
            # and the tokens after it are read as usual
            append(Tok("op", "#", line, start - lstart))
            pos = start + 1
            continue
        text = m.group(kind)
        k = text.count("\n")
        if k:
            line += k
            lstart = start + text.rfind("\n") + 1
    return toks


_intern = sys.intern


class TokIndex:
    """(line, col) -> index of the token there, for a token list in source
    order: a bisection over the packed positions, as .get() of a dict.
    A dict of (line, col) tuples over the default target took 85 MB and
    0.4 s to build; these arrays take 5 MB and 0.1 s."""
    __slots__ = ("keys",)

    def __init__(self, toks):
        self.keys = array("q", [t.line << 24 | t.col for t in toks])

    def get(self, lc, default=None):
        k = lc[0] << 24 | lc[1]
        keys = self.keys
        i = bisect_left(keys, k)
        if i < len(keys) and keys[i] == k:
            return i
        return default


def index_parens(toks):
    """Precompute match_paren() and open_of() for every bracket of toks (a
    Toks from tokenize())."""
    n = len(toks)
    tab = [n] * n
    stacks = {"(": [], "[": [], "{": []}
    close = {")": "(", "]": "[", "}": "{"}
    back = [-1] * n
    for i, t in enumerate(toks):
        x = t.text
        if x in stacks:
            stacks[x].append(i)
        elif x in close:
            st = stacks[close[x]]
            if st:
                o = st.pop()
                tab[o] = i
                back[i] = o
    toks.closing = tab
    toks.opening = back


def open_of(toks, i):
    """Index of the bracket opening the closing bracket toks[i], or -1."""
    back = getattr(toks, "opening", None)
    if back is not None:
        return back[i]
    close = toks[i].text
    return _scan(toks, i, -1, close, {")": "(", "]": "[", "}": "{"}[close], -1)


def _scan(toks, i, step, here, other, none):
    """Walk from toks[i] by step until the bracket 'here' at i is balanced
    by 'other'; the index there, or none."""
    depth = 0
    n = len(toks)
    while 0 <= i < n:
        x = toks[i].text
        if x == here:
            depth += 1
        elif x == other:
            depth -= 1
            if depth == 0:
                return i
        i += step
    return none


_NOT_CALL = {"if", "while", "for", "switch", "return", "sizeof", "typeof", "__typeof__",
             "case", "do", "else"}


def base_start(toks, k):
    """Start index of the postfix expression ending at toks[k - 1], the
    base of the member access whose '->' or '.' is toks[k]: 'a', 'f(x)',
    '(*p)', 'a->b[i]', 'x.y'.  None when it is not one."""
    j = k - 1
    while j >= 0:
        t = toks[j]
        if t.text == "]":
            o = open_of(toks, j)
            if o <= 0:
                return None
            j = o - 1
            continue
        if t.text == ")":
            o = open_of(toks, j)
            if o < 0:
                return None
            if o > 0 and toks[o - 1].kind == "id" and toks[o - 1].text not in _NOT_CALL:
                j = o - 1               # a call: f(...)
            elif o > 0 and toks[o - 1].text == ")":
                j = o - 1               # a call through a pointer: (*fp)(...)
                continue
            else:
                j = o                   # parenthesised
        elif t.kind not in ("id", "num", "str"):
            return None
        if j > 0 and toks[j - 1].text in ("->", "."):
            j -= 2
            continue
        return j
    return None


def remembered(table, obj, make, *key):
    """make()'s answer for obj (and key), remembered in table by obj's id;
    the entry keeps obj, so that its id is not reused while it is there
    (a token list, a lock table: objects without attributes of their own)."""
    k = (id(obj),) + key
    c = table.get(k)
    if c is None or c[0] is not obj:
        c = table[k] = (obj, make())
    return c[1]


def match_paren(toks, i):
    """Index of the bracket closing toks[i] ('(' '[' '{'), or len(toks)."""
    tab = getattr(toks, "closing", None)
    if tab is not None:
        return tab[i]
    open_ = toks[i].text
    return _scan(toks, i, 1, open_, {"(": ")", "[": "]", "{": "}"}[open_], len(toks))


ANNOT = {"__must_hold", "__releases", "__acquires", "__attribute__", "__printf",
         "__cold", "__init", "__exit", "__maybe_unused", "noinline", "__always_inline"}


class Function:
    __slots__ = ("name", "file", "line", "body_start", "body_end", "annots", "static",
                 "ret", "_types", "_own_decls", "broken")

    def __init__(self, name, file, line, body_start, body_end, annots, static, ret):
        self.name = name
        self.file = file
        self.line = line
        self.body_start = body_start   # index of '{'
        self.body_end = body_end       # index of '}'
        self.annots = annots           # [(name, [tokens])]
        self.static = static
        self.ret = ret                 # return type text
        self._types = None
        self._own_decls = None         # tokutil.own_decls()
        self.broken = False


def find_functions(toks, file):
    """Top-level function definitions."""
    funcs = []
    i = 0
    n = len(toks)
    stmt_start = 0
    while i < n:
        t = toks[i].text
        if t == "{":
            j = match_paren(toks, i)
            broken = j >= n
            if broken:
                # braces that do not balance (both branches of an #if
                # around one are kept): the body ends at the first '}' of
                # the first column, as kernel style writes a function's
                j = next((x for x in range(i + 1, n) if toks[x].text == "}" and
                          toks[x].col == 0), n - 1)
            k = i - 1
            annots = []
            # skip trailing annotations: __must_hold(x) etc.
            while k > stmt_start and toks[k].text == ")":
                o = _open_of(toks, k, stmt_start)
                if o is None or o - 1 < stmt_start:
                    break
                prev = toks[o - 1]
                if prev.kind == "id" and (prev.text in ANNOT or prev.text.startswith("__")) \
                        and o - 2 >= stmt_start and toks[o - 2].text == ")":
                    annots.append((prev.text, toks[o + 1:k]))
                    k = o - 2
                    continue
                if prev.kind == "id" and prev.text not in ("if", "while", "for", "switch",
                                                           "sizeof", "__attribute__"):
                    head = toks[stmt_start:o - 1]
                    if not any(x.text in ("=", "struct", "union", "enum") and
                               x is head[-1] for x in head[-1:]) and \
                            not any(x.text == "=" for x in head):
                        static = any(x.text == "static" for x in head)
                        ret = " ".join(x.text for x in head
                                       if x.text not in ("static", "inline", "noinline",
                                                         "__always_inline", "__cold",
                                                         "__init", "__exit", "extern",
                                                         "__maybe_unused"))
                        # the params themselves may hold a __must_hold-style annotation
                        fn = Function(prev.text, file, prev.line, i, j, annots, static, ret)
                        fn.broken = broken
                        funcs.append(fn)
                break
            i = j + 1
            stmt_start = i
            continue
        if t == ";":
            stmt_start = i + 1
        i += 1
    return funcs


def _open_of(toks, k, lo):
    o = open_of(toks, k)
    return o if o >= lo else None


# ---------------------------------------------------------------- structs

SCALAR_WORDS = {
    "char", "short", "int", "long", "unsigned", "signed", "bool", "_Bool", "float",
    "double", "u8", "u16", "u32", "u64", "s8", "s16", "s32", "s64", "__u8", "__u16",
    "__u32", "__u64", "__s8", "__s16", "__s32", "__s64", "__le16", "__le32", "__le64",
    "__be16", "__be32", "__be64", "size_t", "ssize_t", "loff_t", "pid_t", "gfp_t",
    "blk_status_t", "sector_t", "dev_t", "fmode_t", "time64_t", "ktime_t", "uid_t",
    "gid_t", "umode_t", "blk_opf_t", "blk_mode_t", "phys_addr_t", "dma_addr_t",
    "uintptr_t", "unsigned", "uint", "ulong", "int8_t", "int16_t", "int32_t", "int64_t",
    "uint8_t", "uint16_t", "uint32_t", "uint64_t", "pgoff_t", "vm_fault_t",
    "blkcnt_t", "nlink_t", "ino_t", "off_t", "clockid_t",
}
QUALIFIERS = {"const", "volatile", "struct", "union", "enum", "__packed", "__aligned",
              "____cacheline_aligned", "____cacheline_aligned_in_smp", "__randomize_layout",
              "__attribute__"}


class Member:
    __slots__ = ("name", "type", "pointer", "array", "bitfield", "rcu", "volatile",
                 "category", "line", "file")

    def as_dict(self):
        return {k: getattr(self, k) for k in self.__slots__}


def _classify(type_toks, pointer, array, bitfield, rcu, typedefs):
    """Whether READ_ONCE()/WRITE_ONCE() can take this member, and why not."""
    if bitfield:
        return "bitfield"
    if array:
        return "array"
    if rcu:
        return "rcu"
    if pointer:
        return "scalar"
    words = [t for t in type_toks if t not in ("const", "volatile")]
    if not words:
        return "unknown"
    if words[0] == "enum":
        return "scalar"
    if words[0] in ("struct", "union"):
        return "aggregate"
    base = words[-1]
    if all(w in SCALAR_WORDS for w in words):
        return "scalar"
    seen = set()
    while base in typedefs and base not in seen:
        seen.add(base)
        base = typedefs[base]
        if base in ("struct", "union"):
            return "aggregate"
        if base == "pointer" or base in SCALAR_WORDS or base == "enum":
            return "scalar"
    if base in SCALAR_WORDS:
        return "scalar"
    return "opaque:" + base


def parse_typedefs(toks, typedefs):
    """typedef lines we can use: 'typedef u64 foo;' 'typedef struct x y;'."""
    i = 0
    n = len(toks)
    while i < n:
        if toks[i].text == "typedef":
            j = i
            depth = 0
            while j < n and not (toks[j].text == ";" and depth == 0):
                if toks[j].text in "({[":
                    depth += 1
                elif toks[j].text in ")}]":
                    depth -= 1
                j += 1
            body = [t.text for t in toks[i + 1:j]]
            if body and body[-1] not in (")",) and "(" not in body:
                name = body[-1]
                rest = body[:-1]
                if "*" in rest:
                    typedefs[name] = "pointer"
                elif rest and rest[0] in ("struct", "union"):
                    typedefs[name] = "struct"
                elif rest and rest[0] == "enum":
                    typedefs[name] = "enum"
                elif rest:
                    typedefs[name] = rest[-1]
            i = j
        i += 1


def parse_structs(toks, file, structs):
    """struct NAME { members }, flattening anonymous unions/structs."""
    i = 0
    n = len(toks)
    while i < n - 2:
        if toks[i].text in ("struct", "union") and toks[i + 1].kind == "id" \
                and toks[i + 2].text == "{":
            name = toks[i + 1].text
            j = match_paren(toks, i + 2)
            members = {}
            _members(toks, i + 3, j, file, members, structs, name)
            if name not in structs or not structs[name]:
                structs[name] = members
            i = j
        i += 1


def _members(toks, lo, hi, file, out, structs, outer):
    i = lo
    while i < hi:
        # one declaration up to ';' at this level
        j = i
        parts = []
        while j < hi and toks[j].text != ";":
            if toks[j].text == "{":
                k = match_paren(toks, j)
                parts.append(("block", j, k))
                j = k + 1
                continue
            if toks[j].text in ("(", "["):
                k = match_paren(toks, j)
                parts.append(("group", j, k))
                j = k + 1
                continue
            parts.append(("tok", j, j))
            j += 1
        _declaration(toks, parts, file, out, structs, outer)
        i = j + 1


def _declaration(toks, parts, file, out, structs, outer):
    if not parts:
        return
    blocks = [p for p in parts if p[0] == "block"]
    if blocks:
        b = blocks[0]
        kw_idx = b[1] - 1
        tag = toks[kw_idx].text if toks[kw_idx].kind == "id" else None
        after = [p for p in parts if p[1] > b[2]]
        names = [toks[p[1]].text for p in after if p[0] == "tok" and toks[p[1]].kind == "id"]
        if not names:
            # anonymous: members belong to the outer struct
            _members(toks, b[1] + 1, b[2], file, out, structs, outer)
            return
        inner = {}
        _members(toks, b[1] + 1, b[2], file, inner, structs, outer)
        tname = tag if tag not in (None, "struct", "union") else "%s::%s" % (outer, names[0])
        structs.setdefault(tname, inner)
        for nm in names:
            m = Member()
            m.name, m.type, m.pointer, m.array, m.bitfield = nm, "struct " + tname, False, False, False
            m.rcu = m.volatile = False
            m.category = "aggregate"
            m.line, m.file = toks[b[1]].line, file
            out[nm] = m
        return
    # split declarators on ','
    decls = [[]]
    for p in parts:
        if p[0] == "tok" and toks[p[1]].text == ",":
            decls.append([])
        else:
            decls[-1].append(p)
    base_type = None
    for d in decls:
        info = _declarator(toks, d, base_type)
        if info is None:
            continue
        name, type_toks, pointer, array, bitfield, rcu, line = info
        if base_type is None:
            base_type = type_toks
        m = Member()
        m.name = name
        m.type = " ".join(type_toks) + (" *" if pointer else "")
        m.pointer, m.array, m.bitfield, m.rcu = pointer, array, bitfield, rcu
        m.volatile = "volatile" in type_toks
        m.category = (type_toks, pointer, array, bitfield, rcu)  # classified later
        m.line, m.file = line, file
        out[name] = m


def _declarator(toks, d, base_type):
    words = []
    name = None
    pointer = array = bitfield = rcu = False
    line = None
    k = 0
    while k < len(d):
        kind, a, b = d[k]
        if kind == "group" and toks[a].text == "(":
            inner = [t.text for t in toks[a + 1:b]]
            prev = toks[d[k - 1][1]].text if k else ""
            if prev == "__attribute__" or prev.startswith("__aligned") or prev == "__counted_by":
                k += 1
                continue
            if inner and inner[0] == "*":
                # function pointer or pointer to array: (*name)(...)
                pointer = True
                ids = [t for t in toks[a + 1:b] if t.kind == "id" and t.text != "__rcu"]
                if ids:
                    name = ids[-1].text
                    line = ids[-1].line
                break
            k += 1
            continue
        if kind == "group" and toks[a].text == "[":
            array = True
            k += 1
            continue
        t = toks[a]
        if t.text == ":":
            bitfield = True
            break
        if t.text == "*":
            pointer = True
        elif t.text == "__rcu":
            rcu = True
        elif t.kind == "id":
            if name is not None:
                words.append(name)
            name = t.text
            line = t.line
        k += 1
    if name is None:
        return None
    if not words and base_type is not None:
        words = list(base_type)
    words = [w for w in words if w not in ("__rcu",) and not w.startswith("____cacheline")]
    return name, words, pointer, array, bitfield, rcu, line


def finish_structs(structs, typedefs):
    for members in structs.values():
        for m in members.values():
            if isinstance(m.category, tuple):
                tt, ptr, arr, bf, rcu = m.category
                m.category = _classify(tt, ptr, arr, bf, rcu, typedefs)


def struct_name(t):
    """'struct foo_rsv' / 'const struct foo_rsv *' -> 'foo_rsv'."""
    if not t:
        return None
    t = t.replace("*", " ").split()
    t = [w for w in t if w not in ("const", "volatile")]
    if len(t) == 2 and t[0] in ("struct", "union"):
        return t[1]
    if len(t) == 1:
        return t[0]
    return None


# ------------------------------------------------------------ preprocessor

_PP = re.compile(r"\s*#\s*(\w+)\s*(.*)")


def disabled_lines(src, never=frozenset()):
    """Line numbers (1-based) the preprocessor never compiles, whatever the
    configuration: '#if 0' blocks, '#ifdef X' blocks where the file has
    '#undef X' before them (and no '#define X' in between), and '#ifdef X',
    '#if defined(X)' or '#if X' blocks of a macro X in never (one nothing
    defines: never_defined()).  The '#else' branch of such a block is
    live.  Other conditionals count as live."""
    dead = set()
    undef = set()
    stack = []
    lines = src.split("\n")
    n = 0
    while n < len(lines):
        line = lines[n]
        start = n
        while line.endswith("\\") and n + 1 < len(lines):
            n += 1
            line = line[:-1] + " " + lines[n]
        m = _PP.match(line)
        if m:
            d = m.group(1)
            rest = m.group(2).split("/*")[0].split("//")[0].split()
            word = rest[0] if rest else ""
            if d in ("if", "ifdef", "ifndef"):
                stack.append((d == "if" and rest == ["0"]) or
                             (d == "ifdef" and (word in undef or word in never)) or
                             (d == "if" and _if_macro(" ".join(rest)) in never))
            elif d in ("else", "elif"):
                if stack:
                    stack[-1] = False
            elif d == "endif":
                if stack:
                    stack.pop()
            elif d == "undef" and not any(stack):
                undef.add(word)
            elif d == "define" and not any(stack):
                undef.discard(word.split("(")[0])
        if any(stack):
            dead.update(range(start + 1, n + 2))
        n += 1
    return dead


_IF_ONE = re.compile(r"^(?:defined\s*\(\s*(\w+)\s*\)|defined\s+(\w+)|(\w+))$")
_IFDEF = re.compile(r"^[ \t]*#[ \t]*if(?:def)?[ \t]+(?:defined[ \t]*\(?[ \t]*)?(\w+)", re.M)
# macros a build may define on the command line for any directory
_BUILD_DEFINED = frozenset({"DEBUG", "VERBOSE_DEBUG"})


def _if_macro(expr):
    """X of '#if X', '#if defined(X)', '#if defined X'; None for others."""
    m = _IF_ONE.match(expr.strip())
    return next((g for g in m.groups() if g), None) if m else None


def never_defined(texts, headers, flags):
    """The macros the target's '#ifdef X' / '#if defined(X)' / '#if X'
    test that nothing defines: no '#define X' in the target (texts), in
    the kernel headers (headers: an iterable of their texts, read only
    while candidates remain) or '-DX' in the build flags (flags: the
    Makefile texts), and not a configuration option (CONFIG_*), a name
    the compiler or architecture reserves ('_X'), or one a build may pass
    for any directory (DEBUG)."""
    cands = set()
    for text in texts:
        if "#" in text:
            cands.update(_IFDEF.findall(text))
    cands = {x for x in cands if not x.startswith(("CONFIG_", "_")) and
             x not in _BUILD_DEFINED and not x.isdigit()}
    for text in list(texts) + list(flags):
        cands -= _defined_in(text, cands)
    if cands:
        for text in headers:
            cands -= _defined_in(text, cands)
            if not cands:
                break
    return frozenset(cands)


def _defined_in(text, names):
    """The names of names that text #defines or passes as -DNAME."""
    if not names or ("#" not in text and "-D" not in text):
        return set()
    return {x for x in names if x in text and re.search(
        r"(?:^[ \t]*#[ \t]*define[ \t]+|-D)%s\b" % re.escape(x), text, re.M)}


_DEFINE = re.compile(r"\s*#\s*define\s+\w+(\([^)]*\))?")
_DEFINE_LINE = re.compile(r"\s*#\s*define\b")


def macro_bodies(src):
    """The replacement text of every '#define' (continuation lines joined)."""
    out = []
    lines = src.split("\n")
    i = 0
    while i < len(lines):
        if "define" in lines[i] and _DEFINE_LINE.match(lines[i]):
            body = lines[i]
            while body.endswith("\\") and i + 1 < len(lines):
                i += 1
                body = body[:-1] + " " + lines[i]
            # what follows the name and, of a function-like macro, its
            # parameters: '# define f(x) ((void)0)' (a space after the
            # '#', the stub of a function another branch of an #if
            # defines) does not name f
            m = _DEFINE.match(body)
            out.append(body[m.end():] if m else "")
        i += 1
    return out


def mentions(toks, arg, field, resolve):
    """The argument toks[arg[0]:arg[1]] reads field (struct.field):
    resolve(lo, hi) names the member expression toks[lo:hi]."""
    name = field.rsplit(".", 1)[-1]
    for k in range(arg[0] + 1, arg[1]):
        if toks[k].text == name and toks[k - 1].text in ("->", "."):
            b = base_start(toks, k - 1)
            if b is not None and b >= arg[0] and resolve(b, k + 1) == field:
                return True
    return False
