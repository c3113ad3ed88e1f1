# SPDX-License-Identifier: GPL-2.0-only
"""The options of `lkmm-mark verify` after the documented ones (argparse
REMAINDER): --smp, --no-boot and the --kcsan-* tuning.  Shared by verify
and the KCSAN stage run alone (vkcsan)."""
from .base import UserError
from .target import subsystem_of

NUMERIC = ("--smp", "--kcsan-seconds", "--kcsan-smp")
# --kcsan-scope: the target's subsystem (its name, the default) or all
STRINGS = {"--kcsan-params": None, "--kcsan-scope": ("<subsystem>", "all"),
           "--kcsan-profile": ("kcsan", "full"),
           "--kcsan-kernels": ("both", "pristine", "patched"), "--kcsan-tag": None,
           "--kcsan-remap": None}
USAGE = ("--smp N, --kcsan-seconds N, --kcsan-smp N, --kcsan-params k:v,..., "
         "--kcsan-scope <subsystem>|all, --kcsan-profile kcsan|full, "
         "--kcsan-kernels both|pristine|patched, --kcsan-only, "
         "--kcsan-tag NAME, --kcsan-remap RESULTS.json, --no-boot")


def _value(a, v, opts):
    k = a[2:].replace("-", "_")
    if k == "kcsan_seconds":
        k = "kcsan_secs"
    if a in STRINGS:
        ok = [subsystem_of() if x == "<subsystem>" else x for x in STRINGS[a] or ()]
        if ok and v not in ok:
            raise UserError("%s: one of %s, not %s" % (a, "|".join(ok), v))
        opts[k] = v
    else:
        if not v.isdigit():
            raise UserError("%s: not a number: %s" % (a, v))
        opts[k] = int(v)


def parse_rest(rest):
    """Extra options after the documented ones (argparse REMAINDER)."""
    opts = dict(smp=None, kcsan_secs=None, kcsan_params=None, kcsan_smp=None, skip_boot=False,
                kcsan_scope=None, kcsan_kernels="both", kcsan_only=False, kcsan_tag="",
                kcsan_profile=None, kcsan_remap=None)
    it = iter(rest or [])
    for a in it:
        if a == "--":
            continue
        if a in NUMERIC or a in STRINGS:
            try:
                v = next(it)
            except StopIteration:
                raise UserError("%s needs a value" % a)
            _value(a, v, opts)
        elif a == "--no-boot":
            opts["skip_boot"] = True
        elif a == "--kcsan-only":
            opts["kcsan_only"] = True
        else:
            raise UserError("unknown verify option: %s (known: %s)" % (a, USAGE))
    if opts["kcsan_secs"] is not None and opts["kcsan_secs"] < 5:
        raise UserError("--kcsan-seconds must be at least 5")
    return opts
