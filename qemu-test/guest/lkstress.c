// SPDX-License-Identifier: GPL-2.0-only
/*
 * lkstress: guest-side stress and data-check tool for lkmm-mark verify.
 *
 *   lkstress write DIR SECS THREADS MANIFEST
 *	Threads create files of known content (a PRNG stream seeded from the
 *	file's name), in random-sized writes, with fsync/fdatasync/rename and
 *	occasional partial rewrites and deletes.  Every surviving file is listed
 *	in MANIFEST as "path size hash" (FNV-1a 64 of the final content).
 *	Sizes are skewed towards small files (many inline extents).
 *   lkstress verify MANIFEST
 *	Re-read every listed file and compare size and hash.
 *   lkstress fsync DIR SECS THREADS
 *	Threads append to a small set of shared files and fsync them at the
 *	same time, with syncfs() and directory fsync mixed in: many concurrent
 *	log syncs and transaction commits on the same fields.
 *   lkstress sysfs FSDIR SECS THREADS
 *	Half the threads write the writable btrfs or ext4 tunables under
 *	FSDIR (/sys/fs/btrfs/<fsid>, /sys/fs/ext4/<dev>) with valid values,
 *	the other half read every attribute in the tree, all at once.
 *	Original values are restored.
 *   lkstress race DIR SECS THREADS
 *	Cheap system calls on the same few inodes and on the file system from
 *	all threads at once, so that the same fields are touched by several
 *	tasks in the same microseconds: readers (statfs, the btrfs info
 *	ioctls, fstat, GETFLAGS, SEEK_DATA/SEEK_HOLE, FIEMAP, getxattr, pread)
 *	against mutators (small pwrites, fallocate and punch hole, truncate,
 *	setxattr, chmod, utimes, SETFLAGS, fdatasync, create/rename/unlink).
 *	Even threads only read, odd ones mostly mutate.
 *   lkstress race DIR SECS THREADS sync
 *	The same, but every sync step is an fsync or fdatasync and every
 *	thread also makes the slow reads: fallocate, writeback and log syncs
 *	of the same few files at once (the prealloc/nocow races).
 *	The content of these files is not checked; errors are not failures
 *	except when a file cannot be opened.
 *   lkstress pairs DIR SECS
 *	Two threads per shared file, each in a tight loop of one cheap call,
 *	so that one inode field is stored by one task while another loads it
 *	all the time (the pattern that makes sysfs races easy for KCSAN to
 *	see): SETFLAGS against fstat/GETFLAGS (the inode flags), utimes
 *	against chmod (two tasks updating the same delayed inode item),
 *	appends with fdatasync against fstat/SEEK_END (i_size, disk_i_size),
 *	fallocate against synced overwrites of a NOCOW file (PREALLOC flag
 *	against the nocow check), and a subvolume's read-only flag set and
 *	cleared (a commit each time) against GETFLAGS on DIR/sub, a subvolume
 *	the caller creates; a subvolume created, opened and deleted against
 *	fstat() of its open directory (the root's anon_dev); a file and its
 *	directory fsynced against renames, links and unlinks in that
 *	directory (the inode's logged_trans and last_unlink_trans); ranges
 *	preallocated and punched again (the PREALLOC inode flag stored for
 *	every new extent) against fstat/GETFLAGS.  Errors are not failures,
 *	except opening.
 *   lkstress commit DIR FSDIR SECS
 *	DIR is a second, otherwise idle btrfs (FSDIR its /sys/fs/btrfs/<fsid>):
 *	one thread each commits (write + syncfs), fsyncs (log tree), updates
 *	an inode, resizes the device down and up (a data balance now and
 *	then), remounts with another commit interval, writes the label; one
 *	thread each loads the fields these store, in a tight loop: FS_INFO
 *	(generation), DEV_INFO, fstatfs, WAIT_SYNC (last_trans_committed),
 *	fsync of a clean file, the generation and commit_stats sysfs files,
 *	/proc/self/mounts (btrfs_show_options), syncfs (pending changes).
 *
 * Every mode prints "@@LKMM ops <mode> <count>" and exits 0 on success.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/types.h>
#include <sys/xattr.h>
#include <linux/btrfs.h>
#include <linux/fiemap.h>
#include <linux/fs.h>
#include <time.h>
#include <unistd.h>

static double deadline;
static atomic_long ops;
static atomic_int failures;

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

static uint64_t xs(uint64_t *s)
{
	uint64_t x = *s;

	x ^= x << 13;
	x ^= x >> 7;
	x ^= x << 17;
	return *s = x;
}

static uint64_t seed_of(const char *name, uint64_t salt)
{
	uint64_t h = 1469598103934665603ULL ^ salt;

	for (; *name; name++)
		h = (h ^ (unsigned char)*name) * 1099511628211ULL;
	return h ? h : 1;
}

static void fill(unsigned char *buf, size_t len, uint64_t seed)
{
	uint64_t s = seed;
	size_t i;

	for (i = 0; i + 8 <= len; i += 8) {
		uint64_t v = xs(&s);

		memcpy(buf + i, &v, 8);
	}
	for (; i < len; i++)
		buf[i] = (unsigned char)xs(&s);
}

static uint64_t fnv(const unsigned char *p, size_t len)
{
	uint64_t h = 1469598103934665603ULL;
	size_t i;

	for (i = 0; i < len; i++)
		h = (h ^ p[i]) * 1099511628211ULL;
	return h;
}

static void fail(const char *what, const char *path)
{
	fprintf(stderr, "lkstress: %s %s: %s\n", what, path, strerror(errno));
	atomic_fetch_add(&failures, 1);
}

static int write_all(int fd, const unsigned char *p, size_t len, off_t off)
{
	while (len) {
		ssize_t n = pwrite(fd, p, len, off);

		if (n < 0) {
			if (errno == EINTR)
				continue;
			return -1;
		}
		p += n;
		len -= n;
		off += n;
	}
	return 0;
}

/* ---- write / verify ---- */

struct entry {
	char path[300];
	size_t size;
	uint64_t hash;
};

struct wthread {
	pthread_t t;
	int id;
	const char *dir;
	struct entry *ents;
	size_t n, cap, head;
	size_t live;		/* bytes in files still listed */
};

