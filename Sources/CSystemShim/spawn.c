/* Child processes: pipes that no other child inherits, and a spawn that passes a child
 * nothing but its three standard streams. */
#define _GNU_SOURCE 1
#include "systemshim.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

extern char **environ;

/* A descriptor at 3 or above, still close-on-exec: a pipe end that landed on 0-2 (this
 * process's own stream closed) would be mistaken for that stream in a child. */
static int
above_standard(int fd)
{
	if (fd > 2)
		return fd;
	int moved = fcntl(fd, F_DUPFD_CLOEXEC, 3);
	int saved = errno;
	close(fd);
	errno = saved;
	return moved;
}

int
snap_pipe(int fds[2])
{
	int raw[2];
	if (pipe2(raw, O_CLOEXEC) != 0)
		return -1;
	fds[0] = above_standard(raw[0]);
	fds[1] = above_standard(raw[1]);
	if (fds[0] < 0 || fds[1] < 0) {
		int saved = errno;
		if (fds[0] >= 0) close(fds[0]);
		if (fds[1] >= 0) close(fds[1]);
		errno = saved;
		return -1;
	}
	return 0;
}

/* One standard stream of the child: -1 keeps this process's, -2 is /dev/null, else dup2. */
static int
stream_action(posix_spawn_file_actions_t *actions, int fd, int target)
{
	if (fd == -1)
		return 0;
	if (fd == -2)
		return posix_spawn_file_actions_addopen(actions, target, "/dev/null", target == 0 ? O_RDONLY : O_WRONLY, 0);
	return posix_spawn_file_actions_adddup2(actions, fd, target);
}

int
snap_spawn(const char *path, char *const argv[], char *const envp[], const char *directory, int in_fd, int out_fd,
           int err_fd, int own_group, int *pid)
{
	posix_spawn_file_actions_t actions;
	posix_spawnattr_t attributes;
	int status = posix_spawn_file_actions_init(&actions);
	if (status != 0)
		return status;
	status = posix_spawnattr_init(&attributes);
	if (status != 0) {
		posix_spawn_file_actions_destroy(&actions);
		return status;
	}
	status = stream_action(&actions, in_fd, 0);
	if (status == 0) status = stream_action(&actions, out_fd, 1);
	if (status == 0) status = stream_action(&actions, err_fd, 2);
	/* In the child, after the dup2s: whatever else this process has open, whenever it was
	 * opened and by whichever thread, stays here. (Enumerating descriptors before the
	 * spawn, as Foundation's Process does, misses those another thread opens meanwhile,
	 * and a child holding a sibling's pipe keeps that sibling from ever seeing its end.) */
	if (status == 0) status = posix_spawn_file_actions_addclosefrom_np(&actions, 3);
	if (status == 0 && directory) status = posix_spawn_file_actions_addchdir_np(&actions, directory);
	if (status == 0 && own_group) {
		status = posix_spawnattr_setpgroup(&attributes, 0);
		if (status == 0) status = posix_spawnattr_setflags(&attributes, POSIX_SPAWN_SETPGROUP);
	}
	pid_t child = 0;
	if (status == 0)
		status = posix_spawn(&child, path, &actions, &attributes, argv, envp ? envp : environ);
	posix_spawnattr_destroy(&attributes);
	posix_spawn_file_actions_destroy(&actions);
	if (status == 0)
		*pid = child;
	return status;
}

int
snap_wait_exited(int pid, int block)
{
	siginfo_t info;
	info.si_pid = 0;
	int r = waitid(P_PID, (id_t)pid, &info, WEXITED | WNOWAIT | (block ? 0 : WNOHANG));
	if (r != 0)
		return errno == ECHILD ? 1 : -1;
	return info.si_pid == pid ? 1 : 0;
}

int
snap_reap(int pid, int *code, int *signaled)
{
	int status = 0;
	int r;
	do {
		r = waitpid(pid, &status, WNOHANG);
	} while (r < 0 && errno == EINTR);
	if (r != pid)
		return -1;
	if (WIFSIGNALED(status)) {
		*signaled = 1;
		*code = WTERMSIG(status);
	} else {
		*signaled = 0;
		*code = WEXITSTATUS(status);
	}
	return 0;
}
