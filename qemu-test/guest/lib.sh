#!/bin/sh
# SPDX-License-Identifier: GPL-2.0-only
# What every guest /init of lkmm-mark verify shares (sourced: '. /lib/lkmm.sh';
# POSIX sh, busybox ash): the kernel command line, the console markers, the
# modes, KCSAN's run-time parameters, background jobs bounded by SECS, and
# the file-system-neutral stress jobs and their report.  The init of each
# file system (policies/<subsystem>/verify.json's guest_dir) makes its file
# systems, starts its jobs and checks them.
export PATH=/bin:/sbin:/usr/bin:/usr/sbin
export HOME=/root LD_LIBRARY_PATH=/lib/x86_64-linux-gnu:/usr/lib/x86_64-linux-gnu

mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev 2>/dev/null
mount -t debugfs debugfs /sys/kernel/debug 2>/dev/null
mount -t tmpfs tmpfs /run
mount -t tmpfs tmpfs /tmp

MODE=stress
SECS=60
KCSAN=
PROFILE=full
for arg in $(cat /proc/cmdline); do
	case "$arg" in
	lkmm.mode=*) MODE=${arg#lkmm.mode=} ;;
	lkmm.secs=*) SECS=${arg#lkmm.secs=} ;;
	lkmm.kcsan=*) KCSAN=${arg#lkmm.kcsan=} ;;
	lkmm.profile=*) PROFILE=${arg#lkmm.profile=} ;;
	esac
done

FAILED=
say() { echo "@@LKMM $*"; }
step() {	# step NAME command...: run, report PASS/FAIL
	name=$1; shift
	if "$@" > /run/step.out 2>&1; then
		say "step $name PASS"
	else
		rc=$?
		tail -n 20 /run/step.out
		say "step $name FAIL rc=$rc"
		FAILED="$FAILED $name"
	fi
}
finish() {
	if [ -z "$FAILED" ]; then
		say "DONE PASS"
	else
		say "DONE FAIL:$FAILED"
	fi
	sync
	poweroff -f
	sleep 2
	reboot -f
}

say "init mode=$MODE profile=$PROFILE secs=$SECS cpus=$(grep -c ^processor /proc/cpuinfo) kernel=$(uname -r)"

case "$MODE" in
pass) finish ;;
fail) say "step deliberate-failure FAIL requested by lkmm.mode=fail"; FAILED=deliberate; finish ;;
crash) echo 1 > /proc/sys/kernel/sysrq; echo c > /proc/sysrq-trigger; sleep 10; finish ;;
hang) while :; do sleep 1000; done ;;
esac

# ---- KCSAN run-time parameters (after boot: large delays at boot stall ACPI)
if [ -n "$KCSAN" ] && [ -d /sys/module/kcsan/parameters ]; then
	for kv in $(echo "$KCSAN" | tr ',' ' '); do
		k=${kv%%:*}; v=${kv#*:}
		echo "$v" > /sys/module/kcsan/parameters/$k && say "kcsan $k=$(cat /sys/module/kcsan/parameters/$k)"
	done
fi

# ---- background jobs, each bounded by SECS from stress_start
stress_start() {
	T0=$(cut -d. -f1 /proc/uptime)
	END=$((T0 + SECS))
}
alive() { [ "$(cut -d. -f1 /proc/uptime)" -lt "$END" ]; }
bg() {		# bg NAME command...: background job, rc into /run/rc.NAME
	name=$1; shift
	( "$@" > /run/out.$name 2>&1; echo $? > /run/rc.$name ) &
}

fioloop() {
	n=0
	while alive; do
		fio --name=fio --directory=/mnt/misc --size=8M --bs=4k --rw=randwrite \
			--ioengine=psync --thread --numjobs=2 --fsync=32 --verify=crc32c \
			--group_reporting --minimal > /run/fio.last 2>&1 || {
			cat /run/fio.last; return 1; }
		n=$((n + 1))
	done
	echo "@@LKMM ops fio $n"
}

# remount the main file system (/mnt) every 3 s, alternating two option
# sets (REMOUNT_A, REMOUNT_B: by default two commit intervals): the option
# parser stores what every path that tests a mount option loads
remounts() {
	n=0
	while alive; do
		sleep 3
		alive || break
		if [ $((n % 2)) -eq 0 ]; then o=${REMOUNT_A:-commit=5}; else o=${REMOUNT_B:-commit=6}; fi
		mount -o remount,$o /mnt || return 1
		n=$((n + 1))
	done
	mount -o remount,${REMOUNT_A:-commit=5} /mnt || return 1
	echo "@@LKMM ops remount $n"
}

# drop the page and inode caches now and then, so that metadata is read
# (and verified) again while commits run
dropcaches() {
	n=0
	while alive; do
		sleep 20
		alive || break
		sync
		echo 3 > /proc/sys/vm/drop_caches || return 1
		n=$((n + 1))
	done
	echo "@@LKMM ops dropcaches $n"
}

# after 'wait': how long the stress ran, and KCSAN's counters
stress_stop() {
	T1=$(cut -d. -f1 /proc/uptime)
	say "stress seconds $((T1 - T0))"
	if [ -r /sys/kernel/debug/kcsan ]; then
		# KCSAN counters: watchpoints set up, races seen, ... (one line)
		say "kcsan-stats $(sed -n 's/^\([a-z_]*\): *\([0-9]*\)$/\1=\2/p' /sys/kernel/debug/kcsan | tr '\n' ' ')"
	fi
}

# each job's result: its ops line and a step stress-NAME
report_jobs() {
	for name in $JOBS; do
		rc=$(cat /run/rc.$name 2>/dev/null || echo missing)
		grep '@@LKMM' /run/out.$name | sed "s/@@LKMM ops write /@@LKMM ops $name /"
		if [ "$rc" = 0 ]; then
			say "step stress-$name PASS"
		else
			tail -n 15 /run/out.$name | grep -v '@@LKMM'
			say "step stress-$name FAIL rc=$rc"
			FAILED="$FAILED stress-$name"
		fi
	done
	bogo=$(sed -n 's/.*stress-ng: metrc: \[[0-9]*\] *\([a-z-]*\)  *\([0-9][0-9]*\)  *[0-9.][0-9.]*  *[0-9.].*/\1=\2/p' /run/out.stressng | tr '\n' ' ')
	say "ops stress-ng $bogo"
}