/* Per-thread cap on live data: older files are deleted beyond it. */
#define LIVE_CAP (96UL * 1024 * 1024)

static size_t pick_size(uint64_t *s)
{
	unsigned r = xs(s) % 100;

	if (r < 50)
		return xs(s) % 3000;		/* inline extents */
	if (r < 85)
		return xs(s) % 65536;
	if (r < 98)
		return xs(s) % (512 * 1024);
	return xs(s) % (4 * 1024 * 1024);
}

static void *writer(void *arg)
{
	struct wthread *w = arg;
	uint64_t s = 0x9e3779b97f4a7c15ULL * (w->id + 1);
	unsigned char *buf = malloc(4 * 1024 * 1024);
	char sub[200], tmp[320], path[300];
	long n = 0;

	snprintf(sub, sizeof(sub), "%s/w%d", w->dir, w->id);
	if (mkdir(sub, 0755) && errno != EEXIST) {
		fail("mkdir", sub);
		return NULL;
	}
	while (now() < deadline) {
		size_t size = pick_size(&s), off = 0;
		unsigned r = xs(&s) % 16;
		int fd;

		snprintf(path, sizeof(path), "%s/d%ld/f%ld", sub, n % 32, n);
		snprintf(tmp, sizeof(tmp), "%s/d%ld", sub, n % 32);
		mkdir(tmp, 0755);
		snprintf(tmp, sizeof(tmp), "%s.tmp", path);
		fill(buf, size, seed_of(path, 0));
		fd = open(tmp, O_CREAT | O_TRUNC | O_WRONLY, 0644);
		if (fd < 0) {
			fail("open", tmp);
			break;
		}
		while (off < size) {
			size_t chunk = 1 + xs(&s) % 131072;

			if (chunk > size - off)
				chunk = size - off;
			if (write_all(fd, buf + off, chunk, off)) {
				fail("write", tmp);
				break;
			}
			off += chunk;
			if (xs(&s) % 8 == 0)
				fdatasync(fd);
		}
		if (size > 4096 && r < 4) {
			/* partial rewrite in the middle: COW of a written extent */
			size_t a = xs(&s) % (size / 2), len = 1 + xs(&s) % (size - a);

			fill(buf + a, len, seed_of(path, 1));
			if (write_all(fd, buf + a, len, a))
				fail("rewrite", tmp);
		}
		if (r < 12 && fsync(fd))
			fail("fsync", tmp);
		close(fd);
		if (rename(tmp, path)) {
			fail("rename", tmp);
			break;
		}
		if (r == 13) {
			/* delete this one again */
			unlink(path);
		} else {
			if (w->n == w->cap) {
				w->cap = w->cap ? 2 * w->cap : 1024;
				w->ents = realloc(w->ents, w->cap * sizeof(*w->ents));
			}
			snprintf(w->ents[w->n].path, sizeof(w->ents[w->n].path), "%s", path);
			w->ents[w->n].size = size;
			w->ents[w->n].hash = fnv(buf, size);
			w->n++;
			w->live += size;
			while (w->live > LIVE_CAP && w->head < w->n) {
				struct entry *e = &w->ents[w->head++];

				if (unlink(e->path))
					fail("unlink", e->path);
				w->live -= e->size;
				e->size = (size_t)-1;
			}
		}
		if (r == 14) {
			snprintf(tmp, sizeof(tmp), "%s/d%ld", sub, n % 32);
			fd = open(tmp, O_RDONLY | O_DIRECTORY);
			if (fd >= 0) {
				fsync(fd);
				close(fd);
			}
		}
		n++;
		atomic_fetch_add(&ops, 1);
	}
	free(buf);
	return NULL;
}

static int do_write(const char *dir, int secs, int nthreads, const char *manifest)
{
	struct wthread *w = calloc(nthreads, sizeof(*w));
	FILE *m;
	long files = 0;
	int i;
	size_t j;

	deadline = now() + secs;
	for (i = 0; i < nthreads; i++) {
		w[i].id = i;
		w[i].dir = dir;
		pthread_create(&w[i].t, NULL, writer, &w[i]);
	}
	m = fopen(manifest, "w");
	if (!m) {
		perror(manifest);
		return 1;
	}
	for (i = 0; i < nthreads; i++) {
		pthread_join(w[i].t, NULL);
		for (j = w[i].head; j < w[i].n; j++, files++)
			fprintf(m, "%s %zu %016llx\n", w[i].ents[j].path, w[i].ents[j].size,
				(unsigned long long)w[i].ents[j].hash);
	}
	fclose(m);
	printf("@@LKMM ops write %ld files %ld failures %d\n", (long)ops, files, failures);
	return failures ? 1 : 0;
}

static int do_verify(const char *manifest)
{
	FILE *m = fopen(manifest, "r");
	char path[300];
	size_t size;
	unsigned long long hash;
	unsigned char *buf = malloc(4 * 1024 * 1024 + 1);
	long good = 0, bad = 0;

	if (!m) {
		perror(manifest);
		return 1;
	}
	while (fscanf(m, "%299s %zu %llx", path, &size, &hash) == 3) {
		int fd = open(path, O_RDONLY);
		ssize_t got = 0, n;

		if (fd < 0) {
			printf("@@LKMM baddata %s missing: %s\n", path, strerror(errno));
			bad++;
			continue;
		}
		while ((n = read(fd, buf + got, 4 * 1024 * 1024 + 1 - got)) > 0)
			got += n;
		close(fd);
		if (n < 0) {
			printf("@@LKMM baddata %s read error: %s\n", path, strerror(errno));
			bad++;
		} else if ((size_t)got != size) {
			printf("@@LKMM baddata %s size %zd expected %zu\n", path, got, size);
			bad++;
		} else if (fnv(buf, got) != hash) {
			printf("@@LKMM baddata %s content hash mismatch\n", path);
			bad++;
		} else {
			good++;
		}
	}
	fclose(m);
	printf("@@LKMM verified %ld bad %ld\n", good, bad);
	return bad || !good ? 1 : 0;
}

/* ---- fsync storm ---- */

