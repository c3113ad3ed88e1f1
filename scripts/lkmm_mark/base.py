# SPDX-License-Identifier: GPL-2.0-only
"""What every stage shares: the user-error type, the cache's place, the
progress log.  Imports nothing of the package."""
import os
import sys
from pathlib import Path


class UserError(Exception):
    """A problem with the user's input: printed as one line, exit 2."""


def cache_dir():
    base = os.environ.get("LKMM_MARK_CACHE")
    if base:
        return Path(base)
    xdg = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(xdg) / "lkmm-mark"


def log(msg):
    print("lkmm-mark: " + msg, file=sys.stderr, flush=True)
