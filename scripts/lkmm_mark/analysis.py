# SPDX-License-Identifier: GPL-2.0-only
"""Stages 2 and 3: lock context, protection inference, verdicts.

Input: the access facts of cocci/facts.cocci and the sources (for token
order).  Output: a Plan, one verdict per access with a rule id from
policies/policies.json and a reason citing the evidence.

Analysis is composed of one class per part of the model, each in its
module, listed in the order run() first calls them; each stage reads what
the ones before it set (each module's docstring says what it reads and sets):

  accesses.py     the accesses from the facts, their struct and kind
                  (accessors.py: those in macro bodies, at their calls)
  callgraph.py    the lock flow of each function, the call graph, dead
                  code (scan.py: its source-only part; syntax.py: what a
                  function's tokens say, for every stage; handback.py:
                  the wrappers that hand back a locked object; diagflow.py:
                  the loads whose value reaches only diagnostics through
                  locals and return values)
  private.py      objects private to a function, constructors
                  (newmembers.py: a new object a helper finds in a member
                  of the request struct its caller filled)
  owners.py       owner parameters, the owner's reads, life cycles
                  (initflags.py: the branches that run only during init)
  escapes.py      parameters and addresses that escape, private parameters
  callers.py      the locks held on entry and in each calling context,
                  the locks each access holds, execution contexts
                  (flagargs.py, nullargs.py: the calls that can reach an
                  access, by their literal and NULL arguments; lending.py:
                  the locks a task lends with an object it hands over)
  exclusions.py   the accesses that get no verdict of their own (with
                  detach.py and unpublished.py: windows in which a function
                  owns an object it unlinked or has not published yet;
                  values.py: branches no value of an enum field takes)
  protection.py   per field: its lock, lost updates, class
  races.py        what keeps two accesses apart without a common lock
                  (waits.py: a wait for an object's completion;
                  drains.py: a drain of an object's holders)
  verdicts.py     each access's action, rule and reason
  contexts.py     the entry points each function is reached from, and
                  which run in parallel
  pairs.py        for each marked access, a counterpart that races with
                  it ('paired'), or none ('lockset-only')

and then two detectors of bugs no mark fixes, reported apart and left out
of the series: doublefetch.py (a racy field tested and loaded again in the
code the test guards) and twostep.py (a racy field stored, then stored
again from its own value).
"""
from .accesses import Accesses
from .accessors import Accessors
from .callers import Callers, _excluding
from .callgraph import CallGraph
from .contexts import Contexts
from .detach import Detach
from .diagflow import DiagFlow
from .doublefetch import DoubleFetch
from .drains import Drains
from .escapes import Escapes
from .exclusions import Exclusions
from .flagargs import FlagArgs
from .memberflags import MemberFlags
from .madeflags import MadeFlags
from .assertentry import AssertEntry
from .handback import HandBack
from .initflags import InitFlags
from .instances import Instances
from .kindctx import KindContexts
from .lending import Lending
from .lockmodes import declare_covers, declare_exclusions
from .nullargs import NullArgs
from .opsentry import OpsEntry
from .variants import Variants
from .owners import Owners
from .pairs import Pairs
from .private import Private
from .protection import Protection
from .races import Races, PHASE_TAG
from .scan import SourceScan
from .source import Access, Source, STORE_MACROS
from .syntax import Syntax
from .threads import Threads
from .torn import TornObjects
from .twostep import TwoStep
from .unpublished import Unpublished
from .newobjects import NewObjects
from .newmembers import NewMembers
from .outmade import OutMade
from .values import FieldValues
from .verdicts import Verdicts
from .waitedwork import WaitedWork
from .waits import Waits
from .workself import WorkSelf

__all__ = ["Analysis", "Access", "Source", "STORE_MACROS", "PHASE_TAG"]


class Analysis(Accesses, Accessors, Syntax, SourceScan, HandBack, WaitedWork, CallGraph, FlagArgs,
               AssertEntry,
               MemberFlags, MadeFlags, NullArgs, OpsEntry, Callers, Escapes, Private, Detach, Unpublished,
               NewObjects, NewMembers, OutMade,
               Owners, InitFlags, FieldValues, Exclusions, Protection, Races, Waits, Drains,
               Verdicts, Contexts, Variants, Instances, Threads, TornObjects, WorkSelf,
               KindContexts, Lending,
               Pairs, DoubleFetch, TwoStep, DiagFlow):
    def __init__(self, tree, target, facts, policies, files, src=None):
        self.tree = tree
        self.target = target.rstrip("/")
        self.P = policies
        self.src = src if src is not None else Source(tree, files)
        self.facts = facts
        self.accesses = []
        self.not_analysed = []
        self.fields = {}
        # caches and results the stages share (their modules say who sets them)
        self._idcache = {}              # syntax.py
        self._argcache = {}
        self._paramcache = {}
        self._stackcache = {}
        self._ftypes = {}               # accesses.py
        self._flagranges = {}           # flagargs.py
        self._tokmemo = {}              # accesses.py member_token_facts()
        self._ppcache = {}              # escapes.py
        self._ctxmemo = {}
        self._ctxchain = {}
        self._flagcache = {}            # flagargs.py
        self._mflagcache = {}           # memberflags.py
        self._stackunl_cache = {}       # detach.py
        self._unpubcache = {}           # unpublished.py
        self._zhcache = {}              # exclusions.py
        self.owner_read = {}            # owners.py
        self.owner_quiet = set()
        self.ctx_locked = {}            # protection.py
        self.lost_ids = set()
        self.double_fetches = []        # doublefetch.py
        self.two_step_stores = []       # twostep.py
        self._wxmemo = {}               # races.py

    def run(self, scan=None):
        """scan: a callable giving source_scan()'s result, called after the
        lock flow (commands.analyse() computes it in another process)."""
        # the exclusions this analysis's facts declare (locks.py), and no
        # answer an earlier analysis remembered without them
        declare_exclusions({n: c["excludes"] for n, c in self.P.pseudo_locks.items()
                            if c.get("excludes")})
        declare_covers({n: c["covers"] for n, c in self.P.pseudo_locks.items()
                        if c.get("covers")})
        _excluding.cache_clear()
        self.build_accesses()
        self.run_flow()
        self.call_graph(scan() if scan is not None else None)
        self.diag_flows()
        self.constructors = self.find_constructors()
        # a NULL handle's calls, and where a handle is there after all
        self.handle_tests()
        # owner parameters first: _detached() (_asserted_off_list()) needs them
        self.owner_params()
        self.made_params()
        self.param_escapes()
        self.private_params()
        self.entry_locks()
        self.cond_params()
        self.handle_tests()             # again in the flows cond_params() ran again
        self.attach_held()
        self.apply_exclusions()
        self.owner_reads()
        self.container_held()
        self.data_held()
        self.infer()
        self.racing_pairs()
        self.report_in_bodies()
        self.find_double_fetches()
        self.find_two_step_stores()
        return self