static const char *fsdir;

static void *fsyncer(void *arg)
{
	long id = (long)arg;
	uint64_t s = 77 + id;
	unsigned char buf[8192];
	char path[300];
	int fds[4], i;

	for (i = 0; i < 4; i++) {
		snprintf(path, sizeof(path), "%s/shared%d", fsdir, i);
		fds[i] = open(path, O_CREAT | O_WRONLY | O_APPEND, 0644);
		if (fds[i] < 0) {
			fail("open", path);
			return NULL;
		}
	}
	memset(buf, 'a' + id % 26, sizeof(buf));
	while (now() < deadline) {
		int fd = fds[xs(&s) % 4];
		unsigned r = xs(&s) % 32;

		if (write(fd, buf, 1 + xs(&s) % sizeof(buf)) < 0)
			fail("append", fsdir);
		if (r < 20)
			fsync(fd);
		else if (r < 28)
			fdatasync(fd);
		else if (r < 30)
			syncfs(fd);
		else {
			/* small file + dir fsync: new inode in the log */
			int dfd, nfd;

			snprintf(path, sizeof(path), "%s/t%ld_%ld", fsdir, id, (long)(xs(&s) % 64));
			nfd = open(path, O_CREAT | O_TRUNC | O_WRONLY, 0644);
			if (nfd >= 0) {
				if (write(nfd, buf, 100) < 0)
					fail("write", path);
				fsync(nfd);
				close(nfd);
			}
			dfd = open(fsdir, O_RDONLY | O_DIRECTORY);
			if (dfd >= 0) {
				fsync(dfd);
				close(dfd);
			}
		}
		if (xs(&s) % 64 == 0 || lseek(fd, 0, SEEK_END) > 4 * 1024 * 1024) {
			/* keep the shared files bounded */
			if (ftruncate(fd, 0))
				fail("truncate", fsdir);
		}
		atomic_fetch_add(&ops, 1);
	}
	for (i = 0; i < 4; i++)
		close(fds[i]);
	return NULL;
}

static int do_fsync(const char *dir, int secs, int nthreads)
{
	pthread_t *t = calloc(nthreads, sizeof(*t));
	long i;

	fsdir = dir;
	deadline = now() + secs;
	for (i = 0; i < nthreads; i++)
		pthread_create(&t[i], NULL, fsyncer, (void *)i);
	for (i = 0; i < nthreads; i++)
		pthread_join(t[i], NULL);
	printf("@@LKMM ops fsync %ld failures %d\n", (long)ops, failures);
	return failures ? 1 : 0;
}

/* ---- sysfs tunables ---- */

struct tunable {
	char path[512];
	char orig[128];
	const char *vals[4];
};

static struct tunable tun[64];
static int ntun;
static char attrs[512][512];
static int nattrs;
/* attributes whose show() reads fields that the file system changes all the
 * time (generation, block group usage, discard counters): read half of the
 * time.  commit_stats is read at the rate of the others: as a hot attribute
 * its one race took three quarters of the KCSAN reports of a run. */
static int hot[512];
static int nhot;
static const char *const hot_names[] = {
	"generation", "used_bytes", "total_bytes", "discard_bitmap_bytes",
	"discard_extent_bytes", "discardable_bytes", "discardable_extents", "disk_used",
	"bytes_used", "bytes_may_use", "bytes_pinned", "bytes_reserved", "exclusive_operation",
	NULL
};

static void add_tunable(const char *path, const char *a, const char *b, const char *c)
{
	int fd = open(path, O_RDONLY);
	ssize_t n;
	struct tunable *t;

	if (fd < 0 || ntun == 64)
		return;
	t = &tun[ntun];
	n = read(fd, t->orig, sizeof(t->orig) - 1);
	close(fd);
	if (n <= 0)
		return;
	t->orig[n] = 0;
	/* read_policy shows "[pid]": restore the bare word */
	if (t->orig[0] == '[') {
		char *e = strchr(t->orig, ']');

		memmove(t->orig, t->orig + 1, strlen(t->orig));
		if (e)
			*(e - 1) = 0;
	}
	snprintf(t->path, sizeof(t->path), "%s", path);
	t->vals[0] = a;
	t->vals[1] = b;
	t->vals[2] = c;
	t->vals[3] = t->orig;
	ntun++;
}

static void walk(const char *dir, int depth)
{
	DIR *d = opendir(dir);
	struct dirent *e;

	if (!d)
		return;
	while ((e = readdir(d))) {
		char p[512];
		struct stat st;

		if (e->d_name[0] == '.')
			continue;
		snprintf(p, sizeof(p), "%s/%s", dir, e->d_name);
		if (lstat(p, &st))
			continue;
		if (S_ISDIR(st.st_mode) && depth < 4)
			walk(p, depth + 1);
		else if (S_ISREG(st.st_mode) && (st.st_mode & 0444) && nattrs < 512) {
			int i;

			for (i = 0; hot_names[i]; i++)
				if (!strcmp(e->d_name, hot_names[i]))
					hot[nhot++] = nattrs;
			snprintf(attrs[nattrs++], sizeof(attrs[0]), "%s", p);
		}
	}
	closedir(d);
}

static void *sysfs_writer(void *arg)
{
	uint64_t s = 1234 + (long)arg;

	while (now() < deadline && ntun) {
		struct tunable *t = &tun[xs(&s) % ntun];
		const char *v = t->vals[xs(&s) % 4];
		int fd;

		/* its show/store race is found in every run and, written at
		 * the rate of the others, took most of the reports (and the
		 * console time) of a run: write it seldom */
		if (strstr(t->path, "commit_stats") && xs(&s) % 32)
			continue;

		if (!v)
			v = t->orig;
		fd = open(t->path, O_WRONLY);
		if (fd >= 0) {
			/* EINVAL/EBUSY are fine: the value is what races */
			if (write(fd, v, strlen(v)) < 0 && errno != EINVAL && errno != EBUSY &&
			    errno != EPERM)
				fail("write", t->path);
			close(fd);
		}
		atomic_fetch_add(&ops, 1);
	}
	return NULL;
}

