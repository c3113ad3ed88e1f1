# SPDX-License-Identifier: GPL-2.0-only
"""verify stage 'boot': a kernel under QEMU (KVM when a tiny KVM boot works
here, else TCG), the console read line by line (@@LKMM markers echoed as
progress), then scanned (console.py).

A stress run gets <cache>/verify/run/<tag>/ with its virtio disk images and
console.log; the directory is an entry of the cache: a run holds its lock
exclusively from the moment it clears it until QEMU has exited and the disks
are removed (QEMU inherits the lock, and dies with the run).

Standalone: python3 -m lkmm_mark.boot [--mode pass|fail|crash|hang]
            [--stress-seconds N] [--kernel BZIMAGE] [--smp N] [--timeout S]
boots the cached pristine kernel (built if missing) with the initramfs.
"""
import argparse
import os
import shutil
import subprocess
import sys
import threading
import time

from .cachelock import child_kwargs, locked
from .console import KCSAN_EXPECTED, MARK, GuestResult, analyse, describe
from .vcommon import progress, vdir

_accel_cache = {}


def detect_accel(bzimage):
    """'kvm' if a tiny KVM boot actually runs here, else 'tcg'."""
    forced = os.environ.get("LKMM_MARK_ACCEL")
    if forced in ("kvm", "tcg"):
        return forced
    if "accel" in _accel_cache:
        return _accel_cache["accel"]
    accel = "tcg"
    why = "/dev/kvm not usable"
    if os.path.exists("/dev/kvm") and os.access("/dev/kvm", os.R_OK | os.W_OK):
        cmd = ["qemu-system-x86_64", "-accel", "kvm", "-cpu", "host", "-m", "256",
               "-nodefaults", "-display", "none", "-no-reboot", "-serial", "stdio",
               "-kernel", str(bzimage), "-append",
               "console=ttyS0 rdinit=/nonexistent root=/dev/nonexistent panic=-1"]
        try:
            r = subprocess.run(cmd, capture_output=True, text=True, timeout=20)
            ok = r.returncode == 0 and "Kernel panic" in r.stdout
            why = "tiny KVM boot %s" % ("reached the panic" if ok else
                                         "failed: " + (r.stderr.strip().splitlines() or
                                                       ["rc %d" % r.returncode])[-1])
            if ok:
                accel = "kvm"
        except subprocess.TimeoutExpired:
            why = "tiny KVM boot timed out"
    progress("accelerator: %s (%s)" % (accel, why))
    _accel_cache["accel"] = accel
    return accel


def qemu_cmd(bzimage, initrd, append, disks, smp, mem, accel):
    cmd = ["qemu-system-x86_64", "-m", str(mem), "-smp", str(smp), "-nodefaults",
           "-display", "none", "-no-reboot", "-serial", "stdio", "-monitor", "none",
           "-kernel", str(bzimage),
           "-append", "console=ttyS0 loglevel=5 panic=-1 oops=panic " + append]
    if accel == "kvm":
        cmd[1:1] = ["-accel", "kvm", "-cpu", "host"]
    else:
        cmd[1:1] = ["-accel", "tcg,thread=multi", "-cpu", "max"]
    if initrd:
        cmd += ["-initrd", str(initrd)]
    for d in disks:
        cmd += ["-drive", "file=%s,if=virtio,format=raw,cache=unsafe,discard=unmap" % d]
    return cmd


def _reader(p, chunks, logf, echo):
    for raw in iter(p.stdout.readline, b""):
        line = raw.decode("utf-8", "replace").replace("\r", "")
        chunks.append(line)
        if logf:
            logf.write(line)
            logf.flush()
        if echo and MARK in line:
            progress("guest: " + line[line.find(MARK):].strip())


