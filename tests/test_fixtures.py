# SPDX-License-Identifier: GPL-2.0-only
"""Fixture tests: each tests/fixtures/<name>/ holds small C files, an
optional policies.json, and expected.sites listing every verdict
(file:line:col-col: function struct.field action (rule)); optionally
expected.pairs, the racing pair of each site the lockset marked (tier,
and the counterpart), and expected.other, the bugs no mark fixes (double
fetches, two-step stores: fixture_lib.other_lines(); none when the file
is absent).  Coccinelle-test style: the analysis must
reproduce the expected files exactly."""
import difflib
import json
import unittest
from pathlib import Path

from fixture_lib import analyse_fixture, other_lines, pair_lines, site_lines

FIXTURES = Path(__file__).resolve().parent / "fixtures"


def _make(d):
    def test(self):
        A = analyse_fixture(d)
        for name, lines in (("expected.sites", site_lines), ("expected.pairs", pair_lines),
                            ("expected.other", other_lines)):
            if not (d / name).exists() and name != "expected.other":
                continue
            # no expected.other: the fixture has no double fetch, no
            # two-step store
            want = (d / name).read_text().splitlines() if (d / name).exists() else []
            got = lines(A)
            if got != want:
                diff = "\n".join(difflib.unified_diff(want, got, "expected", "got",
                                                       lineterm=""))
                self.fail("%s differ for %s:\n%s" % (name, d.name, diff))
    return test


def analyse_edited(test, name, file, old, new):
    """The analysis of fixture name with one line of file changed (old,
    which must be there, becomes new), and the file's original text."""
    import shutil
    import tempfile
    with tempfile.TemporaryDirectory(prefix="lkmm-fx-") as tmp:
        d = Path(tmp) / name
        shutil.copytree(FIXTURES / name, d)
        c = d / file
        text = c.read_text()
        test.assertIn(old, text)
        c.write_text(text.replace(old, new))
        return analyse_fixture(d), text


class FixtureTests(unittest.TestCase):
    pass


for _d in sorted(FIXTURES.iterdir()):
    if (_d / "expected.sites").exists():
        setattr(FixtureTests, "test_" + _d.name, _make(_d))


class FlagArgument(unittest.TestCase):
    def test_only_the_constant_keeps_the_call_out(self):
        """Fixture flag_argument with the cluster-lock caller passing a
        variable instead of false: that call may reach the update, made
        then without the lock every other store holds (a lost update) and
        a store that races with the locked load (flagargs.py is what kept
        them apart, not another rule)."""
        A, _ = analyse_edited(self, "flag_argument", "flag.c", "space_clear(ctl, n, false)",
                              "space_clear(ctl, n, n > 1)")
        got = {(a.fn, a.field): (a.action, a.rule) for a in A.accesses if a.struct == "ctl"}
        self.assertEqual(got[("space_clear", "free")], ("none", "lost-update"))
        self.assertEqual(got[("space_note", "noted")], ("WRITE_ONCE", "unlocked-write"))


class StackMemberFlag(unittest.TestCase):
    """Fixture stack_member_flag edited so that walk_free()'s struct may
    have pin set: the callback's branch is reached from it, without the
    lock, and its store races with obj_bump() (memberflags.py is what
    kept that storer out, not another rule)."""

    def off_store(self, A):
        return next((a.action, a.rule) for a in A.accesses
                    if a.fn == "walk_visit" and a.field == "off")

    def test_initialised_set(self):
        A, _ = analyse_edited(self, "stack_member_flag", "walk.c", ".free = 1,",
                              ".free = 1,\n\t\t.pin = 1,")
        self.assertEqual(self.off_store(A), ("WRITE_ONCE", "unlocked-write"))

    def test_stored_through_a_pointer(self):
        A, _ = analyse_edited(self, "stack_member_flag", "walk.c", "\twc->visit(wc, obj);",
                              "\twc->pin = 0;\n\twc->visit(wc, obj);")
        self.assertEqual(self.off_store(A), ("WRITE_ONCE", "unlocked-write"))

    def test_called_with_another_struct(self):
        A, _ = analyse_edited(self, "stack_member_flag", "walk.c", "\twc->visit(wc, obj);",
                              "\twc->visit(walk_other(obj), obj);")
        self.assertEqual(self.off_store(A), ("WRITE_ONCE", "unlocked-write"))


class DiagLocal(unittest.TestCase):
    """Fixture diag_local edited so that the local or the result does work
    besides the message: the load is no diagnostic read any more
    (diagflow.py is what made it one, not another rule)."""

    def verdict(self, A, fn, field):
        return next((a.action, a.rule) for a in A.accesses
                    if a.fn == fn and a.field == field and a.kind == "read")

    def test_count_put_to_work(self):
        A, _ = analyse_edited(self, "diag_local", "pool.c",
                              'pr_info("%d pools writable\\n", n);', "pool_add(p, n);")
        self.assertEqual(self.verdict(A, "pool_dump", "ro"), ("READ_ONCE", "unlocked-read"))

    def test_count_also_indexes(self):
        A, _ = analyse_edited(self, "diag_local", "pool.c",
                              'pr_info("%d pools writable\\n", n);',
                              'pr_info("%d pools writable\\n", n);\n\tp->slots[n] = 0;')
        self.assertEqual(self.verdict(A, "pool_dump", "ro"), ("READ_ONCE", "unlocked-read"))

    def test_result_put_to_work(self):
        A, _ = analyse_edited(self, "diag_local", "pool.c",
                              'pr_info("pool %llu%% used\\n", pct);', "pool_add(p, pct);")
        self.assertEqual(self.verdict(A, "pool_percent", "used"),
                         ("READ_ONCE", "unlocked-read"))

    def test_guard_with_an_else(self):
        A, _ = analyse_edited(self, "diag_local", "pool.c", "\t\tn++;\n\tpr_info(\"%d pools w",
                              "\t\tn++;\n\telse\n\t\tpool_kick(p);\n\tpr_info(\"%d pools w")
        self.assertEqual(self.verdict(A, "pool_dump", "ro"), ("READ_ONCE", "unlocked-read"))


class DiagTraceStruct(unittest.TestCase):
    """Fixture diag_trace_struct edited so that the struct the helper
    fills does more than go to the tracepoint: the load is no diagnostic
    read any more (diagflow.py's struct flow is what made it one)."""

    def verdict(self, A):
        return next((a.action, a.rule) for a in A.accesses
                    if a.fn == "stripe_trace_info" and a.field == "id" and a.kind == "read")

    def test_a_caller_uses_a_member(self):
        A, _ = analyse_edited(self, "diag_trace_struct", "stripe.c",
                              "\ttrace_stripe_read(d, &info);",
                              "\ttrace_stripe_read(d, &info);\n\tdev_pick(info.devid);")
        self.assertEqual(self.verdict(A), ("READ_ONCE", "unlocked-read"))

    def test_a_caller_hands_it_on(self):
        A, _ = analyse_edited(self, "diag_trace_struct", "stripe.c",
                              "\ttrace_stripe_read(d, &info);", "\tdev_route(d, &info);")
        self.assertEqual(self.verdict(A), ("READ_ONCE", "unlocked-read"))

    def test_the_helper_reads_it_back(self):
        A, _ = analyse_edited(self, "diag_trace_struct", "stripe.c", "\treturn;\nnot_found:",
                              "\tdev_pick(info->devid);\n\treturn;\nnot_found:")
        self.assertEqual(self.verdict(A), ("READ_ONCE", "unlocked-read"))


class LiftedFlag(unittest.TestCase):
    """Fixture lifted_flag edited so that the rescan's call may reach the
    store to excl: it races with the reader again (flagargs.py, the
    guard lifted through the caller's local, is what kept them apart)."""

    def _excl(self, old, new, field="excl"):
        A, _ = analyse_edited(self, "lifted_flag", "acct.c", old, new)
        got = {(a.fn, a.field): (a.action, a.rule, getattr(a, "tier", None))
               for a in A.accesses if a.struct == "acct"}
        self.assertEqual(got[("acct_update", field)], ("WRITE_ONCE", "locked-write", "paired"))
        self.assertEqual(got[("acct_report", field)][:2], ("READ_ONCE", "unlocked-read"))

    def test_a_local_not_zero_from_the_start(self):
        """The local the caller passes starts at 1: the NULL call passes
        a value that can reach the branch."""
        self._excl("u64 nr_old = 0;", "u64 nr_old = 1;")

    def test_no_equality_no_alias(self):
        """'cur >= nr_old' says nothing of nr_old where cur is not 0."""
        self._excl("if (cur == nr_old && n > 0) {", "if (cur >= nr_old && n > 0) {")

    def test_a_signed_local_may_be_below_0(self):
        """A signed cur may be below 0: 'cur < nr_old' holds with nr_old 0."""
        self._excl("u64 cur = acct_refs(a);", "s64 cur = acct_refs(a);", "moved")


class MadeFlag(unittest.TestCase):
    """Fixture made_flag edited so that the user scan's context may reach
    scan_sync(): its load of id, without dev->lock, races with
    scan_finish()'s store (madeflags.py, the flag scan_setup() copies
    into the object it makes, is what kept that context out)."""

    def _id(self, old, new):
        A, _ = analyse_edited(self, "made_flag", "scan.c", old, new)
        got = next((a.action, a.rule, getattr(a, "tier", None)) for a in A.accesses
                   if a.field == "id" and a.kind == "read")
        self.assertEqual(got, ("data_race", "diagnostic-read", "paired"))

    def test_stored_elsewhere_too(self):
        self._id("\tc->done = 1;", "\tc->replace = 1;")

    def test_the_user_scan_passes_1(self):
        self._id("return scan_run(dev, 0);", "return scan_run(dev, 1);")

    def test_stored_in_a_branch_of_the_maker(self):
        self._id("\tc->replace = replace;", "\tif (dev)\n\t\tc->replace = replace;")

    def test_an_object_not_made_in_the_chain(self):
        self._id("\tscan_walk(c);", "\tscan_walk(scan_current(dev));")


class HandedBack(unittest.TestCase):
    """Fixture handed_back edited so that hdr_read_ag() does not return 0
    with the buffer it hands back locked: it is no lock function then,
    and hdr_geometry()'s load races with the stores like hdr_peek()'s
    (handback.py is what kept it apart)."""

    def _geometry(self, old, new):
        A, _ = analyse_edited(self, "handed_back", "handed.c", old, new)
        got = {a.fn: (a.action, a.rule, getattr(a, "tier", None))
               for a in A.accesses if a.field == "free" and a.kind == "read"}
        self.assertEqual(got["hdr_geometry"], ("READ_ONCE", "unlocked-read", "paired"))

    def test_released_before_the_return(self):
        self._geometry("\telse\n\t\thdr_relse(bp);", "\thdr_relse(bp);")

    def test_a_success_before_the_hand_back(self):
        """A 'return 0' that hands nothing back: the caller's buffer is
        not locked there."""
        self._geometry("\tif (bpp)\n", "\tif (ag->init > 1)\n\t\treturn 0;\n\tif (bpp)\n")


class ModeVariable(unittest.TestCase):
    """Fixture mode_variable edited so that the local node_check() hands
    to node_lock() may hold a mode that takes nothing, or is a
    parameter: the call takes no lock, and the load races with the store
    (the values of the local are what made it a lock call)."""

    def _check(self, old, new):
        A, _ = analyse_edited(self, "mode_variable", "mode.c", old, new)
        got = {a.fn: (a.action, a.rule, getattr(a, "tier", None))
               for a in A.accesses if a.field == "projid" and a.kind == "read"}
        self.assertEqual(got["node_check"], ("READ_ONCE", "unlocked-read", "paired"))

    def test_a_value_that_takes_nothing(self):
        self._check("\t\tmode = NODE_SHARED;", "\t\tmode = NODE_NONE;")

    def test_a_parameter(self):
        """A mode the caller passes, assigned here too: the caller's value
        is not seen."""
        self._check("int node_check(struct node *n, int want, bool relock)\n{\n"
                    "\tunsigned int mode;",
                    "int node_check(struct node *n, int want, bool relock, "
                    "unsigned int mode)\n{")


class ReturnedMode(unittest.TestCase):
    """Fixture returned_mode edited so that the wrapper returns no flag
    constant it is known to give: the local's values are unknown, so
    node_walk()'s node_lock(n, lock) takes nothing (its load races with
    the store) and node_peek()'s node_unlock(n, lock) drops nothing (its
    load after the unlock looks locked: the unsound view this mechanism
    ends)."""

    def test_a_mode_not_known(self):
        A, _ = analyse_edited(self, "returned_mode", "mode.c", "\treturn mode;",
                              "\treturn mode + 0;")
        got = {a.fn: (a.action, a.rule, getattr(a, "tier", None))
               for a in A.accesses if a.field == "projid" and a.kind == "read"}
        self.assertEqual(got["node_walk"], ("READ_ONCE", "unlocked-read", "paired"))
        self.assertEqual(got["node_peek"][:2], ("none", "locked-read"))


class StubMacro(unittest.TestCase):
    """Fixture stub_macro with a macro whose body does name the function
    (a wrapper, not the stub, and not just one call of it, whose calls
    would be the function's: callers.py _entry_sites()): the function
    may be called where the macro is, with no lock known, and its load
    races with the store."""

    def test_a_macro_that_names_it(self):
        A, _ = analyse_edited(self, "stub_macro", "stub.c", "#endif",
                              "#endif\n#define node_check_all(n) do { node_check(n); } while (0)")
        got = {a.fn: (a.action, a.rule, getattr(a, "tier", None))
               for a in A.accesses if a.field == "size" and a.kind == "read"}
        self.assertEqual(got["node_check"], ("READ_ONCE", "unlocked-read", "paired"))


class NullHandle(unittest.TestCase):
    """Fixture null_handle with a NULL call that reaches what the others
    do not: the handle's pin is lost there, and the load races with the
    commit's store again (nullargs.py is what kept them apart)."""

    def _running(self, old, new):
        A, text = analyse_edited(self, "null_handle", "null.c", old, new)
        return {(a.fn, a.line): a.action for a in A.accesses
                if a.field == "running" and a.kind == "read"}, text.splitlines()

    def test_a_null_search_that_inserts_reaches_the_split(self):
        got, lines = self._running("return search(NULL, fs, 0, 0);",
                                   "return search(NULL, fs, 16, 0);")
        line = lines.index("static void clean_block(struct fs4 *fs)") + 3
        self.assertEqual(got[("clean_block", line)], "READ_ONCE")

    def test_a_macro_that_passes_an_unknown_size(self):
        got, lines = self._running("search(NULL, (fs), 0, 0)", "search(NULL, (fs), ret, 0)")
        line = lines.index("static void clean_block(struct fs4 *fs)") + 3
        self.assertEqual(got[("clean_block", line)], "READ_ONCE")

    def test_a_size_assigned_outside_its_test(self):
        """ins_len set before the test: the value it tests is not the one
        the NULL calls pass."""
        got, lines = self._running("\tif (ins_len > 0) {\n\t\tins_len -= 8;",
                                   "\tins_len += 8;\n\tif (ins_len > 0) {")
        line = lines.index("static void clean_block(struct fs4 *fs)") + 3
        self.assertEqual(got[("clean_block", line)], "READ_ONCE")

    def test_after_an_early_return_on_null(self):
        """commit_phase's maybe_in_trans() reading after 'if (!trans)
        return 0;': it has a handle there, and the store of last_commit
        in the critical section excludes it."""
        A, _ = analyse_edited(self, "commit_phase", "trans.c",
                              "\t\treturn fs->last_commit;\n\treturn 0;",
                              "\t\treturn 0;\n\treturn fs->last_commit;")
        got = {(a.fn, a.kind): a.action for a in A.accesses if a.field == "last_commit"}
        self.assertEqual(got[("maybe_in_trans", "read")], "none")
        self.assertEqual(got[("commit_transaction", "write")], "none")

    def test_a_branch_on_something_else_than_the_handle(self):
        got, lines = self._running("\tif (trans)\n\t\tuse(fs->running);",
                                   "\tif (fs->running)\n\t\tuse(fs->running);")
        line = lines.index("\tif (trans)") + 2
        self.assertEqual(got[("walk", line)], "READ_ONCE")


