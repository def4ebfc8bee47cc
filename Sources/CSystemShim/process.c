/* The process: syncfs, CPU affinity, malloc settings, parent-death signal, rename without replace. */
#define _GNU_SOURCE 1
#include "systemshim.h"

#include <stdlib.h>
#include <malloc.h>
#include <unistd.h>
#include <sched.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/stat.h>
#include <fcntl.h>
#include <errno.h>
#include <sys/ioctl.h>
#include <linux/fs.h>
#include <stdio.h>
#include <string.h>

int snap_syncfs(int fd) { return syncfs(fd); }

int
snap_mark_top_directory(int fd, int *top)
{
	int flags = 0;
	*top = 0;
	if (ioctl(fd, FS_IOC_GETFLAGS, &flags) != 0)
		return errno;
	if (!(flags & FS_TOPDIR_FL)) {
		flags |= FS_TOPDIR_FL;
		if (ioctl(fd, FS_IOC_SETFLAGS, &flags) != 0)
			return errno;
	}
	*top = 1;
	return 0;
}

int
snap_is_top_directory(int fd)
{
	int flags = 0;
	if (ioctl(fd, FS_IOC_GETFLAGS, &flags) != 0)
		return -1;
	return (flags & FS_TOPDIR_FL) ? 1 : 0;
}

int
snap_get_affinity(int tid, unsigned char *cpus, int count)
{
	cpu_set_t set;
	CPU_ZERO(&set);
	if (sched_getaffinity(tid, sizeof set, &set) != 0)
		return -1;
	int n = count < CPU_SETSIZE ? count : CPU_SETSIZE;
	for (int i = 0; i < n; i++)
		cpus[i] = CPU_ISSET(i, &set) ? 1 : 0;
	return n;
}

int
snap_set_affinity(int tid, const unsigned char *cpus, int count)
{
	cpu_set_t set;
	CPU_ZERO(&set);
	for (int i = 0; i < count && i < CPU_SETSIZE; i++)
		if (cpus[i])
			CPU_SET(i, &set);
	return sched_setaffinity(tid, sizeof set, &set);
}

void
snap_fix_mmap_threshold(int bytes, int trim)
{
	mallopt(M_MMAP_THRESHOLD, bytes);
	mallopt(M_TRIM_THRESHOLD, trim);
}

int
snap_die_with_parent(void)
{
	pid_t parent = getppid();
	prctl(PR_SET_PDEATHSIG, SIGKILL);
	/* The parent may have died before the call: then it has been reparented. */
	return getppid() != parent || parent == 1;
}

int
snap_renameat_noreplace(int from_dir, const char *from, int to_dir, const char *to)
{
#ifdef SYS_renameat2
	if (syscall(SYS_renameat2, from_dir, from, to_dir, to, 1 /* RENAME_NOREPLACE */) == 0)
		return 0;
	if (errno != EINVAL && errno != ENOSYS)
		return -1;
#endif
	struct stat st;
	if (fstatat(to_dir, to, &st, AT_SYMLINK_NOFOLLOW) == 0) {
		errno = EEXIST;
		return -1;
	}
	return renameat(from_dir, from, to_dir, to);
}

int
snap_renameat_exclusive(int from_dir, const char *from, int to_dir, const char *to)
{
#ifdef SYS_renameat2
	return syscall(SYS_renameat2, from_dir, from, to_dir, to, 1 /* RENAME_NOREPLACE */) == 0 ? 0 : errno;
#else
	return ENOSYS;
#endif
}

int
snap_rename_noreplace(const char *from, const char *to)
{
	return snap_renameat_noreplace(AT_FDCWD, from, AT_FDCWD, to);
}

int
snap_rename_exchange(const char *a, const char *b)
{
#ifdef SYS_renameat2
	return (int)syscall(SYS_renameat2, AT_FDCWD, a, AT_FDCWD, b, 2 /* RENAME_EXCHANGE */);
#else
	errno = ENOSYS;
	return -1;
#endif
}

void
snap_oom_first(void)
{
	int fd = open("/proc/self/oom_score_adj", O_WRONLY | O_CLOEXEC);
	if (fd < 0)
		return;
	(void) !write(fd, "1000", 4);
	close(fd);
}
