# SPDX-License-Identifier: GPL-2.0-only
"""The cached pristine kernel and initramfs for the tests that boot or read
the build log: built through the same cached functions as `lkmm-mark
verify` when missing (so these tests never skip in CI), in the cache the
user (or CI) set when the tests were loaded: other tests point
LKMM_MARK_CACHE at a temporary directory while they run, and the kernel
built by `lkmm-mark verify` must be reused, not rebuilt there."""
import os
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
SCRIPTS = REPO / "scripts"
RESULTS = REPO / "qemu-test" / "results"
sys.path.insert(0, str(SCRIPTS))

from lkmm_mark import initramfs, vbuild  # noqa: E402

SKIP_QEMU = os.environ.get("LKMM_MARK_SKIP_QEMU_TESTS") == "1"
_CACHE_ENV = os.environ.get("LKMM_MARK_CACHE")
_kernel = {}


def _in_user_cache(fn):
    saved = os.environ.get("LKMM_MARK_CACHE")
    if _CACHE_ENV is None:
        os.environ.pop("LKMM_MARK_CACHE", None)
    else:
        os.environ["LKMM_MARK_CACHE"] = _CACHE_ENV
    try:
        return fn()
    finally:
        if saved is None:
            os.environ.pop("LKMM_MARK_CACHE", None)
        else:
            os.environ["LKMM_MARK_CACHE"] = saved


def pristine_build():
    """vbuild.build_kernel's dict for the cached pristine base kernel."""
    if "build" not in _kernel:
        _kernel["build"] = _in_user_cache(vbuild.ensure_pristine_kernel)
    return _kernel["build"]


def kernel_and_initrd():
    if "initrd" not in _kernel:
        pristine_build()
        _kernel["initrd"] = _in_user_cache(initramfs.build_initramfs)
    return _kernel["build"]["bzimage"], _kernel["initrd"]