class RememberedConfig(unittest.TestCase):
    """Fixture remembered_config: the field that remembers the
    configuration is what keeps the plain allocator's locked loads from
    the zoned store, and the fact holds only while its stores keep to it."""

    def _policies(self, edit):
        fx = FIXTURES / "remembered_config"
        d = json.loads((fx / "policies.json").read_text())
        edit(d["guards"][0])
        return fx, json.dumps(d)

    def test_without_the_fact_the_plain_loads_race(self):
        fx, text = self._policies(lambda g: g.pop("remembered_in"))
        A = analyse_fixture(fx, policies=text)
        got = {(a.fn, a.field): (a.action, a.rule) for a in A.accesses if a.kind == "read"}
        self.assertEqual(got[("plain_alloc", "avail")], ("READ_ONCE", "racing-locked-read"))
        self.assertEqual(got[("plain_hint", "hint")], ("READ_ONCE", "racing-locked-read"))

    def test_a_default_not_overridden_by_the_test_is_an_error(self):
        from lkmm_mark.base import UserError
        with self.assertRaisesRegex(UserError, "nor overridden at once"):
            analyse_edited(self, "remembered_config", "alloc.c",
                           "\tif (fsi_is_zoned(fsi))\n\t\tctl->policy",
                           "\tif (ctl->bytes)\n\t\tctl->policy")

    def test_a_plain_statement_between_default_and_test(self):
        """'ctl->policy = PLAIN; ctl->n = f(ctl->bytes); if (zoned) ...'
        (6.12's extent allocator) keeps the fact; a statement that hands
        ctl on whole does not."""
        A, _ = analyse_edited(self, "remembered_config", "alloc.c",
                              "\tctl->policy = POLICY_PLAIN;\n",
                              "\tctl->policy = POLICY_PLAIN;\n\tctl->bytes = fsi_bytes(fsi);\n")
        got = {(a.fn, a.field): (a.action, a.rule) for a in A.accesses if a.kind == "read"}
        self.assertEqual(got[("plain_alloc", "avail")][0], "none")
        from lkmm_mark.base import UserError
        with self.assertRaisesRegex(UserError, "nor overridden at once"):
            analyse_edited(self, "remembered_config", "alloc.c",
                           "\tctl->policy = POLICY_PLAIN;\n",
                           "\tctl->policy = POLICY_PLAIN;\n\tfsi_fill(fsi, ctl);\n")

    def test_a_malformed_entry_is_an_error(self):
        from lkmm_mark.base import UserError
        fx, text = self._policies(lambda g: g["remembered_in"].pop("values"))
        with self.assertRaisesRegex(UserError, "remembered_in must be"):
            analyse_fixture(fx, policies=text)


class MarkedGuard(unittest.TestCase):
    def test_a_local_loaded_with_read_once_tests_the_guard(self):
        """state_guard as a patched tree has it: 'q = READ_ONCE(f->quota_root);
        if (!q)' tests the same state as 'if (!f->quota_root)', so the
        load of qulist behind it stays plain."""
        A, _ = analyse_edited(self, "state_guard", "state.c", "\tif (!fsi->quota_root)\n\t\tgoto out;\n\tret",
                              "\tq = READ_ONCE(fsi->quota_root);\n\tif (!q)\n\t\tgoto out;\n\tret")
        got = {(a.fn, a.field): a.action for a in A.accesses if a.kind == "read"}
        self.assertEqual(got[("quota_reserve", "qulist")], "none")


class InstanceByArgument(unittest.TestCase):
    def test_an_unknown_argument_keeps_the_pair(self):
        """Fixture instance_by_argument with one caller passing its own
        parameter as dest: dest may then be any reserve, so the release's
        load of it races with the relocation's store again."""
        A, text = analyse_edited(self, "instance_by_argument", "rsv.c",
                                 "target = &fs->delayed_rsv;", "target = r;")
        line = text.splitlines().index("\tif (dest->size < n)") + 1
        got = {(a.fn, a.line): (a.action, a.rule) for a in A.accesses
               if a.struct == "rsv" and a.field == "size"}
        self.assertEqual(got[("rsv_release", line)], ("READ_ONCE", "racing-locked-read"))



class MemberSelector(unittest.TestCase):
    """Fixture member_selector edited so that the call of the selector
    may return part b: its constant names no arm, its arm falls through
    into part b's, or the caller of part_peek() passes PART_B; the locked
    load races with the zap again (instances.py's selector arms kept them
    apart)."""

    def _read_a(self, old, new):
        A, _ = analyse_edited(self, "member_selector", "parts.c", old, new)
        return [(a.action, a.rule) for a in A.accesses
                if a.fn == "part_read_a" and a.field == "fmt"]

    def test_a_variable_argument_may_name_either_part(self):
        self.assertEqual(self._read_a("node_part(n, PART_A);\n\tint v;",
                                      "node_part(n, n->has_b);\n\tint v;"),
                         [("READ_ONCE", "racing-locked-read")])

    def test_an_arm_that_falls_through_reaches_the_next(self):
        self.assertEqual(self._read_a("\t\treturn &n->a;\n", "\t\tn->has_b++;\n"),
                         [("READ_ONCE", "racing-locked-read")])

    def test_a_conditional_break_ends_no_arm(self):
        self.assertEqual(self._read_a("\t\treturn &n->a;\n",
                                      "\t\tif (n->has_b)\n\t\t\tbreak;\n"),
                         [("READ_ONCE", "racing-locked-read")])

    def test_a_goto_may_enter_another_arm(self):
        self.assertEqual(self._read_a("\t\treturn &n->a;\n\tcase PART_B:\n",
                                      "\t\tif (n->has_b)\n\t\t\tgoto again;\n"
                                      "\t\treturn &n->a;\n\tcase PART_B: again:\n"),
                         [("READ_ONCE", "racing-locked-read")])

    def test_a_caller_of_the_other_constant_keeps_the_pair(self):
        A, _ = analyse_edited(self, "member_selector", "parts.c", "part_peek(n, PART_A)",
                              "part_peek(n, PART_B)")
        self.assertEqual([(a.action, a.rule) for a in A.accesses
                          if a.fn == "part_peek" and a.field == "fmt"],
                         [("READ_ONCE", "racing-locked-read")])

    def test_a_label_of_another_spelling_keeps_the_pair(self):
        self.assertEqual(self._read_a("node_part(n, PART_A);\n\tint v;",
                                      "node_part(n, 0);\n\tint v;"),
                         [("READ_ONCE", "racing-locked-read")])


class AssertedState(unittest.TestCase):
    def test_the_assertion_fact_is_what_keeps_them_apart(self):
        """Fixture asserted_state without its 'state_assertions' entry
        (and without kernel.json's): the loads after ASSERT() and
        BUG_ON() race with the zoned stores again."""
        def untold(P):
            P.state_assertions = []
        A = analyse_fixture(FIXTURES / "asserted_state",
                            policies=json.dumps({"guards": [{
                                "call": "fsi_is_zoned", "reason": "fixed at mount"}]}),
                            tweak=untold)
        got = {a.fn: a.action for a in A.accesses
               if a.field == "cursor" and a.kind == "read"}
        self.assertEqual(got["plain_cursor"], "READ_ONCE")
        self.assertEqual(got["bug_cursor"], "READ_ONCE")

    def test_a_malformed_entry_is_one_line(self):
        from lkmm_mark.tree import UserError
        with self.assertRaises(UserError) as cm:
            analyse_fixture(FIXTURES / "asserted_state", policies=json.dumps(
                {"state_assertions": [{"call": "ASSERT", "holds": "yes", "reason": "r"}]}))
        self.assertNotIn("\n", str(cm.exception))
        self.assertIn("holds", str(cm.exception))


class InitialisedHere(unittest.TestCase):
    def test_the_lock_initialiser_is_what_makes_them_private(self):
        """Fixture initialised_here: the stores made before the object is
        linked are private, also after the call that only stores it in
        the private context; without kernel.json's 'initialisers' they
        are not."""
        A = analyse_fixture(FIXTURES / "initialised_here")
        rules = {(a.line, a.field): a.rule for a in A.accesses if a.fn == "pa_new"}
        self.assertEqual(rules[(38, "start")], "private")
        self.assertEqual(rules[(42, "owner")], "private")      # after ctx_use()
        self.assertEqual(rules[(47, "hits")], "locked-write")  # after list_add()
        reset = [a.rule for a in A.accesses if a.fn == "pa_reset" and a.field == "len"]
        self.assertEqual(len(reset), 1)
        self.assertNotEqual(reset[0], "private")               # a lock made in a branch

        def untold(P):
            P.initialisers = set()
        A = analyse_fixture(FIXTURES / "initialised_here", tweak=untold)
        got = {(a.line, a.field): a.rule for a in A.accesses if a.fn == "pa_new"}
        self.assertNotEqual(got[(38, "start")], "private")
        self.assertNotEqual(got[(42, "owner")], "private")


class TailTrylock(unittest.TestCase):
    """Fixture tail_trylock (every store of len and hint always locked):
    each store is locked only through the
    try-lock that decides its condition last, or because the one call
    made without the lock is reached by no caller (the callers pass
    NULL for the parameter its condition tests first)."""

    def _rule(self, A, fn, field):
        (r,) = [(a.action, a.rule) for a in A.accesses
                if a.fn == fn and a.field == field and a.kind in ("write", "rmw")]
        return r

    def test_an_or_ending_in_a_negated_trylock(self):
        A, _ = analyse_edited(self, "tail_trylock", "shrink.c",
                              "!spin_trylock(&n->t->lock)", "!spin_is_locked(&n->t->lock)")
        self.assertNotEqual(self._rule(A, "reclaim", "len")[1], "always-locked")

    def test_an_and_ending_in_a_trylock(self):
        A, _ = analyse_edited(self, "tail_trylock", "shrink.c",
                              "ready && spin_trylock(&t->lock)", "ready && spin_is_locked(&t->lock)")
        self.assertNotEqual(self._rule(A, "tree_hint", "hint")[1], "always-locked")

    def test_a_call_every_caller_passes_null_for(self):
        A, _ = analyse_edited(self, "tail_trylock", "shrink.c",
                              "return shrink(head, NULL);", "return shrink(head, first_tree(head));")
        self.assertNotEqual(self._rule(A, "reclaim", "len")[1], "always-locked")


class RelockLoop(unittest.TestCase):
    """Fixture relock_loop (the load in trim_range() always locked): the
    lock the annotations name through the wrappers' pointer function is
    held on entry, and the loop that drops and retakes it keeps it held
    at its head."""

    def _rule(self, A):
        (r,) = [a.rule for a in A.accesses if a.fn == "trim_range" and a.field == "free"]
        return r

    def test_without_the_retaking(self):
        A, _ = analyse_edited(self, "relock_loop", "trim.c",
                              "\t\t\tgroup_lock(fs, g);\n", "\t\t\tcpu_relax();\n")
        self.assertEqual(self._rule(A), "unlocked-read")

    def test_an_annotation_through_another_pointer_function(self):
        A, _ = analyse_edited(self, "relock_loop", "trim.c",
                              "__releases(group_lock_ptr(fs, g))", "__releases(other_ptr(fs, g))")
        self.assertEqual(self._rule(A), "unlocked-read")


class DataLocks(unittest.TestCase):
    """Fixture data_locks: the fact, not another rule, keeps the on-disk
    header's lockless read in the verifier plain."""

    def _disk(self, A):
        return {(a.fn, a.kind): a.rule for a in A.accesses if a.struct == "disk_hdr"}

    def test_without_the_fact(self):
        A = analyse_fixture(FIXTURES / "data_locks", policies="{}")
        self.assertEqual(self._disk(A)[("hdr_verify", "read")], "unlocked-read")
        self.assertEqual(self._disk(A)[("hdr_set", "write")], "locked-write")

    def test_a_host_endian_member_is_not_the_format(self):
        """disk_hdr with a host-endian word is an in-core struct: no fact
        applies to it, and the lockless read is marked again."""
        A, _ = analyse_edited(self, "data_locks", "fmt.c", "\t__u8 pad[4];\n",
                              "\tu32 cached;\n")
        self.assertEqual(self._disk(A)[("hdr_verify", "read")], "unlocked-read")


class OwnParam(unittest.TestCase):
    def test_a_live_object_handed_to_the_helper(self):
        """Fixture own_param with the constructor's test of I_NEW gone:
        foo_fill() is given an inode other tasks may hold, its call counts
        with no lock, and the store is no longer a locked write."""
        A, _ = analyse_edited(self, "own_param", "newinode.c",
                              "if (!(fi->i_state & I_NEW))", "if (!fi)")
        (r,) = [a.rule for a in A.accesses if a.fn == "foo_set_size"]
        self.assertNotEqual(r, "locked-write")


class PrivateHelper(unittest.TestCase):
    """Fixture private_helper: the decoder's stores are private only with
    both the macro and the init call understood; without either, they
    are lockless stores of the live field, its lock is a tie, and the
    real race (geo_grow() against geo_size()) goes unmarked."""

    def _size(self, A):
        return {(a.fn, a.line): a.rule for a in A.accesses if a.field == "size"}

    def test_without_the_init_function(self):
        A = analyse_fixture(FIXTURES / "private_helper", policies="{}")
        self.assertEqual(self._size(A)[("geo_size", 60)], "no-lock-evidence")
        self.assertNotEqual(self._size(A)[("geo_from_disk", 33)], "private")

    def test_a_macro_that_keeps_the_pointer(self):
        A, _ = analyse_edited(self, "private_helper", "geo.c",
                              "#define GEO_NUM(g)\t((g)->num & 0xf)",
                              "#define GEO_NUM(g)\t((last_geo = (g))->num & 0xf)")
        self.assertEqual(self._size(A)[("geo_size", 60)], "no-lock-evidence")
        self.assertNotEqual(self._size(A)[("geo_from_disk", 33)], "private")


class OpsStaticMethod(unittest.TestCase):
    def test_the_method_runs_where_the_table_is_called(self):
        """Fixture ops_static_method with the ops call made without the
        lock: the static method, called through the table from buf.c,
        loads count beside the locked store (a method whose only calls
        are in other files is not dead code)."""
        A, _ = analyse_edited(self, "ops_static_method", "buf.c",
                              "\tspin_lock(&bp->lock);\n\tif (bp->ops", "\tif (bp->ops")
        got = {(a.fn, a.field): a.rule for a in A.accesses if a.fn == "sb_verify"}
        self.assertNotIn(got[("sb_verify", "count")], ("always-locked", "dead-code"))
        self.assertNotIn(("fs/btrfs/sb.c", "sb_verify"), A.dead)


