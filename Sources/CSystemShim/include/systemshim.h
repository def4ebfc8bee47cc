/*
 * systemshim: the C that SnapThumb writes for the system below the image
 * libraries: OpenSSL's digests and RS256 (libssl-dev), and the few Linux calls
 * Swift's Glibc does not export or whose arguments are built by macros (syncfs,
 * renameat2, prctl, mallopt, CPU affinity). Functions that can fail return 0 on
 * success and -1 (with errno, where the call sets it) on failure.
 */
#ifndef SYSTEMSHIM_H
#define SYSTEMSHIM_H

#include <stddef.h>
#include <stdint.h>

/* ==== OpenSSL digests (digest.c): content addresses, request signing, checksum headers, JWT signatures ==== */

/* SHA-256 via OpenSSL's libcrypto (libssl-dev). */
void snap_sha256(const void *data, size_t len, unsigned char out[32]);
/* HMAC-SHA256 of data under key. */
void snap_hmac_sha256(const void *key, size_t key_len, const void *data, size_t len, unsigned char out[32]);

/* MD5 of data (only for Content-MD5 headers, never for addressing). */
void snap_md5(const void *data, size_t len, unsigned char out[16]);

/* RS256 (RSASSA-PKCS1-v1_5 with SHA-256) of data under an RSA private key given as
 * PEM text (PKCS#8 "PRIVATE KEY", as in Google service-account key files, or PKCS#1
 * "RSA PRIVATE KEY"; never an encrypted one). sig has room for *sig_len bytes and
 * gets the signature's length there. 0 on success; -1 when pem holds no usable
 * RSA private key; -2 when signing fails or the signature does not fit. */
int snap_rs256_sign(const char *pem, size_t pem_len, const void *data, size_t len, unsigned char *sig, size_t *sig_len);

/* ==== The process (process.c) ==== */

/* mallopt(M_MMAP_THRESHOLD) and (M_TRIM_THRESHOLD): a fixed threshold also stops glibc raising it. */
void snap_fix_mmap_threshold(int bytes, int trim);
/* Ask the kernel to SIGKILL this process when its parent dies (prctl
 * PR_SET_PDEATHSIG); returns 1 if the parent is already gone. */
int snap_die_with_parent(void);
/* rename(2) that never replaces an existing `to`: renameat2(RENAME_NOREPLACE), or,
 * where the file system does not support it (NFS), a check for `to` then rename.
 * 0, or -1 with errno (EEXIST when `to` exists). */
int snap_rename_noreplace(const char *from, const char *to);
/* The same between two open directories (renameat2 with RENAME_NOREPLACE, or a check then renameat). */
int snap_renameat_noreplace(int from_dir, const char *from, int to_dir, const char *to);
/* renameat2(RENAME_NOREPLACE) alone, with no fallback: a directory moved this way can never
 * replace an empty one. 0, or an errno value (EEXIST; EINVAL or ENOSYS where the file system
 * or the kernel cannot). */
int snap_renameat_exclusive(int from_dir, const char *from, int to_dir, const char *to);
/* Swaps two paths in one step, renameat2(RENAME_EXCHANGE): both exist before and after
 * (a directory and a file may trade places). 0, or -1 with errno (EINVAL where the file
 * system cannot, ENOSYS without renameat2). */
int snap_rename_exchange(const char *a, const char *b);
/* Makes the kernel's OOM killer pick this process first (oom_score_adj 1000). */
void snap_oom_first(void);
/* syncfs(2): one flush of a whole filesystem, for group commits (not exported by Swift's Glibc). */
int snap_syncfs(int fd);
/* The directory `fd` as the top of unrelated hierarchies (FS_TOPDIR_FL, chattr +T): ext4's
 * Orlov allocator then spreads its subdirectories over the disk's groups instead of
 * packing them beside it. Returns 0, or an errno value (ENOTTY/EOPNOTSUPP: the filesystem
 * has no such flag). `top` gets whether the flag is set afterwards. */
int snap_mark_top_directory(int fd, int *top);
/* Whether `fd` has FS_TOPDIR_FL: 1 or 0, or -1 where the filesystem has no flags. */
int snap_is_top_directory(int fd);
/* sched_getaffinity / sched_setaffinity(2) for one thread (tid 0: the caller),
 * with the CPU set as a plain array of `count` flags (cpu_set_t is built by macros
 * that Swift does not import). get returns the number of CPUs written, or -1;
 * set returns 0 or -1, with errno set. */
int snap_get_affinity(int tid, unsigned char *cpus, int count);
int snap_set_affinity(int tid, const unsigned char *cpus, int count);

/* ==== Child processes (spawn.c) ==== */

/* pipe2(O_CLOEXEC) with both ends at descriptor 3 or above: no child inherits them
 * unless given them as a standard stream. 0, or -1 with errno. */
int snap_pipe(int fds[2]);
/* posix_spawn of `path` (no PATH search) whose standard streams are in_fd, out_fd and
 * err_fd (-1: this process's own; -2: /dev/null) and which inherits no other descriptor
 * (closefrom(3) in the child). own_group: in a process group of its own, so that a
 * terminal's ^C or a signal to this process's group does not reach it. envp NULL: this
 * process's environment; directory NULL: this process's working directory (else the child
 * starts in it; a relative `path` is then taken from there). 0 with *pid set, or an errno value. */
int snap_spawn(const char *path, char *const argv[], char *const envp[], const char *directory, int in_fd, int out_fd,
               int err_fd, int own_group, int *pid);
/* Whether child `pid` has ended, without reaping it (waitid WNOWAIT): 1 ended (or not a
 * child any more), 0 still running (only when block is 0), -1 with errno (EINTR). */
int snap_wait_exited(int pid, int block);
/* Reaps an ended child: 0 with its exit code or, when *signaled, its signal; -1 if it
 * has not ended or is not a child. */
int snap_reap(int pid, int *code, int *signaled);

#endif
