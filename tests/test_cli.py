# SPDX-License-Identifier: GPL-2.0-only
"""Bad input: a one-line error and a non-zero exit."""
import json
import os
import subprocess
import sys
import tempfile
import unittest
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
CLI = [sys.executable, str(REPO / "scripts" / "lkmm-mark")]


def run(*args, env=None):
    e = dict(os.environ)
    e.update(env or {})
    return subprocess.run(CLI + list(args), capture_output=True, text=True, env=e)


class CliErrors(unittest.TestCase):
    def check_error(self, r, text):
        """One error line, the last (progress lines may come before it)."""
        self.assertNotEqual(r.returncode, 0)
        err = r.stderr.strip().splitlines()
        self.assertEqual(len([x for x in err if "error" in x]), 1, r.stderr)
        self.assertIn("error:", err[-1])
        self.assertIn(text, err[-1])

    def test_no_such_directory(self):
        self.check_error(run("report", "--tree", "/nonexistent/tree"), "no such directory")

    def test_bench_runs(self):
        self.check_error(run("bench", "--runs", "0", "--tree", "/nonexistent/tree"),
                         "--runs must be at least 1")

    def test_unknown_kernel(self):
        """--kernel knows 6.1 and 6.12; anything else is one line, before
        any tree is looked at."""
        for cmd in (["report"], ["series", "--check"], ["am"], ["bisect"], ["verify"],
                    ["provision"]):
            r = run(*cmd, "--kernel", "5.10")
            self.check_error(r, "unknown kernel version '5.10' for --kernel (known: 6.1, 6.12)")
            self.assertEqual(r.returncode, 2)
            self.assertEqual(len(r.stderr.strip().splitlines()), 1, r.stderr)

    def test_not_a_kernel_tree(self):
        with tempfile.TemporaryDirectory() as d:
            self.check_error(run("report", "--tree", d), "not a kernel tree")

    def test_missing_target(self):
        with tempfile.TemporaryDirectory() as d:
            for m in ("Makefile", "Kconfig"):
                Path(d, m).write_text("")
            Path(d, "include/linux").mkdir(parents=True)
            Path(d, "scripts").mkdir()
            self.check_error(run("report", "--tree", d), "has no fs/btrfs")

    def test_target_without_functions(self):
        """A directory whose files define no function (a header of structs
        and macros) is analysed, not a traceback: the source-only caches
        computed while spatch runs exist with nothing in them."""
        with tempfile.TemporaryDirectory() as d:
            tree = Path(d, "tree")
            for m in ("Makefile", "Kconfig"):
                Path(tree, m).parent.mkdir(parents=True, exist_ok=True)
                Path(tree, m).write_text("")
            for sub in ("include/linux", "scripts", "fs/hdr"):
                Path(tree, sub).mkdir(parents=True)
            Path(tree, "fs/hdr/x.h").write_text("struct foo { int a; };\n#define X 1\n")
            env = {"LKMM_MARK_CACHE": str(Path(d, "cache"))}
            r = run("report", "--tree", str(tree), "--target", "fs/hdr",
                    "--allow-stale-facts", env=env)
            self.assertEqual(r.returncode, 0, r.stderr)
            self.assertNotIn("Traceback", r.stderr)

    def test_spatch_missing(self):
        """Not found and not installable here (no apt-get in PATH): one line."""
        with tempfile.TemporaryDirectory() as d:
            self.check_error(run("report", env={"PATH": d}), "spatch not found")

    def test_stale_fact(self):
        """A policies/ name the tree lacks is an error naming the file, the
        entry and the name; --allow-stale-facts makes it a warning, and a
        plan cached with the flag still fails without it."""
        with tempfile.TemporaryDirectory() as d:
            tree = Path(d, "tree")
            for m in ("Makefile", "Kconfig"):
                Path(tree, m).parent.mkdir(parents=True, exist_ok=True)
                Path(tree, m).write_text("")
            Path(tree, "include/linux").mkdir(parents=True)
            Path(tree, "scripts").mkdir()
            Path(tree, "fs/btrfs").mkdir(parents=True)
            Path(tree, "fs/btrfs/a.c").write_text(
                "struct s { int n; };\nvoid s_init(struct s *p) { p->n = 0; }\n")
            pol = Path(d, "policies")
            (pol / "btrfs").mkdir(parents=True)
            (pol / "policies.json").write_text((REPO / "policies/policies.json").read_text())
            (pol / "kernel.json").write_text("{}")
            (pol / "btrfs" / "facts.json").write_text(
                '{"lifecycle_functions": ["s_init", "s_iinit"], '
                '"phases": [{"struct": "s", "before": ["s_init"], "after": ["s_init2"], '
                '"reason": "r"}]}')
            env = {"LKMM_MARK_CACHE": str(Path(d, "cache"))}
            args = ("report", "--tree", str(tree), "--policies", str(pol))
            r = run(*args, env=env)
            self.check_error(r, "stale fact: btrfs/facts.json: lifecycle_functions: "
                             "'s_iinit' is not in")
            self.assertIn("(2 in all;", r.stderr)
            r = run(*args, "--allow-stale-facts", env=env)
            self.assertEqual(r.returncode, 0, r.stderr)
            warn = [x for x in r.stderr.splitlines() if "stale fact" in x]
            self.assertEqual(len(warn), 2, r.stderr)
            self.assertIn("phases s: 's_init2'", warn[1])
            self.check_error(run(*args, env=env), "stale fact")
            # the same names, all present: no error
            (pol / "btrfs" / "facts.json").write_text('{"lifecycle_functions": ["s_init"]}')
            r = run(*args, env=env)
            self.assertEqual(r.returncode, 0, r.stderr)

    def test_malformed_policy(self):
        with tempfile.TemporaryDirectory() as d:
            for f in ("policies.json", "kernel.json"):
                Path(d, f).write_text((REPO / "policies" / f).read_text())
            Path(d, "btrfs").mkdir()
            for text, msg in [
                ('{"owners": [ {"field": 1 ]}', "malformed policy file"),
                ('{"owners": [{"field": "a.b"}]}', "without 'functions'"),
                ('{"owners": [{"field": ["a.b", 2], "functions": ["f"], "reason": "r"}]}',
                 "'field' must be struct.field"),
                ('{"owners": [{"field": "a.b", "functions": "f", "reason": "r"}]}',
                 "'functions' a list"),
                ('{"lock_wrappers": []}', "unknown key"),
                ('{"lock_functions": [{"name": "f", "op": "acquire", "when_arg": [1]}]}',
                 "when_arg must be"),
                ('{"param_locks": [{"struct": "h", "lock": "h.l", "mode": "shared", '
                 '"reason": "r"}]}', "mode must be read or exclusive"),
                ('{"contexts": [{"call": "f", "args": [1], "context": "c", '
                 '"hands_over": "s"}]}', "hands_over must be"),
                ('{"ops_entry_locks": [{"member": "unlink", "lock": "inode.i_rwsem"}]}',
                 "without 'mode'"),
                ('{"ops_entry_locks": [{"member": "freeze_fs", "lock": "s.w", "mode": "read", '
                 '"reason": "r", "also": [{"lock": "s.u"}]}]}', "each lock needs a name and a mode"),
                ('{"param_locks": [{"struct": "h", "lock": "h.l", "mode": "read", '
                 '"reason": "r", "weak_sources": "f"}]}', "weak_sources must be"),
                ('{"lock_functions": [{"name": "spin_lock", "op": "release"}]}',
                 "listed twice"),
                ('{"lock_functions": [{"name": "f", "op": "acquire", "mode": "group"}]}',
                 "a group mode needs a group name"),
                ('{"lock_functions": [{"name": "f", "op": "acquire", "mode": "shared"}]}',
                 "mode must be exclusive, read or group"),
                ('{"lock_functions": [{"name": "f", "op": "acquire", '
                 '"when_field": [0, 1]}]}', "when_field must be"),
                ('{"phases": [{"struct": "s", "before": ["f"], "after": "g", "reason": "r"}]}',
                 "'after' must be a non-empty list"),
                ('{"phases": [{"struct": "s", "before": ["f"], "after": ["f"], "reason": "r"}]}',
                 "f is both before and after"),
                ('{"phases": [{"struct": "s", "before": ["f"], "after": ["g"]}]}',
                 "phases entry without 'reason'"),
                ('{"phases": [1]}', "phases entry 1 is not an object"),
                ('{"phases": [{"struct": "s", "before": ["f"], "reason": "r"}]}',
                 "phases s: needs 'after' or 'after_wait'"),
                ('{"phases": [{"struct": "s", "before": ["f"], "reason": "r", '
                 '"after_wait": [{"call": "w"}]}]}', "'after_wait' must be a non-empty list"),
                ('{"drains": [{"struct": "s", "lock": "s.n", "counter": "n", '
                 '"through": ["h"], "reason": "r"}]}', "drains s: 'through' must be"),
                ('{"drains": [{"struct": "s", "lock": "s.n", "counter": "n", '
                 '"through": ["h->s"], "reason": "r", "drained_params": [{"function": "f"}]}]}',
                 "drains s: 'through' must be"),
                ('{"drains": [{"struct": "s", "lock": "s.n", "through": ["h->s"], '
                 '"reason": "r"}]}', "drains entry without 'counter'"),
                ('{"teardown_ops": "evict_inode"}', "teardown_ops"),
                ('{"owned_structs": [{"struct": "s", "reason": "r"}]}',
                 "owned_structs entry without 'owner'"),
                ('{"owned_structs": [{"struct": "s", "owner": ["o"], "reason": "r"}]}',
                 "'struct' and 'owner' must be struct names"),
                ('{"task_private": [{"struct": "s", "reason": "r", "handed_to": "f"}]}',
                 "'handed_to' is not a list of function names"),
                ('{"task_private": [{"struct": "s", "reason": "r", "lends_locks": 1, '
                 '"handed_to": ["f"]}]}', "'lends_locks' must be true, beside 'handed_to'"),
                ('{"task_private": [{"struct": "s", "reason": "r", "lends_locks": true}]}',
                 "'lends_locks' must be true, beside 'handed_to'"),
                ('{"owners": ["a.b"]}', "owners entry \"a.b\" is not an object"),
                ('{"guards": [{"reason": "r"}]}', "it needs either \"field\""),
                ('{"guards": [{"field": "f", "reason": "r"}]}', "it needs either \"field\""),
                ('{"guards": [{"call": "f"}]}', "guards entry without 'reason'"),
                ('{"state_assertions": [{"call": "A", "holds": 1, "reason": "r"}]}',
                 "holds must be true or false"),
                ('{"state_assertions": [{"call": "A", "holds": true}]}',
                 "state_assertions entry without 'reason'"),
                ('{"variants": [{"field": "s", "reason": "r"}]}',
                 "'field' must be struct.field"),
                ('{"work_items": [{"call": "f", "work": "0", "fn": 1, "reason": "r"}]}',
                 "work and fn must be argument numbers"),
                ('{"waited_work": [{"call": "f", "work": 0, "fn": 1, "queue": "q", '
                 '"wait": ["w"], "signal": ["s"], "reason": "r"}]}',
                 "waited_work f: work and fn must be argument numbers, queue, wait"),
                ('{"waited_work": [{"call": "f", "work": 0, "fn": 1, "reason": "r"}]}',
                 "waited_work entry without 'queue'"),
                ('{"unlink_waits": [{"call": "f", "arg": "0", "reason": "r"}]}',
                 "unlink_waits f: arg must be an argument number"),
                ('{"unlink_waits": [{"call": "f", "arg": 1}]}',
                 "unlink_waits entry without 'reason'"),
                ('{"thread_lifetimes": [{"thread": "t", "stop": 1, "reason": "r"}]}',
                 "thread_lifetimes t: thread and stop must be function names"),
                ('{"thread_lifetimes": [{"thread": "t", "reason": "r"}]}',
                 "thread_lifetimes entry without 'stop'"),
                ('{"thread_lifetimes": [{"thread": "t", "stop": "s", "also": "u", "reason": "r"}]}',
                 "thread_lifetimes t: also must be a list of function names"),
                ('{"thread_lifetimes": [{"thread": "t", "stop": "s", "held": "l", "reason": "r"}]}',
                 "thread_lifetimes t: held must be a lock (struct.field)"),
                ('{"teardown_contexts": [{"entry": "w", "object": {"function": "f", "arg": "1"}, '
                 '"reached_by": [], "reason": "r"}]}',
                 "teardown_contexts w: 'entry' is a function, 'object' {function, arg"),
                ('{"teardown_contexts": [{"entry": "w", "object": {"function": "f", "arg": 1}, '
                 '"reached_by": "g", "reason": "r"}]}',
                 "'reached_by' must be a list of function names"),
                ('{"init_time_flags": [{"field": "s.f", "bit": 2, "reason": "r"}]}',
                 "init_time_flags s.f: 'field' must be struct.field and 'bit' a flag name"),
                ('{"init_time_flags": [{"field": "s.f", "reason": "r"}]}',
                 "init_time_flags entry without 'bit'"),
                ('{"lifetime_counts": [{"field": "s", "reason": "r"}]}',
                 "lifetime_counts s: 'field' must be struct.field"),
                ('{"lifetime_counts": [{"field": "s.f"}]}',
                 "lifetime_counts entry without 'reason'"),
                ('{"held_members": [{"member": "bp", "lock": "s.l", "reason": "r"}]}',
                 "held_members \"bp\": 'member' and 'lock' must be struct.field"),
                ('{"held_members": [{"member": "s.bp", "lock": "s.l"}]}',
                 "held_members entry without 'reason'"),
                ('{"locked_lists": [{"function": "f", "arg": "1", "lock": "s.l", "reason": "r"}]}',
                 "locked_lists \"f\": it needs \"function\", \"arg\" (an argument number)"),
                ('{"locked_lists": [{"function": "f", "arg": 1, "lock": "s.l"}]}',
                 "locked_lists entry without 'reason'"),
                ('{"guards": [{"field": "s.f", "reason": "r", "implies": {"true": []}}]}',
                 "implies must map set or null"),
                ('{"guards": [{"call": "f", "reason": "r", "implies": {"true": '
                 '[{"lock": "l", "mode": "shared"}]}}]}', "implies must map true or false"),
                ('{"guards": [{"field": "s.f", "reason": "r", "when_mentions": [0, "a.b"]}]}',
                 "when_mentions must be [argument number, struct.field] of a call guard"),
                ('{"guards": [{"call": "f", "reason": "r", "under": "s.l"}]}',
                 "under must be a lock name or a list of them, on a field guard"),
                ('{"guards": [{"field": "s.f", "reason": "r", "under": []}]}',
                 "under must be a lock name or a list of them"),
                ('{"guards": [{"field": "s.f", "reason": "r", "pinned": ["set"]}]}',
                 "pinned must list states (set or null) of a guard with under"),
                ('{"guards": [{"field": "s.f", "reason": "r", "under": "s.l", '
                 '"pinned": ["true"]}]}', "pinned must list states"),
                ('{"guards": [{"field": "s.f", "reason": "r", '
                 '"empty_lookups": {"state": "set", "calls": ["g"]}}]}',
                 "empty_lookups must be"),
                ('{"guards": [{"call": "f", "reason": "r", '
                 '"empty_lookups": {"state": "true", "calls": []}}]}',
                 "empty_lookups must be"),
                ('{"lock_functions": [{"name": "f", "op": "acquire", '
                 '"when_mentions": [1]}]}', "when_mentions must be"),
                ('{"lock_functions": [{"name": "f", "op": "trylock", "lock": "l", '
                 '"also": [{"mode": "read"}]}]}', "also must be a list"),
                ('{"lock_functions": [{"name": "f", "op": "trylock", "lock": "l", '
                 '"also": [{"lock": "m", "mode": "group"}]}]}', "a group mode needs a group"),
                ('{"lock_functions": [{"name": "f", "op": "acquire", "lock": "l", '
                 '"objects": [0]}]}', "objects must be a list of two or more"),
                ('{"lock_functions": [{"name": "f", "op": "acquire", "lock": "l", '
                 '"object": 0}]}', "object must be an argument number, on a release"),
                ('{"lock_functions": [{"name": "f", "op": "acquire", "lock": "l", '
                 '"mode": "exclusive", "raised_where": {"call": "p", "mode_arg": [2, "X"]}}]}',
                 "raised_where must be"),
                ('{"lock_functions": [{"name": "f", "op": "acquire", "lock": "l", '
                 '"mode": "read", "raised_where": {"call": "p"}}]}', "raised_where must be"),
                ('{"pseudo_locks": [{"name": "s.p", "struct": "s"}]}',
                 "pseudo_locks entry without 'reason'"),
                ('{"instances": [{"struct": "s", "roles": {"a": ["x.p"]}, "reason": "r"}]}',
                 "roles must map at least two role names"),
                ('{"instances": [{"struct": "s", "roles": {"a": ["x.p"], "b": ["x.q"]}, '
                 '"params": {"c": [{"function": "f", "arg": 1}]}, "reason": "r"}]}',
                 "params must map role names of roles to lists"),
                ('{"instances": [{"struct": "s", "roles": {"a": ["x.p"], "b": ["x.q"]}, '
                 '"calls": {"a": "f"}, "reason": "r"}]}',
                 "calls must map role names of roles to lists of function names"),
                ('{"data_locks": [{"member_types": [], "lock": "b.l", "reason": "r"}]}',
                 "data_locks b.l: member_types must be a list of type names"),
                ('{"data_locks": [{"member_types": ["__be32"], "lock": "b.l"}]}',
                 "data_locks entry without 'reason'"),
            ]:
                with self.subTest(msg=msg):
                    Path(d, "btrfs", "bad.json").write_text(text)
                    self.check_error(run("report", "--policies", d), msg)


class FactsInterpreter(unittest.TestCase):
    def test_facts_script_runs_in_the_drivers_python(self):
        """spatch runs the facts script in the driver's interpreter, not in
        the first python3 in PATH (here one that fails at once)."""
        sys.path.insert(0, str(REPO / "tests"))
        import fixture_lib
        with tempfile.TemporaryDirectory() as d:
            bad = Path(d, "bin")
            bad.mkdir()
            for n in ("python3", "python"):
                (bad / n).write_text("#!/bin/sh\nexit 3\n")
                (bad / n).chmod(0o755)
            tree = fixture_lib.make_tree(REPO / "tests" / "fixtures" / "lock_forms", d)
            old = os.environ["PATH"]
            os.environ["PATH"] = str(bad) + os.pathsep + old
            try:
                recs, _ = fixture_lib.facts_mod.run(str(tree), fixture_lib.TARGET, 1,
                                                    use_cache=False)
            finally:
                os.environ["PATH"] = old
            self.assertTrue(any(r["k"] == "acc" for r in recs))
