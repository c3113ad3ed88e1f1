# SPDX-License-Identifier: GPL-2.0-only
"""The target and its subsystem, as data: the engine names no subsystem.

- default_target(): the directory a command works on without --target,
  policies/policies.json's "default_target".
- subsystem_of(target): the policies/ subdirectory of a target, its last
  component (fs/foofs -> foofs).
- verify_spec(target): what verify needs to know about the subsystem it
  builds, boots and stresses, policies/<subsystem>/verify.json (VERIFY_KEYS):
  the kernel config fragment, the host programs and their Debian packages,
  the programs copied into the guest, the guest workload's directory, the
  subsystem's own console error lines.  verify works on the default target.

Imports only base: every stage may ask (tree, deps, policy, verify).
"""
import functools
import json
import re
from pathlib import Path

from .base import UserError

REPO = Path(__file__).resolve().parents[2]
POLICIES = REPO / "policies"
VERIFY_FILE = "verify.json"

# key -> (type, what it says); every key is required
VERIFY_KEYS = {
    "kernel_config": (str, "a kernel config fragment in the same directory, merged "
                           "after qemu-test/config/base.config"),
    "host_tools": (list, "[program, Debian package] pairs verify needs on the host"),
    "guest_binaries": (list, "absolute paths of host programs copied into the guest, "
                             "before the generic ones (stress-ng, fio)"),
    "guest_dir": (str, "the guest workload's directory (init, lkstress.c), "
                       "relative to the repository"),
    "console_errors": (str, "a regular expression for the subsystem's own error "
                            "lines on the console (a splat of the subsystem's name)"),
}


@functools.lru_cache(maxsize=None)
def _top(path=POLICIES / "policies.json"):
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError) as e:
        raise UserError("%s: cannot read: %s" % (path, e))


def default_target():
    """The target of a command given none (policies/policies.json)."""
    t = _top().get("default_target")
    if not isinstance(t, str) or not t:
        raise UserError("%s: no \"default_target\"" % (POLICIES / "policies.json"))
    return t


def seed_citation():
    """How the series cites the commit whose locked/unlocked rules it follows."""
    return _top().get("seed", "")


def subsystem_of(target=None):
    """The policies/ subdirectory for a target directory: its last
    component (fs/foofs -> foofs); the default target's without one."""
    return Path((target or default_target()).rstrip("/")).name


class VerifySpec:
    """policies/<subsystem>/verify.json, checked, with paths resolved."""

    def __init__(self, target, path, d):
        self.target = target.rstrip("/")
        self.subsystem = subsystem_of(target)
        self.path = path
        self.kernel_config = path.parent / d["kernel_config"]
        self.host_tools = [tuple(x) for x in d["host_tools"]]
        self.guest_binaries = list(d["guest_binaries"])
        self.guest_dir = REPO / d["guest_dir"]
        self.console_errors = re.compile(d["console_errors"])


def _check_spec(path, d):
    if not isinstance(d, dict):
        raise UserError("%s: malformed: top level must be an object" % path)
    for k, v in d.items():
        if k != "_comment" and k not in VERIFY_KEYS:
            raise UserError("%s: malformed: unknown key '%s'" % (path, k))
    for k, (typ, what) in VERIFY_KEYS.items():
        if not isinstance(d.get(k), typ):
            raise UserError("%s: malformed: '%s' must be a %s: %s" % (path, k, typ.__name__, what))
    if not all(isinstance(x, list) and len(x) == 2 for x in d["host_tools"]):
        raise UserError("%s: malformed: 'host_tools' entries are [program, package]" % path)
    if not (path.parent / d["kernel_config"]).is_file():
        raise UserError("%s: no kernel config fragment %s" % (path, d["kernel_config"]))


# the target verify, bisect and am work on (select_target(); None: the default)
_SELECTED = [None]


def select_target(target):
    """Make target the one verify_spec() describes when given none (the
    commands verify, bisect and am, given --target)."""
    _SELECTED[0] = target.rstrip("/") if target else None


def selected_target():
    """The target select_target() chose, or the default one."""
    return _SELECTED[0] or default_target()


def is_default_target(target=None):
    """target (the selected one without it) is the default target."""
    return subsystem_of(target or selected_target()) == subsystem_of(default_target())


def verify_spec(target=None):
    """The VerifySpec of a target's subsystem (the selected target's, or the
    default one's, without one)."""
    return _verify_spec(target or selected_target())


@functools.lru_cache(maxsize=None)
def _verify_spec(target):
    path = POLICIES / subsystem_of(target) / VERIFY_FILE
    try:
        with open(path) as f:
            d = json.load(f)
    except OSError:
        raise UserError("%s: no verify description for %s" % (path, target))
    except ValueError as e:
        raise UserError("%s: malformed: %s" % (path, e))
    _check_spec(path, d)
    return VerifySpec(target, path, d)