class PseudoExcludes(unittest.TestCase):
    def test_the_excludes_fact_is_what_keeps_them_apart(self):
        """Fixture pseudo_excludes without 'excludes': the transaction's
        store races with the locked reader and writers again."""
        A = analyse_fixture(FIXTURES / "pseudo_excludes", policies=json.dumps({
            "pseudo_locks": [{"name": "tx.items", "struct": "tx", "reason": "r"}],
            "param_locks": [{"struct": "tx", "lock": "tx.items", "mode": "exclusive",
                             "reason": "r"}]}))
        got = {a.fn: a.action for a in A.accesses if a.field == "size"}
        self.assertEqual(got["node_grow"], "WRITE_ONCE")
        self.assertEqual(got["node_size_locked"], "READ_ONCE")

    def test_a_malformed_entry_is_one_line(self):
        from lkmm_mark.tree import UserError
        with self.assertRaises(UserError) as cm:
            analyse_fixture(FIXTURES / "pseudo_excludes", policies=json.dumps({
                "pseudo_locks": [{"name": "tx.items", "struct": "tx", "excludes": "node.lock",
                                  "reason": "r"}]}))
        self.assertNotIn("\n", str(cm.exception))
        self.assertIn("excludes", str(cm.exception))


class CoveredPseudoLock(unittest.TestCase):
    """Fixture range_flushed: the groups of the range's pseudo-lock are
    what keep the flushed task's loads of 'block' from the completion's
    store, and "covers" is what keeps them from saying anything about
    the inode's 'size'."""

    def _policies(self, edit):
        d = json.loads((FIXTURES / "range_flushed" / "policies.json").read_text())
        edit(d)
        A = analyse_fixture(FIXTURES / "range_flushed", policies=json.dumps(d))
        return {(a.fn, a.field, a.line): a.action for a in A.accesses
                if a.kind == "read" and a.field in ("block", "size")}

    def test_without_the_lock_functions_the_loads_race(self):
        got = self._policies(lambda d: d.pop("lock_functions"))
        self.assertEqual(got[("dio_begin", "block", 92)], "READ_ONCE")
        self.assertEqual(got[("get_blocks", "block", 72)], "READ_ONCE")

    def test_without_covers_the_hold_keeps_everything_apart(self):
        got = self._policies(lambda d: d["pseudo_locks"][0].pop("covers"))
        self.assertEqual(got[("dio_begin", "size", 95)], "none")
        self.assertEqual(got[("flush_maps", "block", 77)], "none")

    def test_a_malformed_entry_is_one_line(self):
        from lkmm_mark.tree import UserError
        for bad in ("extmap", [], ["extmap.block"]):
            with self.assertRaises(UserError) as cm:
                analyse_fixture(FIXTURES / "range_flushed", policies=json.dumps({
                    "pseudo_locks": [{"name": "xinode.ordered_range", "struct": "xinode",
                                      "covers": bad, "reason": "r"}]}))
            self.assertNotIn("\n", str(cm.exception))
            self.assertIn("covers", str(cm.exception))


class ValueVariants(unittest.TestCase):
    def test_the_kind_fact_is_what_keeps_them_apart(self):
        """Fixture variant_values without its 'values' and 'lists': the
        inode reservations' loads pair with the group-only store again."""
        A = analyse_fixture(FIXTURES / "variant_values", policies="{}")
        got = {a.fn: a.rule for a in A.accesses if a.field == "start" and a.kind == "read"}
        self.assertEqual(got["res_scan_inode"], "unlocked-read")
        self.assertEqual(got["res_scan_group"], "unlocked-read")

    def test_a_malformed_entry_is_one_line(self):
        from lkmm_mark.tree import UserError
        with self.assertRaises(UserError) as cm:
            analyse_fixture(FIXTURES / "variant_values", policies=json.dumps(
                {"variants": [{"field": "res.kind", "values": {"A": "a", "B": "b", "C": "c"},
                               "reason": "r"}]}))
        self.assertNotIn("\n", str(cm.exception))
        self.assertIn("two variants", str(cm.exception))


class FlagVariants(unittest.TestCase):
    def test_the_flag_kind_is_what_keeps_them_apart(self):
        """Fixture flag_variants without its 'variants' entry: the loads of
        writable units (from the alloc list, after a test_bit()) pair with
        the store to the frozen units again; without its 'made_lists'
        only the loads that know their kind from a list pair again."""
        A = analyse_fixture(FIXTURES / "flag_variants", policies="{}")
        got = {a.fn: a.rule for a in A.accesses if a.field == "owner" and a.kind == "read"}
        self.assertEqual(got["unit_start"], "unlocked-read")
        self.assertEqual(got["peek_rw"], "unlocked-read")
        own = json.loads((FIXTURES / "flag_variants" / "policies.json").read_text())
        del own["variants"][0]["made_lists"]
        A = analyse_fixture(FIXTURES / "flag_variants", policies=json.dumps(own))
        got = {a.fn: a.rule for a in A.accesses if a.field == "owner" and a.kind == "read"}
        self.assertEqual(got["unit_start"], "unlocked-read")
        self.assertEqual(got["peek_rw"], "unlocked-read")

    def test_a_malformed_entry_is_one_line(self):
        from lkmm_mark.tree import UserError
        for bad in ({"made_lists": [{"list": "pool.units", "call": "make_frozen"}]},
                    {"bit": ["UNIT_WRITABLE"]}):
            spec = {"field": "unit.state", "reason": "r"}
            spec.update(bad)
            with self.assertRaises(UserError) as cm:
                analyse_fixture(FIXTURES / "flag_variants",
                                policies=json.dumps({"variants": [spec]}))
            self.assertNotIn("\n", str(cm.exception))
            self.assertIn("variants unit.state", str(cm.exception))


class ObjectVariants(unittest.TestCase):
    def test_the_variants_fact_is_what_keeps_them_apart(self):
        """Fixture object_variants without its 'variants' entry: the
        extent entries' loads race with the bitmap stores again."""
        A = analyse_fixture(FIXTURES / "object_variants", policies="{}")
        got = {a.fn: (a.action, a.rule) for a in A.accesses
               if a.field == "state" and a.kind == "read"}
        self.assertEqual(got["remove_extent"], ("READ_ONCE", "unlocked-read"))
        self.assertEqual(got["remove_extent2"], ("READ_ONCE", "unlocked-read"))

    def test_a_malformed_entry_is_one_line(self):
        from lkmm_mark.tree import UserError
        with self.assertRaises(UserError) as cm:
            analyse_fixture(FIXTURES / "object_variants", policies=json.dumps(
                {"variants": [{"field": "entry.bitmap", "reason": "r",
                               "lookups": [{"call": "search", "arg": 2, "value": "1",
                                            "variant": "bitmap"}]}]}))
        self.assertNotIn("\n", str(cm.exception))
        self.assertIn("variants entry.bitmap", str(cm.exception))


class OwnedObject(unittest.TestCase):
    def test_without_the_path_the_owner_loads_race(self):
        """Fixture owned_object without its "through" owner: the commit's
        own loads pair with its unlocked store again."""
        A = analyse_fixture(FIXTURES / "owned_object", policies="{}")
        got = {a.fn: a.action for a in A.accesses
               if a.field == "state" and a.kind == "read"}
        self.assertEqual(got["tx_check"], "data_race")
        self.assertEqual(got["tx_verify"], "READ_ONCE")

    def test_a_malformed_path_is_one_line(self):
        from lkmm_mark.tree import UserError
        with self.assertRaises(UserError) as cm:
            analyse_fixture(FIXTURES / "owned_object", policies=json.dumps(
                {"owners": [{"field": "tx.state", "functions": ["tx_commit"],
                             "through": "h->tx", "reason": "r"}]}))
        self.assertNotIn("\n", str(cm.exception))
        self.assertIn("through", str(cm.exception))


class WorkItems(unittest.TestCase):
    def test_the_work_item_fact_is_what_keeps_the_read_plain(self):
        """Fixture rewrite_single_writer without kernel.json's 'work_items':
        the work item's update may run in two tasks, so its read half races
        with its own store."""
        def untold(P):
            P.work_items = []
        got = {}
        for tweak in (None, untold):
            A = analyse_fixture(FIXTURES / "rewrite_single_writer", tweak=tweak)
            got[tweak is None] = {a.fn: bool(getattr(a, "read_races", False))
                                  for a in A.accesses if a.kind == "rmw"}
        self.assertEqual(got[True], {"stats_workfn": False, "total_add": True})
        self.assertEqual(got[False], {"stats_workfn": True, "total_add": True})


class UnlinkWaits(unittest.TestCase):
    def test_the_wait_fact_is_what_makes_the_read_private(self):
        """Fixture unlink_wait without its 'unlink_waits' entry: the read
        after the wait handed the context's own transid pairs with the
        committer's store again."""
        def untold(P):
            P.unlink_waits = {}
        got = {}
        for tweak in (None, untold):
            A = analyse_fixture(FIXTURES / "unlink_wait", tweak=tweak)
            got[tweak is None] = [a.action for a in A.accesses
                                  if a.fn == "sync_log" and a.field == "ret" and a.kind == "read"]
        self.assertEqual(got[True], ["none", "READ_ONCE"])
        self.assertEqual(got[False], ["READ_ONCE", "READ_ONCE"])

    def test_a_malformed_entry_is_one_line(self):
        from lkmm_mark.tree import UserError
        with self.assertRaises(UserError) as cm:
            analyse_fixture(FIXTURES / "unlink_wait", policies=json.dumps(
                {"unlink_waits": [{"call": "wait_commit", "arg": "transid", "reason": "r"}]}))
        self.assertNotIn("\n", str(cm.exception))
        self.assertIn("arg", str(cm.exception))


class TaskPrivateMember(unittest.TestCase):
    def test_without_the_fact_the_member_loads_race(self):
        """Fixture task_private_member without its 'task_private' entry:
        the commit's two loads of the pending operation's own reserve are
        unlocked loads that pair with the helpers' locked stores."""
        def untold(P):
            P.task_private = {}
        got = {}
        for tweak in (None, untold):
            A = analyse_fixture(FIXTURES / "task_private_member", tweak=tweak)
            got[tweak is None] = [(a.action, a.rule, a.pair is not None) for a in A.accesses
                                  if a.fn == "commit_pending" and a.field == "reserved"]
        self.assertEqual(got[True], [("none", "task-private", False)] * 2)
        self.assertEqual(got[False], [("READ_ONCE", "unlocked-read", True)] * 2)

    def test_a_malformed_entry_is_one_line(self):
        from lkmm_mark.tree import UserError
        with self.assertRaises(UserError) as cm:
            analyse_fixture(FIXTURES / "task_private_member", policies=json.dumps(
                {"task_private": [{"struct": "pending", "reason": "r", "handed_to": []}]}))
        self.assertNotIn("\n", str(cm.exception))
        self.assertIn("handed_to", str(cm.exception))


class MadeObject(unittest.TestCase):
    def _take_store(self, old=None, new=None):
        if old is None:
            A = analyse_fixture(FIXTURES / "made_object")
        else:
            A, _ = analyse_edited(self, "made_object", "made.c", old, new)
        return [(a.action, a.rule) for a in A.accesses
                if a.fn == "take" and a.field == "first_free" and a.kind == "write"]

    def test_an_object_found_elsewhere_is_not_made(self):
        """Fixture made_object with the context found instead of made:
        another task may run take() on it, and the locked store races with
        take()'s unlocked load."""
        self.assertEqual(self._take_store(), [("none", "locked-write-unraced")])
        self.assertEqual(self._take_store("c = setup_ctx();", "c = find_ctx();"),
                         [("WRITE_ONCE", "locked-write")])

    def test_a_field_stored_from_elsewhere_is_no_creator_field(self):
        """Fixture made_object with the part's ctx stored from a found
        context: run_part()'s context may be any task's."""
        self.assertEqual(self._take_store("p->ctx = c;", "p->ctx = find_ctx();"),
                         [("WRITE_ONCE", "locked-write")])


class FlagHandshake(unittest.TestCase):
    def test_the_flag_stores_are_what_keep_the_turns_apart(self):
        """Fixture flag_handshake without its facts: the assertion's read
        in one task's turn pairs with the store another task makes in its
        own; a store of another number takes nothing."""
        A = analyse_fixture(FIXTURES / "flag_handshake", policies="{}")
        got = {(a.line, a.kind): a.action for a in A.accesses if a.field == "last"}
        self.assertEqual(got[(49, "read")], "data_race")
        self.assertEqual(got[(50, "write")], "WRITE_ONCE")
        A, _ = analyse_edited(self, "flag_handshake", "commit.c",
                              "atomic_set(&r->busy[idx], 1);", "atomic_set(&r->busy[idx], 2);")
        got = {(a.line, a.kind): a.action for a in A.accesses if a.field == "last"}
        self.assertEqual(got[(49, "read")], "data_race")


class NewInodeWindow(unittest.TestCase):
    def test_the_window_forms_are_what_keep_the_stores_private(self):
        """Fixture new_inode_window without kernel.json's 'set_by': the
        store after insert_inode_locked() is a shared store again; without
        the container accessor, the store through ei after the negated
        I_NEW block is too."""
        def no_set_by(P):
            for spec in P.new_flags:
                spec["set_by"] = []
        rules = {}
        for tweak, pol in ((None, None), (no_set_by, None), (None, "{}")):
            A = analyse_fixture(FIXTURES / "new_inode_window", policies=pol, tweak=tweak)
            rules[(tweak is None, pol)] = {(a.fn, a.line): a.rule for a in A.accesses
                                           if a.field == "y_size" and a.kind == "write"}
        got = rules[(True, None)]
        self.assertEqual((got[("ycreate", 35)], got[("yiget", 52)]), ("private", "private"))
        self.assertNotEqual(rules[(False, None)][("ycreate", 35)], "private")
        self.assertEqual(rules[(False, None)][("yiget", 52)], "private")
        self.assertNotEqual(rules[(True, "{}")][("yiget", 52)], "private")


    def test_a_malformed_set_by_is_one_line(self):
        from lkmm_mark.tree import UserError
        with self.assertRaises(UserError) as cm:
            analyse_fixture(FIXTURES / "new_inode_window", policies=json.dumps(
                {"new_object_flags": [{"member": "i_state", "flag": "I_NEW", "publish": [],
                                       "set_by": "insert_inode_locked", "reason": "r"}]}))
        self.assertNotIn("\n", str(cm.exception))
        self.assertIn("set_by", str(cm.exception))