def run_guest(bzimage, initrd, append="", disks=(), smp=2, mem=2048, timeout=600,
              expected=(), console_log=None, accel=None, echo=True):
    res = GuestResult()
    accel = accel or detect_accel(bzimage)
    res.accel = accel
    res.cmd = qemu_cmd(bzimage, initrd, append, disks, smp, mem, accel)
    chunks = []
    t0 = time.time()
    p = subprocess.Popen(res.cmd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                         stderr=subprocess.STDOUT, **child_kwargs())
    logf = open(console_log, "w") if console_log else None
    th = threading.Thread(target=_reader, args=(p, chunks, logf, echo), daemon=True)
    th.start()
    try:
        p.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        res.timed_out = True
        p.kill()
        p.wait()
    th.join(10)
    p.stdout.close()
    if logf:
        logf.close()
    res.seconds = time.time() - t0
    res.rc = p.returncode
    res.console = "".join(chunks)
    return analyse(res, expected)


def make_disks(d, n=2, size=8 << 30, first=0):
    d.mkdir(parents=True, exist_ok=True)
    paths = []
    for i in range(first, first + n):
        p = d / ("disk%d.img" % i)
        if p.exists():
            p.unlink()
        with open(p, "wb") as f:
            f.truncate(size)
        paths.append(p)
    return paths


def stress_guest(bzimage, initrd, secs, smp, tag, kcsan_params="", expected=(), accel=None,
                 profile="full"):
    run = vdir() / "run" / tag
    with locked("run-" + tag, "the QEMU run directory %s" % run):
        if run.exists():
            shutil.rmtree(run)
        disks = make_disks(run)
        if profile == "kcsan":
            # /dev/vdc: the second, otherwise idle file system of `lkstress commit`
            disks += make_disks(run, n=1, size=2 << 30, first=2)
        append = "lkmm.mode=stress lkmm.secs=%d lkmm.profile=%s" % (secs, profile)
        if kcsan_params:
            append += " lkmm.kcsan=" + kcsan_params
        accel = accel or detect_accel(bzimage)
        # boot + mkfs + stress + remount/verify/scrub/check; TCG is slow, KCSAN slower.
        timeout = 300 + secs * 2 + (600 if accel == "tcg" else 0)
        progress("booting %s (%s, %d vCPUs, %d s stress, timeout %d s, console %s)"
                 % (tag, accel, smp, secs, timeout, run / "console.log"))
        res = run_guest(bzimage, initrd, append, disks, smp=smp, timeout=timeout,
                        expected=expected, console_log=run / "console.log", accel=accel)
        for d in disks:
            d.unlink()
    return res


def main(argv=None):
    from .base import UserError
    from .initramfs import build_initramfs
    from .vbuild import ensure_pristine_kernel
    from .vcommon import BuildError
    ap = argparse.ArgumentParser(prog="python3 -m lkmm_mark.boot", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--kernel", help="bzImage (default: the cached pristine base kernel)")
    ap.add_argument("--mode", default="pass", choices=["pass", "fail", "crash", "hang"])
    ap.add_argument("--stress-seconds", type=int, help="a stress run (the guest workload)")
    ap.add_argument("--smp", type=int, default=2)
    ap.add_argument("--timeout", type=int, default=300, help="without --stress-seconds")
    ap.add_argument("--kcsan", action="store_true", help="KCSAN reports are expected")
    args = ap.parse_args(argv)
    expected = KCSAN_EXPECTED if args.kcsan else ()
    try:
        bz = args.kernel or ensure_pristine_kernel()["bzimage"]
        initrd = build_initramfs()
    except (UserError, BuildError) as e:
        print("lkmm-mark: error: %s" % e, file=sys.stderr)
        return 2
    if args.stress_seconds:
        res = stress_guest(bz, initrd, args.stress_seconds, args.smp, "standalone",
                           expected=expected)
    else:
        res = run_guest(bz, initrd, "lkmm.mode=" + args.mode, smp=args.smp, mem=1024,
                        timeout=args.timeout, expected=expected)
    print(describe(res))
    return 0 if res.ok() else 1


if __name__ == "__main__":
    sys.exit(main())