static void *sysfs_reader(void *arg)
{
	uint64_t s = 4321 + (long)arg;
	char buf[8192];

	while (now() < deadline && nattrs) {
		const char *p = nhot && xs(&s) % 2 ? attrs[hot[xs(&s) % nhot]] :
			attrs[xs(&s) % nattrs];
		int fd = open(p, O_RDONLY);

		if (fd >= 0) {
			if (read(fd, buf, sizeof(buf)) < 0 && errno != EINVAL && errno != EPERM &&
			    errno != EACCES && errno != EIO)
				fail("read", p);
			close(fd);
		}
		atomic_fetch_add(&ops, 1);
	}
	return NULL;
}

static int do_sysfs(const char *fs, int secs, int nthreads)
{
	static const char *types[] = { "data", "metadata", "system" };
	pthread_t *t = calloc(nthreads, sizeof(*t));
	char p[512];
	long i;

	for (i = 0; i < 3; i++) {
		snprintf(p, sizeof(p), "%s/allocation/%s/bg_reclaim_threshold", fs, types[i]);
		add_tunable(p, "0", "50", "90");
		snprintf(p, sizeof(p), "%s/allocation/%s/chunk_size", fs, types[i]);
		add_tunable(p, "268435456", "536870912", NULL);
	}
	snprintf(p, sizeof(p), "%s/bg_reclaim_threshold", fs);
	add_tunable(p, "0", "60", "90");
	snprintf(p, sizeof(p), "%s/discard/iops_limit", fs);
	add_tunable(p, "0", "10", "1000");
	snprintf(p, sizeof(p), "%s/discard/kbps_limit", fs);
	add_tunable(p, "0", "100", "100000");
	snprintf(p, sizeof(p), "%s/discard/max_discard_size", fs);
	add_tunable(p, "1048576", "67108864", NULL);
	snprintf(p, sizeof(p), "%s/read_policy", fs);
	add_tunable(p, "pid", NULL, NULL);
	snprintf(p, sizeof(p), "%s/commit_stats", fs);
	add_tunable(p, "0", NULL, NULL);
	snprintf(p, sizeof(p), "%s/label", fs);
	add_tunable(p, "lkmm", "lkmm-verify", NULL);
	for (i = 1; i <= 4; i++) {
		snprintf(p, sizeof(p), "%s/devinfo/%ld/scrub_speed_max", fs, i);
		add_tunable(p, "0", "10485760", "104857600");
	}
	/* ext4 (FSDIR /sys/fs/ext4/<dev>): the block allocator's tunables,
	 * which allocations read without a lock */
	snprintf(p, sizeof(p), "%s/mb_stream_req", fs);
	add_tunable(p, "8", "16", "32");
	snprintf(p, sizeof(p), "%s/mb_group_prealloc", fs);
	add_tunable(p, "256", "512", "1024");
	snprintf(p, sizeof(p), "%s/mb_min_to_scan", fs);
	add_tunable(p, "5", "10", "20");
	snprintf(p, sizeof(p), "%s/mb_order2_req", fs);
	add_tunable(p, "2", "3", NULL);
	snprintf(p, sizeof(p), "%s/inode_readahead_blks", fs);
	add_tunable(p, "16", "32", "64");
	snprintf(p, sizeof(p), "%s/extent_max_zeroout_kb", fs);
	add_tunable(p, "16", "32", "64");
	/* xfs (FSDIR /sys/fs/xfs/<dev>): the metadata error configuration,
	 * which the buffer I/O completion reads, and the global sync interval
	 * the log worker loads */
	snprintf(p, sizeof(p), "%s/error/fail_at_unmount", fs);
	add_tunable(p, "0", "1", NULL);
	snprintf(p, sizeof(p), "%s/error/metadata/default/max_retries", fs);
	add_tunable(p, "-1", "0", "5");
	snprintf(p, sizeof(p), "%s/error/metadata/default/retry_timeout_seconds", fs);
	add_tunable(p, "-1", "0", "10");
	snprintf(p, sizeof(p), "%s/error/metadata/EIO/max_retries", fs);
	add_tunable(p, "-1", "0", "5");
	if (strstr(fs, "/fs/xfs/"))
		add_tunable("/proc/sys/fs/xfs/xfssyncd_centisecs", "500", "1000", "3000");
	/* commit_stats only accepts 0; its show side is the interesting one */
	for (i = 0; i < ntun; i++)
		if (strstr(tun[i].path, "commit_stats"))
			tun[i].vals[3] = "0";
	walk(fs, 0);
	fprintf(stderr, "lkstress: sysfs: %d tunables, %d attributes\n", ntun, nattrs);
	deadline = now() + secs;
	for (i = 0; i < nthreads; i++)
		pthread_create(&t[i], NULL, i % 2 ? sysfs_reader : sysfs_writer, (void *)i);
	for (i = 0; i < nthreads; i++)
		pthread_join(t[i], NULL);
	for (i = 0; i < ntun; i++) {
		int fd = open(tun[i].path, O_WRONLY);

		if (fd >= 0) {
			if (write(fd, tun[i].vals[3], strlen(tun[i].vals[3])) < 0)
				fprintf(stderr, "lkstress: restore %s: %s\n", tun[i].path,
					strerror(errno));
			close(fd);
		}
	}
	printf("@@LKMM ops sysfs %ld tunables %d attrs %d failures %d\n", (long)ops, ntun, nattrs,
	       failures);
	return failures || !ntun ? 1 : 0;
}

/* ---- many tasks on the same fields ---- */

#define RFILES 4

static const char *rdir;
static int rsync_mode;		/* "race DIR SECS THREADS sync": fsync at every
				 * sync step and slow readers everywhere */

