# SPDX-License-Identifier: GPL-2.0-only
"""Per-version facts: policies/<subsystem>/<version>/*.json.

The subsystem's facts are written for one kernel (the first one they
were written for).  When the code of another version renamed or removed what a fact names, that
version gets a file of its own beside the facts, loaded only for trees of
that version (VERSION.PATCHLEVEL of the tree's Makefile):

- "replaces": [{"key", "name", "reason"}] takes out of the subsystem's
  facts every entry of key that names name (for a list of names: that
  name), saying why;
- every other key adds entries, as in any policy file: the facts as they
  hold for that version, each with its reason.

A "replaces" that matches nothing is an error (the override itself went
stale), and so is one in a file that is not a version's.
"""
import json

from .base import UserError
from .factcheck import NAMES, _values


def version_files(sub, series):
    """The override files of one version of a subsystem directory."""
    if not series or not (sub / series).is_dir():
        return []
    return sorted((sub / series).glob("*.json"))


def _check(f, reps):
    for r in reps:
        if not (isinstance(r, dict) and all(isinstance(r.get(k), str) and r.get(k)
                                            for k in ("key", "name", "reason"))):
            raise UserError("%s: malformed policy file: replaces entry %s needs \"key\", "
                            "\"name\" and \"reason\"" % (f, json.dumps(r)[:60]))
        if r["key"] not in NAMES:
            raise UserError("%s: malformed policy file: replaces: '%s' is not a key that "
                            "names code" % (f, r["key"]))


def _names_of(key, entry):
    return {v for path, _ in NAMES[key] for v in _values(entry, path)}


def apply(base, overlays):
    """base, overlays: [(path, data)].  Removes what the overlays'
    "replaces" name from the base data (in place) and from the overlays;
    returns the (key, name) pairs replaced."""
    for f, d in base:
        if "replaces" in d:
            raise UserError("%s: malformed policy file: only a version's file "
                            "(<subsystem>/<version>/) may replace facts" % f)
    done = []
    for f, d in overlays:
        reps = d.pop("replaces", [])
        _check(f, reps)
        for r in reps:
            hit = 0
            for _, bd in base:
                entries = bd.get(r["key"])
                if not isinstance(entries, list):
                    continue
                keep = [e for e in entries if r["name"] not in _names_of(r["key"], e)]
                hit += len(entries) - len(keep)
                bd[r["key"]] = keep
            if not hit:
                raise UserError("%s: replaces %s '%s', which no fact names"
                                % (f, r["key"], r["name"]))
            done.append((r["key"], r["name"]))
    return done
