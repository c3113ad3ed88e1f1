# SPDX-License-Identifier: GPL-2.0-only
"""What the verification stages share: the repository's qemu-test paths, the
cache directory of verify, the progress line, content hashes, the build
error.  Imports only base (and deps, for the host tools; tree, for a base
tree's version).

The cache directory, the KCSAN results and the config fragments follow the
version of the base tree (`use_base()`): 6.1 keeps <cache>/verify,
qemu-test/results/ and qemu-test/config/*.config; another version gets
<cache>/verify-<version>, qemu-test/results/<version>/ and, after the
common fragments, qemu-test/config/<version>/<fragment> where one exists
(options that version renamed).  Two versions never share a tree, a build
or a bisect entry, and a 6.12 run does not replace 6.1's."""
import hashlib
import os
from pathlib import Path

from .base import cache_dir, log

REPO = Path(__file__).resolve().parents[2]
QTEST = REPO / "qemu-test"
CONFIG_DIR = QTEST / "config"
RESULTS_DIR = QTEST / "results"


class BuildError(Exception):
    pass


_SERIES = [None]        # the base tree's version when it is not 6.1


def use_base(base):
    """Select the cache, results and config of base's kernel version."""
    from .tree import DEFAULT_KERNEL, kernel_series
    series = kernel_series(base)
    _SERIES[0] = series if series not in (None, DEFAULT_KERNEL) else None


def vdir():
    """The build cache of the base's version and the selected target's
    subsystem (verify, verify-6.12, verify-foofs, verify-6.12-foofs)."""
    parts = ["verify"] + ([_SERIES[0]] if _SERIES[0] else []) + _subsystem_part()
    return cache_dir() / "-".join(parts)


def results_dir(results=RESULTS_DIR):
    """qemu-test/results/, with the version's and the non-default
    subsystem's subdirectories."""
    d = Path(results) / _SERIES[0] if _SERIES[0] else Path(results)
    return d.joinpath(*_subsystem_part())


def _subsystem_part():
    from .target import is_default_target, selected_target, subsystem_of
    return [] if is_default_target() else [subsystem_of(selected_target())]


def config_fragments(names, config_dir=CONFIG_DIR):
    """The config fragment files of a flavour: each common one, then its
    version override when the base's version has one."""
    out = []
    for n in names:
        out.append(Path(config_dir) / n)
        if _SERIES[0] and (Path(config_dir) / _SERIES[0] / n).exists():
            out.append(Path(config_dir) / _SERIES[0] / n)
    return out


def progress(msg):
    log("verify: " + msg)


def nproc():
    return os.cpu_count() or 2


def ensure_host_tools():
    from . import deps
    deps.ensure(deps.VERIFY, "verification")


def h(*parts):
    """sha256 of the parts, each separated by a NUL."""
    m = hashlib.sha256()
    for p in parts:
        m.update(p if isinstance(p, bytes) else str(p).encode())
        m.update(b"\0")
    return m.hexdigest()


def file_hash(paths):
    """sha256 of the files' names and contents.  The name without its
    directory: the key of a cache entry made from a checkout's files (config
    fragments, guest sources) is the same from every checkout."""
    m = hashlib.sha256()
    for p in paths:
        m.update(Path(p).name.encode() + b"\0")
        m.update(Path(p).read_bytes())
    return m.hexdigest()