static void race_reader(uint64_t *s, int dfd, int *fds, char *buf, int quick_only)
{
	int fd = fds[xs(s) % RFILES];
	/* calls that can wait behind the inode lock, writeback or chunk_mutex
	 * (statfs, SEEK_DATA, FIEMAP, pread) only from the mutating threads:
	 * the reading threads must never sleep long */
	static const unsigned char quick[] = { 1, 2, 3, 4, 5, 6, 9, 11 };
	unsigned r = quick_only ? quick[xs(s) % sizeof(quick)] : xs(s) % 12;
	struct statfs sfs;
	struct stat st;
	union {
		struct btrfs_ioctl_fs_info_args fi;
		struct btrfs_ioctl_dev_info_args di;
		struct btrfs_ioctl_get_dev_stats ds;
		struct {
			struct btrfs_ioctl_space_args a;
			struct btrfs_ioctl_space_info sp[16];
		} sp;
		struct {
			struct fiemap fm;
			struct fiemap_extent ex[8];
		} fm;
	} u;
	int flags;

	memset(&u, 0, sizeof(u));
	switch (r) {
	case 0:
		fstatfs(dfd, &sfs);
		break;
	case 1:
		u.fi.flags = BTRFS_FS_INFO_FLAG_GENERATION | BTRFS_FS_INFO_FLAG_CSUM_INFO;
		ioctl(dfd, BTRFS_IOC_FS_INFO, &u.fi);
		break;
	case 2:
		u.sp.a.space_slots = 16;
		ioctl(dfd, BTRFS_IOC_SPACE_INFO, &u.sp);
		break;
	case 3:
		u.di.devid = 1 + xs(s) % 2;
		ioctl(dfd, BTRFS_IOC_DEV_INFO, &u.di);
		break;
	case 4:
		u.ds.devid = 1 + xs(s) % 2;
		u.ds.nr_items = BTRFS_DEV_STAT_VALUES_MAX;
		ioctl(dfd, BTRFS_IOC_GET_DEV_STATS, &u.ds);
		break;
	case 5:
		fstat(fd, &st);
		break;
	case 6:
		ioctl(fd, FS_IOC_GETFLAGS, &flags);
		break;
	case 7:
		lseek(fd, xs(s) % (1 << 20), xs(s) % 2 ? SEEK_DATA : SEEK_HOLE);
		break;
	case 8:
		u.fm.fm.fm_length = ~0ULL;
		u.fm.fm.fm_extent_count = 8;
		ioctl(fd, FS_IOC_FIEMAP, &u.fm);
		break;
	case 9:
		fgetxattr(fd, "user.lk", buf, 64);
		break;
	case 10:
		pread(fd, buf, 4096, xs(s) % (1 << 20));
		break;
	default:
		ioctl(fd, FS_IOC_GETVERSION, &flags);
		break;
	}
}

static void race_mutator(uint64_t *s, long id, int dfd, int *fds, char *buf)
{
	int k = xs(s) % RFILES, fd = fds[k];
	unsigned r = xs(s) % 14;
	off_t off = (xs(s) % 256) * 4096;
	char path[300], path2[300];
	struct timespec ts[2] = { { 0, UTIME_NOW }, { 0, UTIME_NOW } };
	int flags, nfd;

	switch (r) {
	case 0:
	case 1:
		pwrite(fd, buf, 1 + xs(s) % 8192, off);
		break;
	case 2:
		fallocate(fd, FALLOC_FL_KEEP_SIZE, off, 65536);
		break;
	case 3:
		fallocate(fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, off, 8192);
		break;
	case 4:
		ftruncate(fd, xs(s) % (1 << 20));
		break;
	case 5:
		snprintf(path, sizeof(path), "%ld", (long)xs(s));
		fsetxattr(fd, "user.lk", path, strlen(path), 0);
		break;
	case 6:
		fchmod(fd, 0600 | (xs(s) % 2 ? 044 : 0));
		break;
	case 7:
		futimens(fd, ts);
		break;
	case 8:
		if (ioctl(fd, FS_IOC_GETFLAGS, &flags) == 0) {
			flags ^= FS_NODUMP_FL;
			ioctl(fd, FS_IOC_SETFLAGS, &flags);
		}
		break;
	case 9:
	case 10:
		/* fsync holds the inode lock for long under TCG: seldom,
		 * except in sync mode, where fsync, fallocate and writeback
		 * of the same few files are what races */
		if (rsync_mode || xs(s) % 8 == 0)
			(r == 9 ? fdatasync : fsync)(fd);
		else
			pwrite(fd, buf, 512, off);
		break;
	case 11:
		snprintf(path, sizeof(path), "%s/n%ld_%d", rdir, id, (int)(xs(s) % 16));
		snprintf(path2, sizeof(path2), "%s/m%ld_%d", rdir, id, (int)(xs(s) % 16));
		nfd = open(path, O_CREAT | O_WRONLY | O_TRUNC, 0644);
		if (nfd >= 0) {
			if (write(nfd, buf, 1 + xs(s) % 3000) < 0)
				break;
			close(nfd);
			rename(path, path2);
		}
		break;
	case 12:
		snprintf(path2, sizeof(path2), "%s/m%ld_%d", rdir, id, (int)(xs(s) % 16));
		unlink(path2);
		break;
	default:
		pwrite(fd, buf, 100, lseek(fd, 0, SEEK_END) % (1 << 20));
		break;
	}
}

static void *racer(void *arg)
{
	long id = (long)arg;
	uint64_t s = 0x5bd1e995ULL * (id + 3);
	char buf[8192], path[300];
	int fds[RFILES], i, dfd = open(rdir, O_RDONLY | O_DIRECTORY);

	if (dfd < 0) {
		fail("open", rdir);
		return NULL;
	}
	for (i = 0; i < RFILES; i++) {
		snprintf(path, sizeof(path), "%s/r%d", rdir, i);
		fds[i] = open(path, O_CREAT | O_RDWR, 0644);
		if (fds[i] < 0) {
			fail("open", path);
			return NULL;
		}
	}
	memset(buf, 'r', sizeof(buf));
	while (now() < deadline) {
		int j;

		/* even threads only read (they never block in fsync or a
		 * transaction), odd threads mutate with a few reads between */
		for (j = 0; j < (id % 2 ? 2 : 16); j++)
			race_reader(&s, dfd, fds, buf, !rsync_mode && !(id % 2));
		if (id % 2)
			race_mutator(&s, id, dfd, fds, buf);
		atomic_fetch_add(&ops, id % 2 ? 3 : 16);
	}
	for (i = 0; i < RFILES; i++)
		close(fds[i]);
	close(dfd);
	return NULL;
}