class NewHandedBack(unittest.TestCase):
    def test_the_entry_is_what_keeps_the_new_node_private(self):
        """Fixture new_handed_back without its 'new_object_flags' entry:
        zsymlink()'s store and zsetup()'s load are flagged; without
        'shared_after', the load after z_commit() is taken as private
        too (the window runs on); without 'tested_by', zsetup() is
        shared again."""
        d = FIXTURES / "new_handed_back"

        def rules(policies=None, tweak=None):
            A = analyse_fixture(d, policies=policies, tweak=tweak)
            return {(a.fn, a.line): a.rule for a in A.accesses if a.field == "z_size"}

        def drop(key):
            def tweak(P):
                for spec in P.new_flags:
                    spec[key] = {} if key == "handed_back_by" else []
            return tweak
        got = rules()
        self.assertEqual((got[("zsymlink", 45)], got[("zsetup", 55)], got[("zsymlink", 48)]),
                         ("private", "private", "unlocked-read"))
        got = rules("{}")
        self.assertEqual((got[("zsymlink", 45)], got[("zsetup", 55)]),
                         ("locked-write", "unlocked-read"))
        self.assertEqual(rules(tweak=drop("shared_after"))[("zsymlink", 48)], "private")
        self.assertEqual(rules(tweak=drop("tested_by"))[("zsetup", 55)], "unlocked-read")
        self.assertEqual(rules(tweak=drop("handed_back_by"))[("zsymlink", 45)], "locked-write")

    def test_the_new_store_still_votes_for_its_lock(self):
        """The private store holds z_lock: with it, z_lock is the lock of
        most stores and zsize_reset() is an unlocked write; made without
        the lock, the shared stores tie and nothing is the field's lock."""
        A, _ = analyse_edited(self, "new_handed_back", "znode.c",
                              "spin_lock(&zn->z_lock);\n\tzn->z_size = size;\n"
                              "\tspin_unlock(&zn->z_lock);\n\tz_commit",
                              "zn->z_size = size;\n\tz_commit")
        got = {(a.fn, a.line): a.rule for a in A.accesses if a.field == "z_size"}
        self.assertNotEqual(got[("zsize_reset", 75)], "unlocked-write")

    def test_a_malformed_entry_is_one_line(self):
        from lkmm_mark.tree import UserError
        for key, bad in (("handed_back_by", [{"function": "z_init_new"}]),
                         ("handed_back_by", ["z_init_new"]), ("tested_by", "z_flags_test"),
                         ("shared_after", [1])):
            entry = {"member": "z_flags", "flag": "Z_NEW", "publish": [], "reason": "r",
                     key: bad}
            with self.assertRaises(UserError) as cm:
                analyse_fixture(FIXTURES / "new_handed_back", policies=json.dumps(
                    {"new_object_flags": [entry]}))
            self.assertNotIn("\n", str(cm.exception))
            self.assertIn(key, str(cm.exception))


class DeclaredPhases(unittest.TestCase):
    def test_the_phase_is_what_keeps_the_finish_plain(self):
        """Fixture declared_phases without its policies/ 'phases' entry:
        the finish's loads and the truncation's locked store are marked
        again, so the entry, not some other rule, keeps them plain."""
        d = FIXTURES / "declared_phases"
        A = analyse_fixture(d, policies="{}")
        got = {(a.fn, a.field, a.line): a.action for a in A.accesses
               if a.struct == "oext" and a.field != "tree"}
        for (fn, field, line), action in sorted(got.items()):
            if fn in ("oext_finish", "oext_file_end", "oext_release", "oext_csum"):
                self.assertEqual(action, "READ_ONCE", (fn, field, line))
            if fn == "oext_truncate":
                self.assertEqual(action, "WRITE_ONCE", (fn, field, line))
        with_phase = {(a.fn, a.field, a.line): a.action for a in analyse_fixture(d).accesses
                      if a.struct == "oext" and a.field != "tree"}
        self.assertEqual(set(with_phase), set(got))
        self.assertEqual({k for k, v in with_phase.items() if v != "none"},
                         {k for k, v in got.items() if v != "none" and
                          k[0] not in ("oext_finish", "oext_file_end", "oext_release",
                                       "oext_truncate", "oext_csum")})

    def test_each_order_cites_its_own_declaration(self):
        """Two orders declared for one struct: a load each makes unraced
        quotes its own entry only."""
        A = analyse_fixture(FIXTURES / "declared_phases")
        why = {a.fn: a.reason for a in A.accesses
               if a.struct == "oext" and a.field == "start" and
               a.fn in ("oext_finish", "oext_csum")}
        from lkmm_mark.analysis import PHASE_TAG
        for r in why.values():
            self.assertIn(PHASE_TAG, r)      # what series.py counts
        self.assertIn("before oext_csum()", why["oext_csum"])
        self.assertNotIn("oext_finish", why["oext_csum"])
        self.assertIn("before oext_finish()", why["oext_finish"])
        self.assertNotIn("oext_csum", why["oext_finish"])


class WaitedCompletion(unittest.TestCase):
    def test_the_wait_is_what_keeps_the_reads_plain(self):
        """Fixture waited_completion without its 'after_wait' phase: the
        reads after the waits are marked again, so the phase, not some
        other rule, keeps them plain; and the sites the fixture keeps
        marked are marked either way."""
        d = FIXTURES / "waited_completion"
        marks = [{(a.fn, a.field, a.line) for a in A.accesses if a.action != "none"}
                 for A in (analyse_fixture(d, policies="{}"), analyse_fixture(d))]
        self.assertEqual(marks[0] - marks[1], {("job_result", "result", 59),
                                                ("job_result", "state", 59),
                                                ("job_sync", "result", 65)})
        self.assertEqual(marks[1] - marks[0], set())


class DrainedHolders(unittest.TestCase):
    def test_the_drain_is_what_keeps_the_holder_read_plain(self):
        """Fixture drained_holders without its 'drains' entry: the
        holder's read of its own txn's state races with the lockless
        stores after the drain again, so the drain, not some other rule,
        keeps it plain; the reads and stores it keeps marked are marked
        either way."""
        d = FIXTURES / "drained_holders"
        own = json.loads((d / "policies.json").read_text())
        del own["drains"]
        marks = [{(a.fn, a.field, a.line) for a in A.accesses if a.action != "none"}
                 for A in (analyse_fixture(d, policies=json.dumps(own)), analyse_fixture(d))]
        self.assertEqual(marks[0] - marks[1], {("holder_peek", "state", 43),
                                                ("txn_begin", "state", 78),
                                                ("txn_block", "state", 85),
                                                ("txn_unblock", "state", 92)})
        self.assertEqual(marks[1] - marks[0], set())


