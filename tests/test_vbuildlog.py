# SPDX-License-Identifier: GPL-2.0-only
"""The build log of a passing kernel build holds compiler warnings (W=1) and
nothing else that looks wrong: no 'date: invalid date' (KBUILD_BUILD_TIMESTAMP
is a valid date), no errors, no shell or make failures.

The log is the cached pristine kernel's (built through the same cached
function as `lkmm-mark verify` when missing, so this never skips in CI).
"""
import re
import unittest

from vkernel_lib import pristine_build
from lkmm_mark import vbuild

NOISE = [
    ("invalid date", re.compile(r"invalid date")),
    ("compiler error", re.compile(r"^\S+:\d+:(?:\d+:)?\s*(?:fatal )?error:")),
    ("error line", re.compile(r"\berror:", re.I)),
    ("make failure", re.compile(r"\*\*\* .*(?:Error \d+|Stop\.)")),
    ("shell failure", re.compile(r"^(?:/bin/)?sh: |command not found|No such file or directory")),
]


def noise(text):
    """[(kind, line)] of the lines of a build log that a passing build must not have."""
    out = []
    for line in text.splitlines():
        for kind, rx in NOISE:
            if rx.search(line):
                out.append((kind, line))
                break
    return out


class BuildLog(unittest.TestCase):
    def test_noise_is_found(self):
        # what the scan catches (the old KBUILD_BUILD_TIMESTAMP, a failed build)
        bad = ("date: invalid date 'lkmm-mark'\n"
               "  CC      fs/btrfs/ctree.o\n"
               "../fs/btrfs/ctree.c:12:3: error: 'x' undeclared\n"
               "make[3]: *** [../scripts/Makefile.build:250: fs/btrfs/ctree.o] Error 1\n"
               "../fs/btrfs/ctree.c:13:1: warning: no previous prototype [-Wmissing-prototypes]\n")
        self.assertEqual([k for k, _ in noise(bad)],
                         ["invalid date", "compiler error", "make failure"])

    def test_pristine_build_log_is_clean(self):
        b = pristine_build()
        log = b["out"] / "lkmm-build.log"
        text = log.read_text(errors="replace")
        self.assertIn("Kernel: arch/x86/boot/bzImage is ready", text)
        self.assertEqual(noise(text), [], log)

    def test_timestamp_is_a_date(self):
        import subprocess
        r = subprocess.run(["date", "-d", vbuild.BUILD_TIMESTAMP, "+%Y"],
                           capture_output=True, text=True)
        self.assertEqual((r.returncode, r.stdout.strip()), (0, "2026"), r.stderr)
        self.assertEqual(vbuild.build_env()["KBUILD_BUILD_TIMESTAMP"], vbuild.BUILD_TIMESTAMP)


if __name__ == "__main__":
    unittest.main()
