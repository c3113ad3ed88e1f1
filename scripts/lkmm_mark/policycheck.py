# SPDX-License-Identifier: GPL-2.0-only
"""The checks every fact loader of policies/ shares (policyfacts.py,
policylocks.py): a malformed entry gets a one-line error naming the
file."""
import json

from .tree import UserError


def _need(path, obj, keys, what):
    if not isinstance(obj, dict):
        raise UserError("%s: malformed policy file: %s entry %s is not an object"
                        % (path, what, json.dumps(obj)))
    for k in keys:
        if k not in obj:
            raise UserError("%s: malformed policy file: %s entry without '%s'" % (path, what, k))


def _err(f, msg, *args):
    return UserError("%s: malformed policy file: %s" % (f, msg % args))


def _names(f, c, key, what, nonempty=True):
    v = c.get(key)
    if not (isinstance(v, list) and (v or not nonempty) and
            all(isinstance(x, str) and x for x in v)):
        raise _err(f, "%s: '%s' must be a %slist of function names", what, key,
                   "non-empty " if nonempty else "")


def _keyed(attr, key, what, fields):
    """A list of entries stored by their key in P.<attr>."""
    def load(P, f, entries):
        for c in entries:
            _need(f, c, fields, what)
            getattr(P, attr)[c[key]] = c
    return load