class DeclaredProtocols(unittest.TestCase):
    """Each kind of protocol fact, taken out of its fixture: the sites it
    keeps plain are marked again, so the fact, not another rule, keeps
    them plain."""

    def marks(self, name, policies=None):
        A = analyse_fixture(FIXTURES / name, policies=policies)
        return {(a.fn, a.field): a.action for a in A.accesses if a.action != "none"}

    def test_configuration_guard(self):
        without = self.marks("config_guard", "{}")
        self.assertEqual(without[("plain_cursor", "cursor")], "READ_ONCE")
        self.assertEqual(without[("zoned_reserve", "cursor")], "WRITE_ONCE")
        self.assertNotIn(("plain_cursor", "cursor"), self.marks("config_guard"))

    def test_an_empty_lookup_tells_the_state(self):
        """Fixture empty_lookup without the guard's "empty_lookups": a path
        that found an entry may run in zoned mode, so the zoned-only
        store races with the read halves after the lookups and with the
        locked load after it."""
        d = FIXTURES / "empty_lookup"
        own = json.loads((d / "policies.json").read_text())
        del own["guards"][0]["empty_lookups"]
        got = {}
        for told, pol in ((True, None), (False, json.dumps(own))):
            A = analyse_fixture(d, policies=pol)
            got[told] = ({a.fn: bool(getattr(a, "read_races", False))
                          for a in A.accesses if a.kind == "rmw"},
                         {a.fn: a.action for a in A.accesses
                          if a.field == "free" and a.kind == "read"})
        self.assertEqual(got[True][0], {"trim_one": False, "relink": False,
                                        "fill": True, "grow": True})
        self.assertEqual(got[False][0], {"trim_one": True, "relink": True,
                                         "fill": True, "grow": True})
        self.assertEqual(got[True][1], {"peek_free": "READ_ONCE", "found_free": "none"})
        self.assertEqual(got[False][1], {"peek_free": "READ_ONCE", "found_free": "READ_ONCE"})

    def test_locks_lent_with_a_handed_object(self):
        """The locks a task holds where it waits for the functions it
        handed an object to hold in them (task_private "lends_locks",
        lending.py): without the fact the creation's read is marked."""
        d = FIXTURES / "lent_locks"
        own = json.loads((d / "policies.json").read_text())
        del own["task_private"][1]["lends_locks"]
        without = self.marks("lent_locks", json.dumps(own))
        self.assertEqual(without[("create_one", "quota_root")], "READ_ONCE")
        got = self.marks("lent_locks")
        self.assertNotIn(("create_one", "quota_root"), got)
        self.assertEqual(got[("commit", "quota_root")], "READ_ONCE")

    def test_a_lookup_locked_on_0_past_a_test_that_lets_an_error_through(self):
        """Fixture lookup_ret0: past 'if (error && error != -ENOENT)' the
        lock an 'acquire_ret0' lookup takes is held only where the object
        it hands back is not NULL (lockconds.py); without the lookups as
        lock functions obj_get()'s store races, and with 'if (error)' the
        lock is held past the test."""
        d = FIXTURES / "lookup_ret0"
        own = json.loads((d / "policies.json").read_text())
        own["lock_functions"] = [x for x in own["lock_functions"]
                                 if x["op"] != "acquire_ret0"]
        without = self.marks("lookup_ret0", json.dumps(own))
        self.assertEqual(without[("obj_get", "val")], "WRITE_ONCE")
        got = self.marks("lookup_ret0")
        self.assertNotIn(("obj_get", "val"), got)
        self.assertEqual(got[("obj_peek", "seen")], "READ_ONCE")
        A, _ = analyse_edited(self, "lookup_ret0", "obj.c", "error && -ENOENT != error", "error")
        self.assertEqual({(a.fn, a.field) for a in A.accesses if a.action != "none"}, set())

    def test_an_ops_entry_lock_of_one_table(self):
        """Fixture ops_table_lock: an ops_entry_locks entry with "tables"
        gives its lock to the methods of those ops tables only."""
        d = FIXTURES / "ops_table_lock"
        own = json.loads((d / "policies.json").read_text())
        del own["ops_entry_locks"]
        without = self.marks("ops_table_lock", json.dumps(own))
        self.assertEqual(without[("buf_item_precommit", "error")], "WRITE_ONCE")
        got = self.marks("ops_table_lock")
        self.assertNotIn(("buf_item_precommit", "error"), got)
        self.assertEqual(got[("note_item_precommit", "state")], "WRITE_ONCE")

    def test_a_malformed_ops_table_lock_is_one_line(self):
        from lkmm_mark.base import UserError
        with self.assertRaises(UserError) as cm:
            analyse_fixture(FIXTURES / "ops_table_lock", policies=json.dumps({
                "ops_entry_locks": [{"member": "precommit", "tables": "buf_item_ops",
                                     "lock": "buf_y.sema", "mode": "exclusive",
                                     "reason": "r"}]}))
        self.assertEqual(len(str(cm.exception).splitlines()), 1)
        self.assertIn("tables", str(cm.exception))

    def test_lock_handed_to_an_io(self):
        """The lock a submitter hands to its I/O (io_locks, lending.py):
        the work item that runs the completion holds it, a part's end_io
        does not, and with a submitter that does not hold it the fact
        gives nothing."""
        d = FIXTURES / "io_lock"
        own = json.loads((d / "policies.json").read_text())
        del own["io_locks"]
        without = self.marks("io_lock", json.dumps(own))
        self.assertEqual(without[("buf_ioend", "error")], "READ_ONCE")
        got = self.marks("io_lock")
        self.assertNotIn(("buf_ioend", "error"), got)
        self.assertEqual(got[("buf_end_io", "error")], "READ_ONCE")
        self.assertEqual(got[("buf_peek", "state")], "READ_ONCE")
        A, _ = analyse_edited(self, "io_lock", "buf.c", "int buf_peek(",
                              "void buf_flush(struct buf_x *bp)\n{\n\tbuf_submit(bp);\n}\n\n"
                              "int buf_peek(")
        held = {k[1]: set(v) for k, v in A.entry.items()}
        self.assertNotIn("buf_x.sema", held["buf_ioend_work"] | held["buf_ioend"])
        got = {(a.fn, a.field): a.rule for a in A.accesses if a.kind == "write"}
        self.assertEqual(got[("buf_ioend", "state")], "unlocked-write")
        A = analyse_fixture(d)
        self.assertIn("buf_x.sema", {k[1]: set(v) for k, v in A.entry.items()}["buf_ioend_work"])

    def test_a_malformed_io_lock_is_one_line(self):
        from lkmm_mark.tree import UserError
        with self.assertRaises(UserError) as cm:
            analyse_fixture(FIXTURES / "io_lock", policies=json.dumps({"io_locks": [
                {"lock": "buf_x.sema", "submit": "buf_submit", "completion": ["buf_ioend"],
                 "reason": "r"}]}))
        self.assertNotIn("\n", str(cm.exception))
        self.assertIn("io_locks", str(cm.exception))

    def test_an_io_lock_handed_off_part_by_part(self):
        """Fixture io_handoff: with "handoff", a part's end_io is kept
        apart from the lock's holders (buf_set_flags()) and from the
        submitter before its first handoff, not from the submitter's
        store after one (buf_apply()'s empty part); without it, every
        pair races."""
        d = FIXTURES / "io_handoff"
        own = json.loads((d / "policies.json").read_text())
        del own["io_locks"][0]["handoff"]
        without = self.marks("io_handoff", json.dumps(own))
        self.assertEqual(without[("buf_part_end_io", "flags")], "READ_ONCE")
        self.assertEqual(without[("buf_set_flags", "flags")], "WRITE_ONCE")
        self.assertEqual(without[("buf_submit", "error")], "WRITE_ONCE")
        got = self.marks("io_handoff")
        for key in (("buf_part_end_io", "flags"), ("buf_set_flags", "flags"),
                    ("buf_submit", "error")):
            self.assertNotIn(key, got)
        self.assertEqual(got[("buf_part_end_io", "error")], "READ_ONCE")
        self.assertEqual(got[("buf_apply", "error")], "WRITE_ONCE")

    def test_a_malformed_io_handoff_is_one_line(self):
        from lkmm_mark.tree import UserError
        with self.assertRaises(UserError) as cm:
            analyse_fixture(FIXTURES / "io_handoff", policies=json.dumps({"io_locks": [
                {"lock": "buf_x.sema", "submit": ["buf_submit"], "completion": ["buf_ioend"],
                 "handoff": "submit_part_x", "reason": "r"}]}))
        self.assertNotIn("\n", str(cm.exception))
        self.assertIn("handoff", str(cm.exception))

    def test_configuration_handed_to_a_work_item(self):
        """A work item registered after a configuration test runs in that
        configuration (contexts.handed_states()), and a chain of calls that
        finds a configuration both true and false is taken by no mount."""
        from lkmm_mark import contexts
        got = self.marks("config_work")
        self.assertNotIn(("fill_worker", "unusable"), got)
        A = analyse_fixture(FIXTURES / "config_work")
        (store,) = [a for a in A.accesses if a.fn == "zoned_add" and a.field == "used"]
        self.assertTrue(all("fill_worker" not in c for c in store.contexts), store.contexts)
        orig, clash = contexts.Contexts.handed_states, contexts._config_clash
        try:
            contexts.Contexts.handed_states = lambda self: {}
            self.assertEqual(self.marks("config_work")[("fill_worker", "unusable")], "READ_ONCE")
            contexts.Contexts.handed_states = orig
            contexts._config_clash = lambda held: False
            A = analyse_fixture(FIXTURES / "config_work")
            (store,) = [a for a in A.accesses if a.fn == "zoned_add" and a.field == "used"]
            self.assertTrue(any("fill_worker" in c for c in store.contexts), store.contexts)
        finally:
            contexts.Contexts.handed_states, contexts._config_clash = orig, clash

    def test_freeze_protection(self):
        """Write access to a mount (mnt_want_write_file()) keeps a store
        from ->freeze_fs, which the VFS enters with the freeze protection
        and s_umount held for write (kernel.json, with "also"); a method
        the target also calls directly, without them, holds neither."""
        def no_freeze(P):
            P.ops_entry_locks.pop("freeze_fs")

        def no_also(P):
            spec = dict(P.ops_entry_locks["freeze_fs"])
            spec.pop("also")
            P.ops_entry_locks["freeze_fs"] = spec
        got = self.marks("freeze_protection")
        self.assertNotIn(("foo_freeze", "dirty"), got)
        self.assertEqual(got[("foo_opts_show", "opts")], "READ_ONCE")
        A = analyse_fixture(FIXTURES / "freeze_protection", tweak=no_freeze)
        marks = {(a.fn, a.field): a.action for a in A.accesses if a.action != "none"}
        self.assertEqual(marks[("foo_freeze", "dirty")], "READ_ONCE")
        # without s_umount, the freeze's load of opts is no evidence the
        # field is shared: the remount's lock looks like another struct's
        A = analyse_fixture(FIXTURES / "freeze_protection", tweak=no_also)
        self.assertNotIn("READ_ONCE", {a.action for a in A.accesses if a.field == "opts"})
        A, _ = analyse_edited(self, "freeze_protection", "super.c", "u64 foo_opts_show(",
                              "long foo_sync(struct super_block *sb)\n{\n\treturn "
                              "foo_freeze(sb);\n}\n\nu64 foo_opts_show(")
        marks = {(a.fn, a.field): a.action for a in A.accesses if a.action != "none"}
        self.assertEqual(marks[("foo_freeze", "dirty")], "READ_ONCE")
        # foo_mount_rw()'s '&mnt->mnt_sb->s_umount' is the super block's
        # s_umount the facts name: without that, the remount method
        # would lose the lock and the opts pair with it
        from lkmm_mark import accesses
        orig = accesses.Accesses._member_lock
        try:
            accesses.Accesses._member_lock = lambda self, m: "?." + m
            self.assertNotIn(("foo_opts_show", "opts"), self.marks("freeze_protection"))
        finally:
            accesses.Accesses._member_lock = orig

    def test_freeze_levels(self):
        """The internal level of the freeze protection is a lock of its
        own (kernel.json super_block.sb_internal): sb_end_intwrite() leaves
        the write access a task holds, and a subsystem's handle that takes
        sb_start_intwrite() holds it ('also'), so neither store runs beside
        ->freeze_fs or ->unfreeze_fs; an attached handle, which takes no
        freeze protection, still pairs with ->unfreeze_fs."""
        import json
        got = self.marks("freeze_levels")
        self.assertNotIn(("foo_unfreeze", "gen"), got)
        self.assertNotIn(("foo_freeze", "opts"), got)
        self.assertEqual(got[("foo_unfreeze", "seq")], "READ_ONCE")
        # the handle without the internal level: its store pairs
        pol = json.loads((FIXTURES / "freeze_levels" / "policies.json").read_text())
        pol["lock_functions"][0].pop("also")
        without = self.marks("freeze_levels", json.dumps(pol))
        self.assertEqual(without[("foo_unfreeze", "gen")], "READ_ONCE")

        # one lock for every level: sb_end_intwrite() drops the write
        # access too, and the store after it pairs with ->freeze_fs
        def one_level(P):
            for n in ("sb_start_intwrite", "sb_end_intwrite"):
                P.lockfns[n] = dict(P.lockfns[n], lock="super_block.s_writers")
        A = analyse_fixture(FIXTURES / "freeze_levels", tweak=one_level)
        marks = {(a.fn, a.field): a.action for a in A.accesses if a.action != "none"}
        self.assertEqual(marks[("foo_freeze", "opts")], "READ_ONCE")

    def test_message_arguments_and_output(self):
        """The arguments after a format string are a message, except those
        of a call whose output the user reads (kernel.json output_calls)."""
        got = self.marks("message_args")
        self.assertEqual(got[("report_fail", "id")], "data_race")
        self.assertEqual(got[("show_id", "id")], "READ_ONCE")
        self.assertEqual(got[("check_state", "state")], "data_race")
        self.assertEqual(got[("use_state", "state")], "READ_ONCE")

        def no_output(P):
            P.output_calls = set()
        A = analyse_fixture(FIXTURES / "message_args", tweak=no_output)
        (a,) = [a for a in A.accesses if a.fn == "show_id" and a.field == "id"]
        self.assertEqual(a.action, "data_race")
        self.assertIn("the message of sysfs_emit()", a.reason + a.lockset_reason)

    def test_self_test_calls_are_no_context(self):
        """A call from the self-tests (test_dirs) adds no calling context
        and takes no lock away from the entry locks of its callee."""
        from lkmm_mark import callgraph
        self.assertEqual(self.marks("test_callers"), {})
        orig = callgraph.CallGraph.live_sites
        try:
            callgraph.CallGraph.live_sites = lambda self, sites: sites
            got = self.marks("test_callers")
        finally:
            callgraph.CallGraph.live_sites = orig
        self.assertEqual(got[("read_count", "count")], "READ_ONCE")

    def test_helper_only_the_self_tests_call(self):
        """A function of the target called from the self-tests alone is
        test code: its call adds no calling context either."""
        from lkmm_mark import callgraph
        orig = callgraph.CallGraph._is_test_code
        try:
            callgraph.CallGraph._is_test_code = \
                lambda self, fn: self._is_test_file(fn.file)
            got = self.marks("test_callers")
        finally:
            callgraph.CallGraph._is_test_code = orig
        self.assertEqual(got[("read_count", "count")], "READ_ONCE")

    def test_context_named_by_an_entry_that_can_race(self):
        """The entry point that names a context is not one whose path down
        holds a lock that excludes the other side of the pair (its entry
        lock, or one taken on the way), nor one that excludes the entry
        point naming the other side (two freezes)."""
        from lkmm_mark import contexts

        def named(A, fn):
            (a,) = [a for a in A.accesses if a.fn == fn and a.action != "none"]
            return [c.split("()", 1)[0] for c in a.contexts]
        A = analyse_fixture(FIXTURES / "context_head")
        self.assertEqual(named(A, "foo_ioctl_count"), ["foo_ioctl_count", "foo_thread"])
        self.assertEqual(named(A, "peek"), ["foo_freeze", "foo_ioctl_walk"])
        C = contexts.Contexts
        orig = C._path_excludes, C.head_locks, C._path_locks
        try:
            # only the entry point's own locks: the ioctl that takes the
            # same mutex on its way names the other side
            C._path_locks = lambda self, x, prev: frozenset(
                self.entry.get((self.src.by_name[x][0].file, x), ()))
            A = analyse_fixture(FIXTURES / "context_head")
            self.assertEqual(named(A, "foo_ioctl_count"), ["foo_ioctl_count", "foo_ioctl_walk"])
            C._path_locks = orig[2]
            C.head_locks = lambda self, chain, avoid=frozenset(): frozenset()
            A = analyse_fixture(FIXTURES / "context_head")
            self.assertEqual(named(A, "peek"), ["foo_freeze", "foo_freeze"])
            C._path_excludes = lambda self, x, prev, avoid: False
            A = analyse_fixture(FIXTURES / "context_head")
            self.assertEqual(named(A, "foo_ioctl_count"), ["foo_ioctl_count", "foo_freeze"])
        finally:
            C._path_excludes, C.head_locks, C._path_locks = orig

    def test_state_guards(self):
        keep = '{"lock_functions": %s}' % json.dumps(json.loads(
            (FIXTURES / "state_guard" / "policies.json").read_text())["lock_functions"])
        without = self.marks("state_guard", keep)
        for site in (("quota_reserve", "qulist"), ("log_use", "log"),
                     ("trans_gen", "generation")):
            self.assertEqual(without[site], "READ_ONCE", site)
            self.assertNotIn(site, self.marks("state_guard"), site)

    def test_a_member_state_implies_its_lock_in_callees(self):
        """locked_member_state without its guard: fix_len(), reached only
        where alloc() found hdr_bp set, no longer holds the header
        buffer's lock, and its read races with put_free()'s store."""
        d = FIXTURES / "locked_member_state"
        p = json.loads((d / "policies.json").read_text())
        del p["guards"]
        without = self.marks("locked_member_state", json.dumps(p))
        self.assertEqual(without[("fix_len", "flcount")], "READ_ONCE")
        self.assertNotIn(("fix_len", "flcount"), self.marks("locked_member_state"))

    def test_a_list_of_locked_objects(self):
        """locked_list without its 'locked_lists' fact: what submit_wait()
        takes off its wait list is not known locked, and buf_wait()'s read
        races with buf_fail()'s locked store."""
        d = FIXTURES / "locked_list"
        p = json.loads((d / "policies.json").read_text())
        del p["locked_lists"]
        without = self.marks("locked_list", json.dumps(p))
        self.assertEqual(without[("buf_wait", "error")], "READ_ONCE")
        self.assertNotIn(("buf_wait", "error"), self.marks("locked_list"))

    def test_a_state_pinned_by_an_assertion_against_one_the_lock_pins(self):
        """pinned_state without its guard: grp_remove()'s read after
        BUG_ON(!g->ro) races with the stores made where ro was found 0
        under the lock; as a plain guard (no "under", no "pinned"), a
        state found without the lock, one found before an unlock and an
        assertion's state in a callee would keep apart what races."""
        with_fact = self.marks("pinned_state")
        self.assertNotIn(("grp_remove", "unusable"), with_fact)
        for site in (("grp_remove", "spare"), ("grp_peek", "unusable"),
                     ("grp_total", "unusable")):
            self.assertEqual(with_fact[site], "READ_ONCE", site)
        self.assertEqual(self.marks("pinned_state", "{}")[("grp_remove", "unusable")],
                         "READ_ONCE")
        plain = self.marks("pinned_state", json.dumps(
            {"guards": [{"field": "grp.ro", "reason": "a count"}]}))
        for site in (("grp_remove", "spare"), ("grp_peek", "unusable"),
                     ("grp_total", "unusable")):
            self.assertNotIn(site, plain, site)

    def test_a_state_known_on_a_path_until_the_function_publishes_it(self):
        """published_on_path: quota_reserve()'s load of ulist races with
        no store of quota_enable() only with all three of the guard's
        locks (the test made under ioctl_lock holds while sem is held,
        and the second test's true branch is then never taken), with ret
        known 0 after the publication ('if (!ret)', 'ret = 0') and with
        that branch left out; quota_peek()'s test without any of them
        tells nothing."""
        from lkmm_mark import correlate, guards
        site = ("quota_reserve", "ulist")
        got = self.marks("published_on_path")
        self.assertNotIn(site, got)
        self.assertEqual(got[("quota_peek", "ulist")], "READ_ONCE")
        one = '{"guards": [{"field": "qfs.root", "under": "qfs.lock", "reason": "r"}]}'
        for pol in ("{}", one):
            self.assertEqual(self.marks("published_on_path", pol)[site], "READ_ONCE", pol)
        orig = correlate.zero_test, guards.Guards.enter
        try:
            correlate.zero_test = lambda *a: None
            self.assertEqual(self.marks("published_on_path")[site], "READ_ONCE")
            correlate.zero_test = orig[0]
            guards.Guards.enter = lambda self, st, g, yes, line, asserted=False: self._with(
                st, g[0], g[1], g[2] if yes else g[3], "tested", line)
            self.assertEqual(self.marks("published_on_path")[site], "READ_ONCE")
        finally:
            correlate.zero_test, guards.Guards.enter = orig

    def test_a_weak_handle_still_pins_the_running_transaction(self):
        """transaction_pin without the handle's 'pin': the weak handle
        proves nothing, so the commit's store of the running transaction
        races with its load; without 'err_ptr' the failed start's branch
        would seem to hold the handle."""
        spec = json.loads((FIXTURES / "transaction_pin" / "policies.json").read_text())
        got = self.marks("transaction_pin")
        self.assertNotIn(("clean_block", "running"), got)
        self.assertNotIn(("commit", "running"), got)
        self.assertEqual(got[("peek", "gen")], "READ_ONCE")
        del spec["param_locks"][0]["pin"]
        without = self.marks("transaction_pin", json.dumps(spec))
        self.assertEqual(without[("clean_block", "running")], "READ_ONCE")
        self.assertEqual(without[("commit", "running")], "WRITE_ONCE")
        spec = json.loads((FIXTURES / "transaction_pin" / "policies.json").read_text())
        for lf in spec["lock_functions"]:
            lf.pop("err_ptr", None)
        self.assertNotIn(("peek", "gen"), self.marks("transaction_pin", json.dumps(spec)))

    def test_a_malformed_pin_is_one_line(self):
        from lkmm_mark.tree import UserError
        spec = json.loads((FIXTURES / "transaction_pin" / "policies.json").read_text())
        spec["param_locks"][0]["pin"] = "fs3.pin"
        with self.assertRaises(UserError) as cm:
            self.marks("transaction_pin", json.dumps(spec))
        self.assertNotIn("\n", str(cm.exception))
        self.assertIn("pin", str(cm.exception))

    def test_exclusive_operations_handed_to_a_thread(self):
        spec = json.loads((FIXTURES / "exclusive_ops" / "policies.json").read_text())
        spec["pseudo_locks"][0]["handed_to_threads"] = False
        self.assertEqual(self.marks("exclusive_ops", json.dumps(spec))[
            ("replace_thread", "ndevs")], "WRITE_ONCE")
        without = self.marks("exclusive_ops", "{}")
        self.assertEqual(without[("dev_remove", "ndevs")], "READ_ONCE")
        got = self.marks("exclusive_ops")
        self.assertNotIn(("dev_remove", "ndevs"), got)
        # two adds: one group, no exclusion
        self.assertEqual(got[("add_count", "ndevs")], "READ_ONCE")

    def test_writers_drain(self):
        spec = json.loads((FIXTURES / "writers_drain" / "policies.json").read_text())
        spec["lock_functions"] = spec["lock_functions"][:2]
        self.assertEqual(self.marks("writers_drain", json.dumps(spec))[
            ("tx_use", "committed")], "READ_ONCE")
        self.assertNotIn(("tx_use", "committed"), self.marks("writers_drain"))

    def test_instance_roles(self):
        without = self.marks("instance_roles", "{}")
        self.assertEqual(without[("log_commit", "transid")], "WRITE_ONCE")
        self.assertNotIn(("log_commit", "transid"), self.marks("instance_roles"))

    def test_instance_params_and_calls(self):
        """instance_params without 'params': record()'s root may be a
        relocation root, so its locked read races with merge()'s store;
        without 'calls', init_reloc()'s store may be to what make_reloc()
        returned, a subvolume root for all it knows, and pairs with
        record_root()'s read instead of merge()'s store."""
        def flagged(drop):
            spec = json.loads((FIXTURES / "instance_params" / "policies.json").read_text())
            for k in drop:
                del spec["instances"][0][k]
            A = analyse_fixture(FIXTURES / "instance_params", policies=json.dumps(spec))
            return {(a.fn, a.kind): a for a in A.accesses
                    if a.action != "none" and a.field == "last"}
        self.assertNotIn(("record", "read"), flagged(()))
        self.assertEqual(flagged(("params", "calls"))[("record", "read")].action, "READ_ONCE")
        self.assertEqual(flagged(("params",))[("record", "read")].pair.fn, "merge")
        self.assertEqual(flagged(("calls",))[("init_reloc", "write")].pair.fn, "record_root")
        self.assertEqual(flagged(())[("init_reloc", "write")].pair.fn, "merge")

    def test_teardown_keeps_pairs_apart(self):
        """policies/ 'teardown_ops': a store made only in ->evict_inode on
        the object it is given races with no live access."""
        A = analyse_fixture(FIXTURES / "counterpart_choice")
        ev = [a for a in A.accesses if a.fn == "obj_evict" and a.field == "state"][0]
        self.assertEqual((ev.action, ev.tier), ("none", "lockset-only"))
        self.assertIn("teardown", ev.reason)

        def untorn(P):
            P.teardown_ops = set()
        A = analyse_fixture(FIXTURES / "counterpart_choice", tweak=untorn)
        ev = [a for a in A.accesses if a.fn == "obj_evict" and a.field == "state"][0]
        self.assertEqual(ev.action, "WRITE_ONCE")
        st = [a for a in A.accesses if a.fn == "obj_stat" and a.field == "state"][0]
        self.assertEqual(st.pair.fn, "obj_evict")     # first in file order

    def test_named_counterpart_is_the_strongest(self):
        """A load in a WARN_ON() and a load after a wait that has seen the
        value are weaker counterparts than a plain use, though they come
        first; the contexts named are those of the racing pair."""
        A = analyse_fixture(FIXTURES / "counterpart_choice")
        st = [a for a in A.accesses if a.fn == "obj_set" and a.field == "level"][0]
        self.assertEqual(st.pair.fn, "obj_use")
        self.assertEqual(st.contexts, ("obj_set() as ->set (choice.c:116)",
                                       "obj_use() as ->use (choice.c:115)"))
        dn = [a for a in A.accesses if a.fn == "obj_done" and a.field == "level"][0]
        self.assertTrue(dn.contexts[0].startswith("obj_wait() as ->wait"), dn.contexts)
        self.assertTrue(dn.contexts[0].endswith("-> obj_done()"), dn.contexts)

    def test_store_names_a_load_first(self):
        """A store's counterpart is a load before another store, though
        the stores race in a larger share of their calling contexts."""
        A = analyse_fixture(FIXTURES / "counterpart_ops")
        on = [a for a in A.accesses if a.fn == "rescan_on" and a.field == "running"][0]
        self.assertEqual(on.pair.fn, "wait_rescan")
        share = {b.fn: A.racing_contexts(on, b) for b in A.pair_idx[("fsi", "running")]}
        self.assertEqual((share["rescan_worker"], share["wait_rescan"]), ((2, 2), (3, 4)))

    def test_sole_operation_entered_unseen(self):
        """do_balance() runs in an operation that balance_resume() enters
        through a wrapper the flow does not follow: the store made in an
        operation that admits no other is named after the one made in an
        operation that does; a resume that enters none names the first."""
        A = analyse_fixture(FIXTURES / "counterpart_ops")
        bal = [a for a in A.accesses if a.fn == "do_balance" and a.field == "ndevs"][0]
        self.assertEqual(bal.pair.fn, "dev_add")
        A, _ = analyse_edited(self, "counterpart_ops", "ops.c", "if (try_lock_balance(fsi))",
                              "if (fsi->op == OP_PAUSED)")
        bal = [a for a in A.accesses if a.fn == "do_balance" and a.field == "ndevs"][0]
        self.assertEqual(bal.pair.fn, "dev_replace")

    def test_asserted_flag(self):
        """flag_asserted_private without its 'new_object_flags' entry: the
        clone's store is a shared locked store again, and the lockless
        load of start is marked; with it, only gen (stored before the
        assertion) is."""
        without = self.marks("flag_asserted_private", "{}")
        self.assertEqual(without[("leaf_start", "start")], "READ_ONCE")
        self.assertEqual(without[("leaf_next", "start")], "WRITE_ONCE")
        got = self.marks("flag_asserted_private")
        self.assertNotIn(("leaf_start", "start"), got)
        self.assertEqual(got[("leaf_gen", "gen")], "READ_ONCE")

    def test_every_paired_site_names_a_counterpart_and_two_contexts(self):
        for name in ("racing_pairs", "config_guard", "state_guard", "exclusive_ops",
                     "writers_drain", "macro_accessors", "instance_roles",
                     "counterpart_choice", "counterpart_ops"):
            A = analyse_fixture(FIXTURES / name)
            for a in A.accesses:
                if a.action == "none":
                    continue
                self.assertEqual(a.tier, "paired", (name, a.fn, a.field))
                self.assertIsNotNone(a.pair)
                self.assertEqual(len(a.contexts), 2)
                self.assertIn("%s() at %s" % (a.pair.fn, a.pair.where()), a.reason)