static int do_race(const char *dir, int secs, int nthreads)
{
	pthread_t *t = calloc(nthreads, sizeof(*t));
	long i;

	rdir = dir;
	deadline = now() + secs;
	for (i = 0; i < nthreads; i++)
		pthread_create(&t[i], NULL, racer, (void *)i);
	for (i = 0; i < nthreads; i++)
		pthread_join(t[i], NULL);
	printf("@@LKMM ops %s %ld failures %d\n", rsync_mode ? "racesync" : "race",
	       (long)ops, failures);
	return failures ? 1 : 0;
}

/* ---- two tasks, one field ---- */

#define NPAIRS 8

static const char *pdir;
static atomic_int pair_subfd = -1;	/* kind 5: the live subvolume's fd */

struct pair_arg {
	int kind;		/* which pair */
	int side;		/* 0 stores, 1 loads (or the second store) */
	int fd;
};

static void *pair_thread(void *arg)
{
	struct pair_arg *a = arg;
	uint64_t s = 77 + a->kind * 2 + a->side;
	char buf[4096];
	struct timespec ts[2] = { { 0, UTIME_NOW }, { 0, UTIME_NOW } };
	struct stat st;
	long n = 0;
	int flags;

	memset(buf, 'p', sizeof(buf));
	while (now() < deadline) {
		switch (a->kind * 2 + a->side) {
		case 0:		/* inode flags: store */
			if (ioctl(a->fd, FS_IOC_GETFLAGS, &flags) == 0) {
				flags ^= FS_NODUMP_FL;
				ioctl(a->fd, FS_IOC_SETFLAGS, &flags);
			}
			break;
		case 1:		/* inode flags: load */
			if (n % 2)
				fstat(a->fd, &st);
			else
				ioctl(a->fd, FS_IOC_GETFLAGS, &flags);
			break;
		case 2:		/* the same inode item from two tasks */
			futimens(a->fd, ts);
			break;
		case 3:
			fchmod(a->fd, 0600 | (n % 2 ? 044 : 0));
			break;
		case 4:		/* size: appends, now and then synced */
			if (pwrite(a->fd, buf, 1 + xs(&s) % 2048, lseek(a->fd, 0, SEEK_END)) < 0)
				break;
			if (n % 16 == 0)
				fdatasync(a->fd);
			if (n % 512 == 511 && ftruncate(a->fd, 0) < 0)
				break;
			break;
		case 5:
			if (n % 2)
				fstat(a->fd, &st);
			else
				lseek(a->fd, 0, SEEK_END);
			break;
		case 6:		/* NOCOW file: preallocate ranges ... */
			fallocate(a->fd, 0, (xs(&s) % 64) * 65536, 65536);
			if (n % 64 == 63)
				fallocate(a->fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, 0,
					  64 * 65536);
			break;
		case 7:		/* ... while another task overwrites them (synced
				 * now and then: the nocow check runs at writeback) */
			if (pwrite(a->fd, buf, 4096, (xs(&s) % 1024) * 4096) > 0 && n % 4 == 0)
				fdatasync(a->fd);
			break;
		case 8:		/* a subvolume's read-only flag: set and cleared ... */
			if (a->fd >= 0) {
				uint64_t f = n % 2 ? BTRFS_SUBVOL_RDONLY : 0;

				ioctl(a->fd, BTRFS_IOC_SUBVOL_SETFLAGS, &f);
			}
			break;
		case 9:		/* ... while another task reads it */
			if (a->fd >= 0) {
				uint64_t f;

				ioctl(a->fd, BTRFS_IOC_SUBVOL_GETFLAGS, &f);
			}
			break;
		case 10: {	/* a subvolume created and deleted while open ... */
			struct btrfs_ioctl_vol_args va;
			char path[300];
			int sfd;

			memset(&va, 0, sizeof(va));
			snprintf(va.name, sizeof(va.name), "gone");
			if (ioctl(a->fd, BTRFS_IOC_SUBVOL_CREATE, &va))
				break;
			snprintf(path, sizeof(path), "%s/pd/gone", pdir);
			sfd = open(path, O_RDONLY | O_DIRECTORY);
			atomic_store(&pair_subfd, sfd);
			for (int k = 0; k < 64; k++)
				fstat(sfd, &st);
			ioctl(a->fd, BTRFS_IOC_SNAP_DESTROY, &va);
			atomic_store(&pair_subfd, -1);
			if (sfd >= 0)
				close(sfd);
			break;
		}
		case 11: {	/* ... and stat'ed all the time (root->anon_dev) */
			int sfd = atomic_load(&pair_subfd);

			if (sfd >= 0)
				fstat(sfd, &st);
			break;
		}
		case 12: {	/* a directory and a file in it logged ... */
			char path[300];

			snprintf(path, sizeof(path), "%s/pl/f%d", pdir, (int)(n % 8));
			int fd = open(path, O_CREAT | O_WRONLY, 0644);

			if (fd >= 0) {
				if (pwrite(fd, buf, 512, 0) > 0)
					fsync(fd);
				close(fd);
			}
			fsync(a->fd);
			break;
		}
		case 13: {	/* ... while renames, links and unlinks go on in it
				 * (logged_trans, last_unlink_trans) */
			char p1[300], p2[300];

			snprintf(p1, sizeof(p1), "%s/pl/f%d", pdir, (int)(n % 8));
			snprintf(p2, sizeof(p2), "%s/pl/l%d", pdir, (int)(n % 8));
			if (n % 2) {
				if (link(p1, p2) == 0)
					unlink(p2);
			} else if (rename(p1, p2) == 0) {
				rename(p2, p1);
			}
			break;
		}
		case 14:	/* preallocation: every new extent stores the
				 * PREALLOC inode flag ... */
			fallocate(a->fd, FALLOC_FL_KEEP_SIZE, (n % 64) * 65536, 65536);
			if (n % 64 == 63)
				fallocate(a->fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, 0,
					  64 * 65536);
			break;
		default:	/* ... while another task loads the flags */
			if (n % 2)
				fstat(a->fd, &st);
			else
				ioctl(a->fd, FS_IOC_GETFLAGS, &flags);
			break;
		}
		n++;
		atomic_fetch_add(&ops, 1);
	}
	return NULL;
}