class MacroAccessors(unittest.TestCase):
    def test_calls_are_accesses_reported_in_the_body(self):
        """The calls of accessor macros and generated accessors are
        accesses of the argument's field, analysed at the call; each
        racing body is one site, its calls via-accessor."""
        A = analyse_fixture(FIXTURES / "macro_accessors")
        calls = {(a.fn, a.kind) for a in A.accesses if a.rule == "via-accessor"}
        self.assertIn(("show_opts", "read"), calls)
        self.assertIn(("remount", "rmw"), calls)          # fsi_clear_opt(fsi->opts)
        self.assertIn(("resize", "write"), calls)          # dev_set_size()
        bodies = {a.fn: a.action for a in A.accesses if a.action != "none"}
        self.assertEqual(bodies, {"fsi_test_opt": "READ_ONCE", "fsi_set_opt": "WRITE_ONCE",
                                  "fsi_clear_opt": "WRITE_ONCE",
                                  "fsi_set_and_info": "WRITE_ONCE",
                                  "dev_get_size": "READ_ONCE", "dev_set_size": "WRITE_ONCE"})
        test_opt = [a for a in A.accesses if a.fn == "fsi_test_opt"][0]
        self.assertIn("of the 1 calls of fsi_test_opt()", test_opt.reason)
        self.assertEqual(test_opt.pair.fn, "remount")


class OtherBugs(unittest.TestCase):
    """Double fetches and two-step stores (doublefetch.py, twostep.py):
    reported apart, they change no verdict; the report names both
    accesses, the racing counterpart and the fix."""

    def test_detectors_change_no_verdict(self):
        from unittest import mock
        from lkmm_mark.analysis import Analysis
        for name in ("double_fetch", "two_step_store", "stolen_pointer"):
            A = analyse_fixture(FIXTURES / name)
            self.assertTrue(A.double_fetches or A.two_step_stores, name)
            with mock.patch.object(Analysis, "find_double_fetches", lambda self: None), \
                    mock.patch.object(Analysis, "find_two_step_stores", lambda self: None):
                B = analyse_fixture(FIXTURES / name)
            self.assertEqual(site_lines(A), site_lines(B), name)
            self.assertEqual(pair_lines(A), pair_lines(B), name)
            self.assertEqual(B.double_fetches + B.two_step_stores, [], name)

    def test_report_lines(self):
        from lkmm_mark.commands import OTHER_BUGS, other_bug_lines, plan_dict
        for name, word, rule, verb in (
                ("double_fetch", "LOAD-ONCE", "double-fetch", "stores it"),
                ("two_step_store", "STORE-ONCE", "two-step-store", "loads it")):
            d = plan_dict(analyse_fixture(FIXTURES / name))
            lines = other_bug_lines(d)
            found = [x for x in lines if not x.startswith("#")]
            key = "double_fetches" if rule == "double-fetch" else "two_step_stores"
            self.assertEqual(len(found), len(d[key]), name)
            heading = [h for k, h, _, _ in OTHER_BUGS if k == key][0]
            self.assertIn("# %s: %d" % (heading, len(d[key])), lines)
            for x, line in zip(d[key], found):
                self.assertTrue(line.startswith("%s:%d:%d-%d: %s: " % (
                    x["file"], x["line"], x["column"], x["end_column"], word)), line)
                self.assertTrue(line.endswith("(%s)" % rule), line)
                c = x["counterpart"]
                self.assertIn("%s() at %s:%d %s" % (c["function"], c["file"].split("/")[-1],
                                                    c["line"], verb), line)
                self.assertIn("again", line)
                self.assertIn(str(x["again"][0]["line"]), line)


class RuleCoverage(unittest.TestCase):
    def test_every_rule_has_a_fixture(self):
        """Every rule and exclusion of policies/policies.json is the verdict
        of at least one site in some fixture's expected.sites."""
        import json
        import re
        rules = json.loads((FIXTURES.parents[1] / "policies" / "policies.json").read_text())
        ids = [r["id"] for r in rules["rules"]]
        used = set()
        for f in FIXTURES.glob("*/expected.sites"):
            used.update(re.findall(r"\(([a-z-]+)\)\s*$", f.read_text(), re.M))
        self.assertEqual([i for i in ids if i not in used], [],
                         "rules no fixture exercises")
        self.assertEqual(sorted(used - set(ids)), [], "verdict rules policies.json lacks")


class ZeroTrylock(unittest.TestCase):
    """Fixture zero_trylock: a try-lock the condition goes on after."""

    def _rule(self, A, fn):
        (r,) = [a.rule for a in A.accesses if a.fn == fn and a.field == "size"]
        return r

    def test_an_or_after_the_trylock_says_nothing(self):
        # 'spin_trylock(L) || n' is true also where the try-lock failed
        A, _ = analyse_edited(self, "zero_trylock", "expand.c",
                              "spin_trylock(&c->lock) != 0", "spin_trylock(&c->lock) || n")
        self.assertNotIn(self._rule(A, "cache_shrink"), ("locked-write", "always-locked"))

    def test_a_comparison_with_1_says_nothing(self):
        A, _ = analyse_edited(self, "zero_trylock", "expand.c",
                              "spin_trylock(&c->lock) == 0", "spin_trylock(&c->lock) == 1")
        self.assertEqual(self._rule(A, "cache_expand"), "unlocked-write")
        self.assertEqual(self._rule(A, "cache_size"), "racing-locked-read")

    def test_a_negated_and_says_nothing(self):
        # '!spin_trylock(L) && n' is false also where the try-lock failed
        A, _ = analyse_edited(self, "zero_trylock", "expand.c",
                              "spin_trylock(&c->lock) != 0) {",
                              "!spin_trylock(&c->lock) && n) {} else {")
        self.assertNotIn(self._rule(A, "cache_shrink"), ("locked-write", "always-locked"))


class TeardownOwned(unittest.TestCase):
    """Fixture teardown_owned: a struct only the torn-down object reaches
    (policies/ 'owned_structs'), per calling context."""

    def _got(self, A, struct):
        return {(a.fn, a.field, a.kind): (a.action, a.rule) for a in A.accesses
                if a.struct == struct}

    def test_without_the_fact_the_teardown_context_races(self):
        def unowned(P):
            P.owned_structs = {}
        A = analyse_fixture(FIXTURES / "teardown_owned", tweak=unowned)
        got = self._got(A, "entry")
        self.assertEqual(got[("entries_clear", "inum", "write")], ("WRITE_ONCE", "unlocked-write"))
        self.assertEqual(got[("obj_get", "inum", "read")], ("READ_ONCE", "racing-locked-read"))
        st = [a for a in A.accesses if a.fn == "obj_get" and a.field == "inum"][0]
        self.assertIn("obj_evict() as ->evict_inode", st.contexts[1])

    def test_only_the_declared_struct(self):
        # the shared counter the teardown also changes stays paired
        A = analyse_fixture(FIXTURES / "teardown_owned")
        got = self._got(A, "sb")
        self.assertEqual(got[("sb_put", "count", "write")], ("WRITE_ONCE", "unlocked-write"))
        self.assertFalse(any(v[0] != "none" for v in self._got(A, "entry").values()))

    def test_a_live_call_keeps_its_context(self):
        # entries_clear() called from a live method without the lock: its
        # stores race again, though the teardown context still does not
        A, _ = analyse_edited(self, "teardown_owned", "owned.c", "\tup_read(&o->sem);\n",
                              "\tup_read(&o->sem);\n\tentries_clear(o->area);\n")
        self.assertEqual(self._got(A, "entry")[("entries_clear", "inum", "write")],
                         ("WRITE_ONCE", "unlocked-write"))

    def _check_rule(self, old, new):
        A, _ = analyse_edited(self, "teardown_owned", "owned.c", old, new)
        return self._got(A, "entry")[("__entry_check", "size", "read")]

    def test_a_macro_that_is_no_wrapper_hides_its_calls(self):
        got = self._check_rule("#define entry_check(o, e) __entry_check((o), (e), __func__, __LINE__)",
                               "#define entry_check(o, e) (__entry_check((o), (e), __func__, __LINE__) + 0)")
        self.assertEqual(got, ("READ_ONCE", "unlocked-read"))

    def test_an_owner_no_longer_new_is_shared(self):
        got = self._check_rule("\tif (!(o->i_state & I_NEW))\n\t\treturn o;\n", "")
        self.assertEqual(got, ("READ_ONCE", "unlocked-read"))


class ManyContexts(unittest.TestCase):
    """Fixture caller_contexts_many: a function with more calling contexts
    than are counted gets one per call site, each with the lock its
    caller takes around the call."""

    def _verdicts(self, A):
        return {a.fn: (a.action, a.rule) for a in A.accesses if a.field == "ctl"}

    def test_more_contexts_than_counted(self):
        # the fixture is the case it is about: read_ctl()'s own contexts
        # are too many to list
        A = analyse_fixture(FIXTURES / "caller_contexts_many")
        (a,) = [a for a in A.accesses if a.fn == "read_ctl"]
        self.assertIsNone(A.caller_contexts((a.file, a.fn)))
        # one per context of each call site's caller (64 each, which fit
        # in _SITE_MAX)
        self.assertEqual(len(A.lockset_chains(a)), 128)

    def test_callers_with_too_many_contexts_give_their_entry_locks(self):
        # callers whose contexts do not fit: one context per call site,
        # each with the lock its caller takes around it
        from unittest import mock
        from lkmm_mark.contexts import Contexts
        with mock.patch.object(Contexts, "_SITE_MAX", Contexts._CTX_MAX):
            A = analyse_fixture(FIXTURES / "caller_contexts_many")
        (a,) = [a for a in A.accesses if a.fn == "read_ctl"]
        self.assertEqual(len(A.lockset_chains(a)), 2)
        self.assertEqual(self._verdicts(A)["read_ctl"], ("none", "locked-in-every-caller"))

    def test_without_one_context_per_call_the_read_races(self):
        # the locks every caller holds, the only context left before, are
        # none: the read paired with the store
        from unittest import mock
        from lkmm_mark.contexts import Contexts
        with mock.patch.object(Contexts, "_site_contexts",
                               lambda self, key, sites, need:
                               self._contexts_from(key, sites, need=need)):
            A = analyse_fixture(FIXTURES / "caller_contexts_many")
        self.assertEqual(self._verdicts(A)["read_ctl"], ("READ_ONCE", "unlocked-read"))

    def test_a_call_without_the_lock_races(self):
        # the relocation step taking another lock: that call's context
        # shares none with the store
        A, _ = analyse_edited(self, "caller_contexts_many", "many.c",
                              "\tmutex_lock(&fs->reloc_mutex);\n\tread_ctl(fs);",
                              "\tmutex_lock(&fs->l1);\n\tread_ctl(fs);")
        self.assertEqual(self._verdicts(A)["read_ctl"], ("READ_ONCE", "unlocked-read"))


class ManyContextsOneHopUp(unittest.TestCase):
    """Fixture caller_contexts_hop: a function with more calling contexts
    than are counted gets one per call site, each of them one per context
    of the caller when those are few (a helper whose callers hold
    different locks): the locks every caller of that helper holds, none,
    no longer stand for all of them."""

    def _verdicts(self, A):
        return {a.fn: (a.action, a.rule) for a in A.accesses if a.field == "ctl"}

    def test_the_callers_contexts_keep_their_locks(self):
        A = analyse_fixture(FIXTURES / "caller_contexts_hop")
        (a,) = [a for a in A.accesses if a.fn == "read_ctl"]
        self.assertIsNone(A.caller_contexts((a.file, a.fn)))
        chains = [c for _, c in A.lockset_chains(a)]
        self.assertIn(("commit_step", "check_ctl", "read_ctl"), chains)
        self.assertEqual(self._verdicts(A)["read_ctl"], ("none", "locked-in-every-caller"))

    def test_with_the_callers_entry_locks_only_the_read_races(self):
        # each call site with only the locks its caller is entered with
        # in all of its contexts (before): check_ctl()'s are none
        from unittest import mock
        from lkmm_mark.contexts import Contexts
        orig = Contexts._site_locksets

        def entry_only(self, fn, sites, need, own, visiting, drop=(), by_site=False):
            return orig(self, fn, sites, need, own, None if by_site else visiting, drop)
        with mock.patch.object(Contexts, "_site_locksets", entry_only):
            A = analyse_fixture(FIXTURES / "caller_contexts_hop")
        self.assertEqual(self._verdicts(A)["read_ctl"], ("READ_ONCE", "unlocked-read"))


class MadeNewInode(unittest.TestCase):
    def _flagged(self, A):
        return sorted((a.line, a.fn) for a in A.accesses
                      if a.action != "none" and a.field == "z_size" and a.fn in
                      ("zinit_dir", "zmkdir", "zmknod"))

    def test_a_maker_that_publishes_first_opens_no_window(self):
        """Fixture made_new_inode with zmake() unlocking the inode before
        it returns it: no longer a maker, so zmkdir()'s store in what was
        the window, and zinit_dir()'s, are shared again."""
        A, _ = analyse_edited(self, "made_new_inode", "zinode.c", "\tret = inode;\n",
                              "\tunlock_new_inode(inode);\n\tret = inode;\n")
        self.assertEqual(self._flagged(A), [(61, "zinit_dir"), (74, "zmkdir"),
                                            (77, "zmkdir"), (89, "zmknod")])

    def test_a_call_handed_the_address_ends_the_window(self):
        """The store moved after zadd(dir, &inode), which may publish the
        inode, is shared."""
        A, _ = analyse_edited(self, "made_new_inode", "zinode.c", "\tzinit_dir(inode);\n",
                              "\terr = zadd(dir, &inode);\n\tzinit_dir(inode);\n")
        self.assertIn((60, "zinit_dir"), self._flagged(A))


class OwnerMacro(unittest.TestCase):
    def test_a_macro_not_one_call_hides_the_callers(self):
        """Fixture owner_macro with bdump() not one call of __bdump() in
        one configuration: __bdump()'s callers are unknown, so its load of
        stamp is no owner's and pairs with bthread()'s store."""
        A, _ = analyse_edited(self, "owner_macro", "bowner.c",
                              '#define bdump(b, msg)\t__bdump((b), "", "")\n',
                              '#define bdump(b, msg)\tdo { __bdump((b), "", ""); } while (0)\n')
        got = sorted((a.line, a.fn, a.rule) for a in A.accesses
                     if a.field == "stamp" and a.action != "none")
        self.assertEqual(got, [(30, "__bdump", "diagnostic-read"),
                               (43, "bthread", "unlocked-write")])


class MacroCallers(unittest.TestCase):
    def _err(self, A):
        return sorted((a.line, a.fn, a.rule) for a in A.accesses
                      if a.field == "err" and a.action != "none")

    def test_a_macro_not_one_call_hides_the_callers_locks(self):
        """Fixture macro_callers with mdev_set_err() not one call of
        __mdev_set_err(): its callers' lock is not seen, so the store of
        err is unlocked and pairs with mdev_stat()'s locked load."""
        A, _ = analyse_edited(self, "macro_callers", "mdev.c",
                              "#define mdev_set_err(d, e)\t__mdev_set_err((d), (e), __func__)\n",
                              "#define mdev_set_err(d, e)\tdo { __mdev_set_err((d), (e), "
                              "__func__); } while (0)\n")
        got = self._err(A)
        self.assertIn((25, "__mdev_set_err", "unlocked-write"), got)
        self.assertIn((66, "mdev_stat", "racing-locked-read"), got)

    def test_a_macro_call_without_the_lock(self):
        """Fixture macro_callers with mdev_fail() calling mdev_set_err()
        after it drops the lock: __mdev_set_err() is entered with nothing
        in that context, and its store of err races with the load."""
        A, _ = analyse_edited(self, "macro_callers", "mdev.c",
                              "\tmdev_set_err(d, e);\n\tmdev_set_state(d, 2);\n"
                              "\tspin_unlock(&d->lock);\n",
                              "\tmdev_set_state(d, 2);\n\tspin_unlock(&d->lock);\n"
                              "\tmdev_set_err(d, e);\n")
        got = self._err(A)
        self.assertIn((25, "__mdev_set_err", "unlocked-write"), got)
        self.assertIn((66, "mdev_stat", "racing-locked-read"), got)


class InitFlags(unittest.TestCase):
    def _flagged(self, A):
        return sorted((a.line, a.fn, a.field) for a in A.accesses
                      if a.action != "none" and a.field in ("flags", "free", "used"))

    def test_without_the_fact_the_init_branches_race(self):
        """Fixture init_flag without its 'init_time_flags' entry: isb_mark()'s
        locked store of flags, reached only from the branch that found
        ISB_REPLAY set, and the stores of free made where it is set, pair
        with isb_stat()'s loads again."""
        def untold(P):
            P.init_time_flags = []
        got = {}
        for tweak in (None, untold):
            got[tweak is None] = self._flagged(
                analyse_fixture(FIXTURES / "init_flag", tweak=tweak))
        self.assertEqual(got[True], [(43, "isb_use", "used"), (78, "isb_stat", "used")])
        self.assertEqual(got[False], [(36, "isb_mark", "flags"), (43, "isb_use", "used"),
                                      (58, "isb_alloc", "free"), (71, "isb_free", "free"),
                                      (78, "isb_stat", "flags"), (78, "isb_stat", "free"),
                                      (78, "isb_stat", "used")])

    def test_a_live_store_of_the_bit_voids_the_fact(self):
        """A store outside init that may set the bit (isb_error() setting
        it with its own) leaves the code not bearing the entry out: the
        branches race again."""
        A, _ = analyse_edited(self, "init_flag", "replay.c", "\ts->state |= ISB_ERROR;\n",
                              "\ts->state |= ISB_ERROR | ISB_REPLAY;\n")
        self.assertIn((36, "isb_mark", "flags"), self._flagged(A))
        self.assertIn((58, "isb_alloc", "free"), self._flagged(A))
        A, _ = analyse_edited(self, "init_flag", "replay.c", "\ts->state = disk & ~ISB_REPLAY;\n",
                              "\ts->state = disk;\n")
        self.assertIn((71, "isb_free", "free"), self._flagged(A))

    def test_a_malformed_entry_is_one_line(self):
        from lkmm_mark.tree import UserError
        with self.assertRaises(UserError) as cm:
            analyse_fixture(FIXTURES / "init_flag", policies=json.dumps(
                {"init_time_flags": [{"field": "isb.state", "bit": ["ISB_REPLAY"], "reason": "r"}]}))
        self.assertNotIn("\n", str(cm.exception))
        self.assertIn("init_time_flags isb.state", str(cm.exception))


def _with_and_without_lifetimes(fixture, flagged):
    """{True: flagged(analysis of fixture), False: the same without its
    'thread_lifetimes' entries}."""
    def untold(P):
        P.thread_lifetimes = []
    return {tweak is None: flagged(analyse_fixture(FIXTURES / fixture, tweak=tweak))
            for tweak in (None, untold)}


class ThreadLifetimes(unittest.TestCase):
    def _flagged(self, A):
        return sorted((a.line, a.fn, a.field) for a in A.accesses
                      if a.action != "none" and a.field in ("seq", "blk"))

    def test_without_the_fact_the_early_accesses_race(self):
        """Fixture thread_lifetime without its 'thread_lifetimes' entries:
        guard_start()'s store of seq before the kthread_run() pairs with
        the thread's accesses again (and its load of seq, under its lock,
        races with the thread's store), and so do the thread's store of
        seq and its load of blk."""
        got = _with_and_without_lifetimes("thread_lifetime", self._flagged)
        self.assertEqual(got[True], [])
        self.assertEqual(got[False], [(32, "guard_thread", "blk"), (35, "guard_thread", "seq"),
                                      (35, "guard_thread", "seq"), (55, "guard_start", "seq"),
                                      (57, "guard_start", "seq"),
                                      (58, "guard_start", "blk")])

    def test_a_store_after_the_start_races(self):
        """The same store made after the kthread_run() races with the
        thread's accesses: the thread may run by then."""
        A, _ = analyse_edited(self, "thread_lifetime", "guard.c", "\tb->stamp = 5;\n",
                              "\tb->stamp = 5;\n\tb->seq = 4;\n")
        self.assertIn((65, "guard_start", "seq"), self._flagged(A))
        self.assertIn((35, "guard_thread", "seq"), self._flagged(A))

    def test_a_malformed_entry_is_one_line(self):
        from lkmm_mark.tree import UserError
        with self.assertRaises(UserError) as cm:
            analyse_fixture(FIXTURES / "thread_lifetime", policies=json.dumps(
                {"thread_lifetimes": [{"thread": "guard_thread", "stop": ["guard_stop"],
                                       "reason": "r"}]}))
        self.assertNotIn("\n", str(cm.exception))
        self.assertIn("thread_lifetimes guard_thread", str(cm.exception))


class ThreadHeld(unittest.TestCase):
    """Fixture thread_held: a 'thread_lifetimes' entry whose evidence is
    a lock the thread holds until it ends ('held'), for a group of two
    threads ('also')."""
    def _flagged(self, A):
        return sorted((a.line, a.fn, a.field) for a in A.accesses
                      if a.action != "none" and a.field == "root")

    def test_without_the_fact_the_store_before_the_start_races(self):
        """Without the entry, scan_create()'s store of root before the
        kthread_run() pairs with the thread's load."""
        got = _with_and_without_lifetimes("thread_held", self._flagged)
        self.assertEqual(got[True], [])
        self.assertEqual(got[False], [(37, "scan_thread", "root"), (55, "scan_create", "root")])

    def test_a_stop_that_does_not_wait_proves_nothing(self):
        """A stop function that does not take the lock (the rw->ro
        remount no longer waits for the thread): the entry applies to
        nothing, and root races."""
        A, _ = analyse_edited(self, "thread_held", "scan.c", "\t\tdown(&fs->scan_sem);\n"
                              "\t\tup(&fs->scan_sem);\n", "")
        self.assertEqual(self._flagged(A), [(37, "scan_thread", "root"),
                                            (55, "scan_create", "root")])

    def test_a_store_after_the_start_races(self):
        """The same store made after the kthread_run() races with the
        thread's load: the thread may run by then."""
        A, _ = analyse_edited(self, "thread_held", "scan.c", "\tfs->gen = 1;\n",
                              "\tfs->gen = 1;\n\tfs->root = r;\n")
        self.assertIn((64, "scan_create", "root"), self._flagged(A))
        self.assertIn((37, "scan_thread", "root"), self._flagged(A))

    def test_a_malformed_entry_is_one_line(self):
        from lkmm_mark.tree import UserError
        for bad, msg in (({"also": "rescan_thread"}, "also must be a list"),
                         ({"held": "scan_sem"}, "held must be a lock")):
            entry = {"thread": "scan_thread", "stop": "foo_remount", "reason": "r"}
            entry.update(bad)
            with self.assertRaises(UserError) as cm:
                analyse_fixture(FIXTURES / "thread_held", policies=json.dumps(
                    {"thread_lifetimes": [entry]}))
            self.assertNotIn("\n", str(cm.exception))
            self.assertIn("thread_lifetimes scan_thread: " + msg, str(cm.exception))


class TeardownContexts(unittest.TestCase):
    def _flagged(self, A):
        return sorted((a.line, a.fn, a.field) for a in A.accesses
                      if a.action != "none" and a.field in ("format", "nextents"))

    def test_without_the_fact_the_live_accesses_race(self):
        """Fixture teardown_context without its 'teardown_contexts' entry:
        obj_getattr()'s locked load of format pairs with the worker's
        unlocked zap_fork() again (and so the locked stores of format
        want WRITE_ONCE()), and obj_inactivate()'s unlocked load of
        nextents with obj_add_extent()'s locked update."""
        def untold(P):
            P.teardown_contexts = []
        got = {}
        for tweak in (None, untold):
            got[tweak is None] = self._flagged(
                analyse_fixture(FIXTURES / "teardown_context", tweak=tweak))
        self.assertEqual(got[True], [(43, "zap_fork", "format"), (90, "flush_one", "format")])
        self.assertEqual(got[False], [(43, "zap_fork", "format"), (63, "obj_inactivate", "nextents"),
                                      (90, "flush_one", "format"), (124, "obj_getattr", "format"),
                                      (132, "obj_add_extent", "nextents"),
                                      (140, "obj_set_format", "format"),
                                      (148, "obj_convert", "format")])

    def test_a_path_left_out_of_reached_by_is_hidden(self):
        """The flusher, which still reaches a torn-down object, is what
        keeps the worker's zap_fork() paired: left out of 'reached_by',
        its load is taken for a live object's (why every such path must
        be declared)."""
        def unreached(P):
            P.teardown_contexts = [dict(P.teardown_contexts[0], reached_by=[])]
        A = analyse_fixture(FIXTURES / "teardown_context", tweak=unreached)
        self.assertEqual(self._flagged(A), [])

    def test_another_caller_of_the_object_function(self):
        """A call of obj_inactivate() from another function than the
        declared entry: the object it is handed may be live, so the fact
        gives nothing."""
        A, _ = analyse_edited(self, "teardown_context", "torn.c",
                              "\tINIT_WORK(&gc->work, gc_worker);\n",
                              "\tINIT_WORK(&gc->work, gc_worker);\n\tobj_inactivate(gc, gc->objs);\n")
        self.assertIn((125, "obj_getattr", "format"), self._flagged(A))

    def test_a_malformed_entry_is_one_line(self):
        from lkmm_mark.tree import UserError
        with self.assertRaises(UserError) as cm:
            analyse_fixture(FIXTURES / "teardown_context", policies=json.dumps(
                {"teardown_contexts": [{"entry": "gc_worker", "object": {"function": "f"},
                                        "reached_by": [], "reason": "r"}]}))
        self.assertNotIn("\n", str(cm.exception))
        self.assertIn("teardown_contexts gc_worker", str(cm.exception))