static int do_pairs(const char *dir, int secs)
{
	pthread_t t[2 * NPAIRS];
	struct pair_arg args[2 * NPAIRS];
	int fds[NPAIRS], i;
	char path[300];

	pdir = dir;
	for (i = 0; i < NPAIRS; i++) {
		if (i >= 4 && i < 7)
			continue;
		snprintf(path, sizeof(path), "%s/p%d", pdir, i);
		fds[i] = open(path, O_CREAT | O_RDWR, 0644);
		if (fds[i] < 0) {
			fail("open", path);
			return 1;
		}
	}
	/* pair 4 works on a subvolume the init script created (none: that
	 * pair idles); pairs 5 and 6 on directories of their own */
	snprintf(path, sizeof(path), "%s/sub", pdir);
	fds[4] = open(path, O_RDONLY | O_DIRECTORY);
	if (fds[4] < 0)
		fprintf(stderr, "lkstress: pairs: no subvolume %s\n", path);
	for (i = 5; i < 7; i++) {
		snprintf(path, sizeof(path), "%s/%s", pdir, i == 5 ? "pd" : "pl");
		mkdir(path, 0755);
		fds[i] = open(path, O_RDONLY | O_DIRECTORY);
		if (fds[i] < 0) {
			fail("open", path);
			return 1;
		}
	}
	/* NOCOW must be set while the file is empty */
	{
		int flags = 0;

		if (ioctl(fds[3], FS_IOC_GETFLAGS, &flags) == 0) {
			flags |= FS_NOCOW_FL;
			if (ioctl(fds[3], FS_IOC_SETFLAGS, &flags))
				fprintf(stderr, "lkstress: pairs: NOCOW not set: %s\n",
					strerror(errno));
		}
	}
	deadline = now() + secs;
	for (i = 0; i < 2 * NPAIRS; i++) {
		args[i].kind = i / 2;
		args[i].side = i % 2;
		args[i].fd = fds[i / 2];
		pthread_create(&t[i], NULL, pair_thread, &args[i]);
	}
	for (i = 0; i < 2 * NPAIRS; i++)
		pthread_join(t[i], NULL);
	if (fds[4] >= 0) {
		uint64_t f = 0;

		/* leave the subvolume writable */
		if (ioctl(fds[4], BTRFS_IOC_SUBVOL_SETFLAGS, &f))
			fprintf(stderr, "lkstress: pairs: subvolume flags not reset: %s\n",
				strerror(errno));
	}
	for (i = 0; i < NPAIRS; i++)
		if (fds[i] >= 0)
			close(fds[i]);
	printf("@@LKMM ops pairs %ld failures %d\n", (long)ops, failures);
	return failures ? 1 : 0;
}

/* ---- a second, otherwise idle file system: commits and their readers ---- */

/*
 * The fields a commit stores once (generation, state, last_trans_committed,
 * the commit stats, root->last_trans, the log tree's transid) change only
 * a few hundred times a run, and so do those a resize or a remount stores
 * (the device's and the super block's total_bytes; mount_opt and
 * commit_interval, read by every path that tests a mount option).  A race
 * on them is seen only when the store meets a watchpoint on a load, so
 * here every such field has a thread of its own that loads it in a tight
 * loop of one cheap call.  On this file system nothing else runs: a commit
 * does not wait for the main file system's dirty data.
 */

#define NCOMMIT 14

static const char *cmdir, *cmfs;
static int cmdirfd;
static atomic_long cmops[NCOMMIT], cmerr[NCOMMIT];
static const char *const cmname[NCOMMIT] = {
	"syncs", "fsyncs", "inode-updates", "resizes", "remounts", "labels", "fs-info",
	"dev-info", "statfs", "wait-sync", "clean-fsyncs", "sysfs", "mounts", "syncfs"
};

static void commit_io(int fd, int kind, long n, char *buf)
{
	struct btrfs_ioctl_vol_args va;
	struct btrfs_ioctl_balance_args ba;

	switch (kind) {
	case 0:		/* commits: a page written, then syncfs() */
		if (pwrite(fd, buf, 4096, (n % 256) * 4096) > 0)
			syncfs(cmdirfd);
		break;
	case 1:		/* log syncs: the first fsync of a transaction adds
			 * the log tree, the others join it */
		if (pwrite(fd, buf, 100, (n % 64) * 100) > 0)
			fsync(fd);
		break;
	case 2:		/* inode updates: transaction starts, the inode's
			 * last_trans and the root's log transid */
		if (n % 4 == 3)
			fchmod(fd, 0600 | (n % 8 == 3 ? 044 : 0));
		else
			futimens(fd, NULL);
		break;
	case 3:		/* device resize down and up, now and then a data
			 * balance (chunks allocated and removed) */
		memset(&va, 0, sizeof(va));
		if (n % 16 == 15) {
			memset(&ba, 0, sizeof(ba));
			ba.flags = BTRFS_BALANCE_DATA;
			if (ioctl(cmdirfd, BTRFS_IOC_BALANCE_V2, &ba))
				atomic_fetch_add(&cmerr[kind], 1);
			break;
		}
		snprintf(va.name, sizeof(va.name), n % 2 ? "1:max" : "1:-64m");
		if (ioctl(cmdirfd, BTRFS_IOC_RESIZE, &va))
			atomic_fetch_add(&cmerr[kind], 1);
		break;
	case 4:		/* remounts: btrfs_parse_options() rewrites
			 * mount_opt and commit_interval */
		if (mount(NULL, cmdir, NULL, MS_REMOUNT, n % 2 ? "commit=5" : "commit=7"))
			atomic_fetch_add(&cmerr[kind], 1);
		break;
	case 5:		/* the label: a pending commit for btrfs_sync_fs() */
		lseek(fd, 0, SEEK_SET);
		if (write(fd, n % 2 ? "q1\n" : "q2\n", 3) < 0) {
			atomic_fetch_add(&cmerr[kind], 1);
			usleep(1000);
		}
		break;
	default:
		break;
	}
}

static void commit_read(int fd, int kind, long n, char *buf)
{
	union {
		struct btrfs_ioctl_fs_info_args fi;
		struct btrfs_ioctl_dev_info_args di;
	} u;
	struct statfs sfs;
	uint64_t transid = 1;

	memset(&u, 0, sizeof(u));
	switch (kind) {
	case 6:		/* generation */
		u.fi.flags = BTRFS_FS_INFO_FLAG_GENERATION;
		ioctl(cmdirfd, BTRFS_IOC_FS_INFO, &u.fi);
		break;
	case 7:		/* device total_bytes, bytes_used */
		u.di.devid = 1;
		ioctl(cmdirfd, BTRFS_IOC_DEV_INFO, &u.di);
		break;
	case 8:		/* super block total_bytes, space and device usage */
		fstatfs(cmdirfd, &sfs);
		break;
	case 9:		/* last_trans_committed: returns at once */
		ioctl(cmdirfd, BTRFS_IOC_WAIT_SYNC, &transid);
		break;
	case 10:	/* fsync of a clean file: generation,
			 * last_trans_committed, nothing to log */
		fsync(fd);
		break;
	case 11: {	/* sysfs: generation and commit_stats */
		char p[512];
		int sfd;

		snprintf(p, sizeof(p), "%s/%s", cmfs, n % 2 ? "generation" : "commit_stats");
		sfd = open(p, O_RDONLY);
		if (sfd >= 0) {
			if (read(sfd, buf, 4096) < 0)
				usleep(1000);
			close(sfd);
		}
		break;
	}
	case 12:	/* btrfs_show_options() of both file systems */
		if (pread(fd, buf, 8192, 0) < 0)
			usleep(1000);
		break;
	default:	/* syncfs: commits when a transaction runs, else
			 * looks at the pending changes */
		syncfs(cmdirfd);
		break;
	}
}

static void *commit_thread(void *arg)
{
	long kind = (long)arg, n = 0;
	char buf[8192], path[600];
	int fd = -1;

	memset(buf, 'c', sizeof(buf));
	switch (kind) {
	case 0: case 1: case 2: case 10:
		snprintf(path, sizeof(path), "%s/c%ld", cmdir, kind);
		fd = open(path, O_CREAT | O_RDWR, 0644);
		if (fd >= 0 && kind == 10) {
			/* written and committed once, then only fsynced */
			if (pwrite(fd, buf, 4096, 0) < 0 || fsync(fd))
				fail("write", path);
			syncfs(cmdirfd);
		}
		break;
	case 5:
		snprintf(path, sizeof(path), "%s/label", cmfs);
		fd = open(path, O_WRONLY);
		break;
	case 12:
		snprintf(path, sizeof(path), "/proc/self/mounts");
		fd = open(path, O_RDONLY);
		break;
	default:
		break;
	}
	if ((kind <= 2 || kind == 5 || kind == 10 || kind == 12) && fd < 0) {
		fail("open", path);
		return NULL;
	}
	while (now() < deadline) {
		if (kind < 6)
			commit_io(fd, kind, n, buf);
		else
			commit_read(fd, kind, n, buf);
		n++;
		atomic_fetch_add(&ops, 1);
	}
	atomic_store(&cmops[kind], n);
	if (fd >= 0)
		close(fd);
	return NULL;
}

static int do_commit(const char *dir, const char *fs, int secs)
{
	pthread_t t[NCOMMIT];
	struct btrfs_ioctl_vol_args va;
	long i;

	cmdir = dir;
	cmfs = fs;
	cmdirfd = open(dir, O_RDONLY | O_DIRECTORY);
	if (cmdirfd < 0) {
		fail("open", dir);
		return 1;
	}
	deadline = now() + secs;
	for (i = 0; i < NCOMMIT; i++)
		pthread_create(&t[i], NULL, commit_thread, (void *)i);
	for (i = 0; i < NCOMMIT; i++)
		pthread_join(t[i], NULL);
	/* leave the device at its full size */
	memset(&va, 0, sizeof(va));
	snprintf(va.name, sizeof(va.name), "1:max");
	if (ioctl(cmdirfd, BTRFS_IOC_RESIZE, &va))
		fprintf(stderr, "lkstress: commit: resize to max: %s\n", strerror(errno));
	close(cmdirfd);
	printf("@@LKMM ops commit %ld failures %d", (long)ops, failures);
	for (i = 0; i < NCOMMIT; i++) {
		printf(" %s %ld", cmname[i], (long)cmops[i]);
		if (cmerr[i])
			printf(" (%ld errors)", (long)cmerr[i]);
	}
	printf("\n");
	return failures ? 1 : 0;
}

int main(int argc, char **argv)
{
	setvbuf(stdout, NULL, _IOLBF, 0);
	if (argc == 6 && !strcmp(argv[1], "write"))
		return do_write(argv[2], atoi(argv[3]), atoi(argv[4]), argv[5]);
	if (argc == 3 && !strcmp(argv[1], "verify"))
		return do_verify(argv[2]);
	if (argc == 5 && !strcmp(argv[1], "fsync"))
		return do_fsync(argv[2], atoi(argv[3]), atoi(argv[4]));
	if (argc == 5 && !strcmp(argv[1], "sysfs"))
		return do_sysfs(argv[2], atoi(argv[3]), atoi(argv[4]));
	if ((argc == 5 || (argc == 6 && !strcmp(argv[5], "sync"))) &&
	    !strcmp(argv[1], "race")) {
		rsync_mode = argc == 6;
		return do_race(argv[2], atoi(argv[3]), atoi(argv[4]));
	}
	if (argc == 4 && !strcmp(argv[1], "pairs"))
		return do_pairs(argv[2], atoi(argv[3]));
	if (argc == 5 && !strcmp(argv[1], "commit"))
		return do_commit(argv[2], argv[3], atoi(argv[4]));
	fprintf(stderr, "usage: lkstress write DIR SECS THREADS MANIFEST | verify MANIFEST |\n"
			"       fsync DIR SECS THREADS | sysfs FSDIR SECS THREADS |\n"
			"       race DIR SECS THREADS [sync] | pairs DIR SECS |\n"
			"       commit DIR FSDIR SECS\n");
	return 2;
}