class WorkSelf(unittest.TestCase):
    """Fixture work_self edited so that the load of 'start' in
    job_record() is also made on a job the work item does not own: it
    pairs with the store again (workself.py is what kept it out)."""

    def start_load(self, A):
        return next((a.action, a.rule) for a in A.accesses
                    if a.fn == "job_record" and a.field == "start" and a.kind == "read")

    def test_unchanged(self):
        A, _ = analyse_edited(self, "work_self", "work.c", "job_write(NULL, 0);",
                              "job_write(NULL, 0);")
        self.assertEqual(self.start_load(A), ("none", "lockset-only"))

    def test_another_job(self):
        A, _ = analyse_edited(self, "work_self", "work.c", "job_write(NULL, 0);",
                              "job_write(job_lookup(), 0);")
        self.assertEqual(self.start_load(A), ("READ_ONCE", "unlocked-read"))

    def test_not_its_container(self):
        A, _ = analyse_edited(self, "work_self", "work.c",
                              "container_of(work, struct job, work);", "job_lookup();")
        self.assertEqual(self.start_load(A), ("READ_ONCE", "unlocked-read"))


class TwoObjectLocks(unittest.TestCase):
    def test_without_the_objects_the_unlock_drops_both(self):
        """Fixture two_object_locks without 'objects' and 'object': the
        unlock of src drops the lock held on dest too, so node_share()'s
        store to dest and node_init_cow()'s store, made for dest, look
        unlocked beside the locked loads (lockobjects.py is what kept
        them locked, not another rule)."""
        d = FIXTURES / "two_object_locks"
        p = json.loads((d / "policies.json").read_text())
        for e in p["lock_functions"]:
            e.pop("objects", None)
            e.pop("object", None)
        A = analyse_fixture(d, policies=json.dumps(p))
        got = {(a.fn, a.field, a.line): (a.action, a.rule) for a in A.accesses
               if a.struct == "node" and a.field in ("cow", "flags")}
        self.assertEqual(got[("node_init_cow", "cow", 53)], ("WRITE_ONCE", "unlocked-write"))
        self.assertEqual(got[("node_share", "flags", 68)], ("WRITE_ONCE", "unlocked-write"))
        self.assertEqual(got[("node_share_bad", "flags", 77)],
                         ("WRITE_ONCE", "unlocked-write"))


class RaisedWhere(unittest.TestCase):
    def test_without_the_fact_the_branch_holds_shared(self):
        """Fixture raised_where without 'raised_where': map_write()'s
        branch of node_is_cow(n) holds the lock shared only, so
        node_init_cow()'s store there races with node_map()'s shared load
        and map_write()'s own loads (lockraise.py is what kept them
        apart)."""
        d = FIXTURES / "raised_where"
        p = json.loads((d / "policies.json").read_text())
        for e in p["lock_functions"]:
            e.pop("raised_where", None)
        A = analyse_fixture(d, policies=json.dumps(p))
        got = {(a.fn, a.line): (a.action, a.rule) for a in A.accesses if a.field == "cowp"}
        self.assertEqual(got[("node_init_cow", 43)], ("WRITE_ONCE", "unlocked-write"))
        self.assertEqual(got[("node_map", 82)], ("READ_ONCE", "racing-locked-read"))
        self.assertEqual(got[("map_write", 97)], ("READ_ONCE", "racing-locked-read"))

    def test_another_object_raises_nothing(self):
        """The test of the predicate on another node than the one locked
        raises nothing: the store races again."""
        A, _ = analyse_edited(self, "raised_where", "map.c",
                              "\tif (node_is_cow(n)) {", "\tif (node_is_cow(n->peer)) {")
        got = {(a.fn, a.line): (a.action, a.rule) for a in A.accesses if a.field == "cowp"}
        self.assertEqual(got[("node_map", 82)], ("READ_ONCE", "racing-locked-read"))

    def test_a_shared_value_raises_nothing(self):
        """A mode local also given the shared token: the caller may have
        asked for the shared mode, and the predicate (which raises only a
        write) raises nothing."""
        A, _ = analyse_edited(self, "raised_where", "map.c",
                              "\tn->len = v;", "\tn->len = v;\n\tmode = NODE_SHARED;")
        got = {(a.fn, a.line): (a.action, a.rule) for a in A.accesses if a.field == "cowp"}
        self.assertEqual(got[("node_map", 82)], ("READ_ONCE", "racing-locked-read"))


class LastRefLock(unittest.TestCase):
    def test_without_the_dec_and_lock_the_load_races(self):
        """last_ref_lock with the release's atomic_dec_and_lock() replaced by
        a call the analysis does not know: the flags load in rele() is no
        longer in a window with no reference held, and races with done()."""
        A, _ = analyse_edited(self, "last_ref_lock", "buf.c",
                              "release = atomic_dec_and_lock(&bp->hold, &h->lock);",
                              "release = buf_put_locked(&bp->hold, &h->lock);")
        got = {(a.fn, a.field): (a.action, a.pair.fn if a.pair else None)
               for a in A.accesses if a.kind == "read" and a.field == "flags"}
        self.assertEqual(got[("rele", "flags")], ("READ_ONCE", "done"))

    def test_without_the_lifetime_count_the_load_races(self):
        """last_ref_lock without its lifetime_counts fact: the count may be
        a resource's, not the buffer's own, so the loads of rele() and
        rele_block() race with done(), and done()'s stores with them."""
        A = analyse_fixture(FIXTURES / "last_ref_lock", policies="{}")
        got = {(a.fn, a.field): (a.action, a.pair.fn if a.pair else None)
               for a in A.accesses if a.field in ("flags", "state") and a.kind != "address"}
        self.assertEqual(got[("rele", "flags")], ("READ_ONCE", "done"))
        self.assertEqual(got[("rele_block", "state")], ("READ_ONCE", "done"))
        self.assertEqual(got[("done", "flags")][0], "WRITE_ONCE")


class PrivateParamMember(unittest.TestCase):
    def test_a_shared_object_makes_the_member_pointer_shared(self):
        """private_param_member with obj_alloc() handing item_init() an
        object it looked up: the pointer to its embedded item is no longer
        private, and the store races with item_owner()."""
        A, _ = analyse_edited(self, "private_param_member", "item.c",
                              "o = kzalloc(sizeof(*o), GFP_KERNEL);", "o = lookup(t, id);")
        got = {(a.fn, a.field): (a.action, a.pair.fn if a.pair else None)
               for a in A.accesses if a.field == "owner"}
        self.assertEqual(got[("item_init", "owner")], ("WRITE_ONCE", "item_owner"))


class AssertInCallee(unittest.TestCase):
    """Fixture assert_in_callee edited so that the assertion no longer
    says what obj_mark_bad() is entered with: the report's read races
    with the locked rename again (assertentry.py is what kept them
    apart, not another rule)."""

    def name_read(self, old, new):
        A, _ = analyse_edited(self, "assert_in_callee", "mark.c", old, new)
        return next((a.action, a.rule) for a in A.accesses
                    if a.fn == "obj_report" and a.field == "name")

    def test_called_in_a_branch(self):
        self.assertEqual(self.name_read("\tobj_stale(o);\n}", "\tif (why)\n\t\tobj_stale(o);\n}"),
                         ("data_race", "diagnostic-read"))

    def test_lock_taken_before_the_call(self):
        self.assertEqual(self.name_read("\tobj_stale(o);\n}",
                                        "\tspin_lock(&o->lock);\n\tobj_stale(o);\n"
                                        "\tspin_unlock(&o->lock);\n}"),
                         ("data_race", "diagnostic-read"))

    def test_after_a_return(self):
        self.assertEqual(self.name_read("\tobj_stale(o);\n}", "\treturn;\n\tobj_stale(o);\n}"),
                         ("data_race", "diagnostic-read"))

    def test_another_object(self):
        self.assertEqual(self.name_read("\tobj_stale(o);\n}", "\tobj_stale(obj_peer(o));\n}"),
                         ("data_race", "diagnostic-read"))


class NewInRequest(unittest.TestCase):
    """Fixture new_in_request edited so that the request may no longer
    hold the new node when zreq_init_dir() reads req->dn: its locked store
    races with zsize_read() again (newmembers.py _member_locals() is what
    kept it out, not another rule)."""

    def size_store(self, old, new):
        A, _ = analyse_edited(self, "new_in_request", "req.c", old, new)
        return next((a.action, a.rule) for a in A.accesses
                    if a.fn == "zreq_init_dir" and a.field == "z_size")

    def test_unchanged(self):
        self.assertEqual(self.size_store("\tkfree(req);\n\treturn 0;\n}\n\nint zmkdir",
                                         "\tkfree(req);\n\treturn 0;\n}\n\nint zmkdir"),
                         ("none", "private"))

    def test_request_handed_on_before_the_call(self):
        self.assertEqual(self.size_store("\treq->tp = tp;\n", "\treq->tp = tp;\n\tzreq_check(req);\n"),
                         ("WRITE_ONCE", "locked-write"))

    def test_request_handed_on_before_the_read(self):
        self.assertEqual(self.size_store("\ttrace_zreq(req);\n", "\tzreq_check(req);\n"),
                         ("WRITE_ONCE", "locked-write"))

    def test_member_stored_again(self):
        self.assertEqual(self.size_store("\treq->tp = tp;\n",
                                         "\treq->tp = tp;\n\tif (!tp)\n\t\treq->dn = NULL;\n"),
                         ("WRITE_ONCE", "locked-write"))

    def test_helper_stores_the_member(self):
        self.assertEqual(self.size_store("\tdn = req->dn;\n", "\tdn = req->dn;\n\treq->dn = NULL;\n"),
                         ("WRITE_ONCE", "locked-write"))

    def test_a_shared_node(self):
        self.assertEqual(self.size_store("\terror = zdir_init(tp, zn);\n",
                                         "\terror = zdir_init(tp, *ipp);\n"),
                         ("WRITE_ONCE", "locked-write"))

    def test_node_shared_before_the_store(self):
        self.assertEqual(self.size_store("\treq->dn = dn;\n", "\tz_commit(tp);\n\treq->dn = dn;\n"),
                         ("WRITE_ONCE", "locked-write"))
class MadeOutParam(unittest.TestCase):
    """Fixture made_out_param edited so that buf_get_uncached() gets its
    buffer from a function that is no maker, or so that maps may point
    to a map shared with others: buf_read_uncached()'s stores before the
    submission race again (outmade.py is what kept them private, not
    another rule)."""

    def uncached(self, old, new):
        A, _ = analyse_edited(self, "made_out_param", "buf.c", old, new)
        return {a.field: (a.action, a.rule) for a in A.accesses
                if a.fn == "buf_read_uncached" and a.line < 110 and a.field != "maps"}

    def test_no_maker(self):
        self.assertEqual(self.uncached("buf_alloc(-1, count, &bp)", "buf_alloc_shared(-1, &bp)"),
                         {"key": ("WRITE_ONCE", "unlocked-write"),
                          "bn": ("WRITE_ONCE", "unlocked-write"),
                          "flags": ("WRITE_ONCE", "unlocked-write")})

    def test_handed_on_before_the_hand_back(self):
        self.assertEqual(self.uncached("\t*bpp = bp;\n\treturn 0;\n}\n\nint buf_read_uncached",
                                       "\tbuf_submit(bp);\n\t*bpp = bp;\n\treturn 0;\n}\n\n"
                                       "int buf_read_uncached"),
                         {"key": ("WRITE_ONCE", "unlocked-write"),
                          "bn": ("WRITE_ONCE", "unlocked-write"),
                          "flags": ("WRITE_ONCE", "unlocked-write")})

    def test_maps_not_owned(self):
        self.assertEqual(self.uncached("bp->maps = &bp->one;", "bp->maps = shared_maps;"),
                         {"key": ("none", "private"),
                          "bn": ("WRITE_ONCE", "unlocked-write"),
                          "flags": ("none", "private")})


class KindContexts(unittest.TestCase):
    """Fixture kind_contexts edited so that a context in which
    item_delete() may clear a buffer's item holds no buffer lock: a call
    whose argument does not tell its container (a pointer member), or
    buf_done() calling it after the unlock.  buf_verify()'s read races
    with item_delete()'s store again (kindctx.py is what kept the intents'
    contexts out, not another rule)."""

    def verify_read(self, old, new):
        A, _ = analyse_edited(self, "kind_contexts", "item.c", old, new)
        a = next(a for a in A.accesses if a.fn == "buf_verify" and a.field == "lsn")
        return a.action, a.rule, a.tier, a.pair.fn if a.pair is not None else None

    def test_unchanged(self):
        self.assertEqual(self.verify_read("item_remove(&ip->ii);", "item_remove(&ip->ii);"),
                         ("none", "lockset-only", "lockset-only", None))

    def test_container_not_told(self):
        self.assertEqual(self.verify_read("item_remove(&ip->ii);", "item_remove(ip->other);"),
                         ("READ_ONCE", "unlocked-read", "paired", "item_delete"))

    def test_buffer_item_unlocked(self):
        self.assertEqual(self.verify_read("\titem_delete(&bp->bip->bi);\n\tmutex_unlock(&bp->lock);",
                                          "\tmutex_unlock(&bp->lock);\n\titem_delete(&bp->bip->bi);"),
                         ("READ_ONCE", "unlocked-read", "paired", "item_delete"))


class RangeWrapper(unittest.TestCase):
    """Fixture range_flushed with dio_begin() reading the block through
    map_blocks(), a wrapper handed the extent map whose body names no
    member: its callee get_blocks() keeps the locked range of every
    caller (callers.py _covering()); a wrapper not handed an extent map
    (a 'void *' parameter) passes no hold on, and the read is unlocked."""

    def blocks_read(self, *edits):
        import shutil
        import tempfile
        with tempfile.TemporaryDirectory(prefix="lkmm-fx-") as tmp:
            d = Path(tmp) / "range_flushed"
            shutil.copytree(FIXTURES / "range_flushed", d)
            c = d / "range.c"
            text = c.read_text()
            for old, new in edits:
                self.assertIn(old, text)
                text = text.replace(old, new)
            c.write_text(text)
            A = analyse_fixture(d)
        return next((a.action, a.rule) for a in A.accesses if a.fn == "get_blocks")

    def test_through_the_wrapper(self):
        self.assertEqual(self.blocks_read(("v += get_blocks(em);", "v += map_blocks(em);")),
                         ("none", "locked-in-every-caller"))

    def test_wrapper_not_handed_a_map(self):
        self.assertEqual(self.blocks_read(("v += get_blocks(em);", "v += map_blocks(em);"),
                                          ("map_blocks(struct extmap *em)\n{\n\treturn get_blocks(em);",
                                           "map_blocks(void *p)\n{\n\treturn get_blocks(p);")),
                         ("READ_ONCE", "unlocked-read"))
