/*
 * The bridge's interposer: libc entry points that libibverbs and libmlx5
 * reach the kernel through, routed to the software ConnectX (package
 * model) in the Go half of this library. Its approach (hide the RDMA
 * netlink family so that libibverbs discovers devices in a sysfs tree the
 * shim builds and points SYSFS_PATH at; a /dev/null fd that stands for
 * /dev/infiniband/uverbs0 and reports a character device) follows the
 * oracle's fake kernel (../shared/oracle/src/fakekernel.c). Everything a
 * command means is decided in Go; this file only routes.
 *
 * It calls into Go only for descriptors and mappings the bridge made, so
 * the Go runtime's own mmap and munmap (cgo routes them through libc)
 * never re-enter Go.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <pthread.h>
#include <dirent.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/types.h>
#include <linux/netlink.h>

#include "shim.h"
#include "_cgo_export.h"

#define CDEV_PATH "/dev/infiniband/uverbs0"
#define CDEV_MAJOR 231
#define CDEV_MINOR 192
#define EXPORT __attribute__((visibility("default")))

#define MAX_FD 4096
static volatile uint8_t fd_kind[MAX_FD];

#define MAX_MAPS 1024
static void *maps[MAX_MAPS];
static pthread_mutex_t maps_lock = PTHREAD_MUTEX_INITIALIZER;

static char sysfs_dir[256];
static pthread_once_t sysfs_once = PTHREAD_ONCE_INIT;

#define REAL(name) static __typeof__(name) *real_##name
REAL(open);
REAL(openat);
REAL(close);
REAL(ioctl);
REAL(mmap);
REAL(munmap);
REAL(socket);
REAL(stat);
REAL(fstat);
REAL(write);
REAL(read);
REAL(opendir);

#define RESOLVE(name)                                                   \
	do {                                                            \
		if (!real_##name)                                       \
			real_##name = dlsym(RTLD_NEXT, #name);          \
	} while (0)

void bridge_mark_fd(int fd, int kind)
{
	if (fd >= 0 && fd < MAX_FD)
		fd_kind[fd] = (uint8_t)kind;
}

static int kind_of(int fd)
{
	return fd >= 0 && fd < MAX_FD ? fd_kind[fd] : 0;
}

static void mkdir_p(const char *path)
{
	char tmp[512];
	char *p;

	snprintf(tmp, sizeof(tmp), "%s", path);
	for (p = tmp + 1; *p; p++) {
		if (*p == '/') {
			*p = 0;
			mkdir(tmp, 0755);
			*p = '/';
		}
	}
	mkdir(tmp, 0755);
}

/* The part of the tree libibverbs reads first: the ABI version of the
 * uverbs class. The device's part comes from Go (sysfs_touch). A child
 * process (also one a preloaded wrapper such as timeout(1) starts)
 * inherits SYSFS_PATH; MLX5B_SYSFS_AUTO says the tree is a bridge's, so
 * the child writes it again for itself rather than leaving sysfs alone. */
__attribute__((constructor)) static void shim_init(void)
{
	char d[512];
	FILE *f;
	const char *dir = getenv("MLX5B_SYSFS_DIR");
	const char *sp = getenv("SYSFS_PATH");
	const char *own = getenv("MLX5B_SYSFS_AUTO");

	if (sp && !(own && !strcmp(own, sp)))
		return;
	if (dir)
		snprintf(sysfs_dir, sizeof(sysfs_dir), "%s", dir);
	else if (sp)
		snprintf(sysfs_dir, sizeof(sysfs_dir), "%s", sp);
	else
		snprintf(sysfs_dir, sizeof(sysfs_dir), "/tmp/mlx5b-sysfs-%d", getpid());
	snprintf(d, sizeof(d), "%s/class/infiniband_verbs", sysfs_dir);
	mkdir_p(d);
	snprintf(d, sizeof(d), "%s/class/infiniband_verbs/abi_version", sysfs_dir);
	f = fopen(d, "w");
	if (f) {
		fputs("6\n", f);
		fclose(f);
	}
	setenv("SYSFS_PATH", sysfs_dir, 1);
	setenv("MLX5B_SYSFS_AUTO", sysfs_dir, 1);
}

static void build_sysfs(void)
{
	if (sysfs_dir[0])
		mlx5bSysfs(sysfs_dir);
}

/* The device's part of the tree is written at the first look into it
 * (libibverbs lists class/infiniband_verbs with opendir first), once the
 * Go runtime is up: not from the constructor. */
static void sysfs_touch(const char *path)
{
	size_t n = strlen(sysfs_dir);

	if (n && path && !strncmp(path, sysfs_dir, n))
		pthread_once(&sysfs_once, build_sysfs);
}

EXPORT DIR *opendir(const char *path)
{
	sysfs_touch(path);
	RESOLVE(opendir);
	return real_opendir(path);
}

static int open_cdev(int flags)
{
	int fd, err;

	RESOLVE(open);
	fd = real_open("/dev/null", O_RDWR | (flags & O_CLOEXEC));
	if (fd < 0)
		return fd;
	if (fd >= MAX_FD) {
		real_close(fd);
		errno = EMFILE;
		return -1;
	}
	err = mlx5bOpen(fd);
	if (err) {
		RESOLVE(close);
		real_close(fd);
		errno = err;
		return -1;
	}
	bridge_mark_fd(fd, BRIDGE_FD_CMD);
	return fd;
}

static mode_t mode_arg(int flags, va_list ap)
{
	return (flags & (O_CREAT | O_TMPFILE)) ? va_arg(ap, mode_t) : 0;
}

/* ours is whether path is the character device (its fd in *fd); a look
 * into the sysfs tree writes the tree first. */
static int ours(const char *path, int flags, int *fd)
{
	if (path && !strcmp(path, CDEV_PATH)) {
		*fd = open_cdev(flags);
		return 1;
	}
	sysfs_touch(path);
	return 0;
}

EXPORT int open(const char *path, int flags, ...)
{
	va_list ap;
	mode_t mode;
	int fd;

	va_start(ap, flags);
	mode = mode_arg(flags, ap);
	va_end(ap);
	if (ours(path, flags, &fd))
		return fd;
	RESOLVE(open);
	return real_open(path, flags, mode);
}
EXPORT int open64(const char *path, int flags, ...) __attribute__((alias("open")));

EXPORT int openat(int dirfd, const char *path, int flags, ...)
{
	va_list ap;
	mode_t mode;
	int fd;

	va_start(ap, flags);
	mode = mode_arg(flags, ap);
	va_end(ap);
	if (ours(path, flags, &fd))
		return fd;
	RESOLVE(openat);
	return real_openat(dirfd, path, flags, mode);
}
EXPORT int openat64(int dirfd, const char *path, int flags, ...) __attribute__((alias("openat")));

static void cdev_stat(struct stat *st)
{
	memset(st, 0, sizeof(*st));
	st->st_mode = S_IFCHR | 0666;
	st->st_rdev = makedev(CDEV_MAJOR, CDEV_MINOR);
	st->st_nlink = 1;
}

EXPORT int stat(const char *path, struct stat *st)
{
	if (path && !strcmp(path, CDEV_PATH)) {
		cdev_stat(st);
		return 0;
	}
	RESOLVE(stat);
	return real_stat(path, st);
}

EXPORT int fstat(int fd, struct stat *st)
{
	if (kind_of(fd) == BRIDGE_FD_CMD) {
		cdev_stat(st);
		return 0;
	}
	RESOLVE(fstat);
	return real_fstat(fd, st);
}

EXPORT int close(int fd)
{
	int k = kind_of(fd);

	RESOLVE(close);
	if (k) {
		bridge_mark_fd(fd, 0);
		mlx5bClose(fd, k);
	}
	return real_close(fd);
}

EXPORT int ioctl(int fd, unsigned long req, ...)
{
	va_list ap;
	void *arg;
	int err;

	va_start(ap, req);
	arg = va_arg(ap, void *);
	va_end(ap);
	if (kind_of(fd) != BRIDGE_FD_CMD) {
		RESOLVE(ioctl);
		return real_ioctl(fd, req, arg);
	}
	err = mlx5bIoctl(fd, req, arg);
	if (err) {
		errno = err;
		return -1;
	}
	return 0;
}

EXPORT ssize_t write(int fd, const void *buf, size_t count)
{
	if (kind_of(fd) == BRIDGE_FD_CMD) {
		/* The legacy write() ABI: libibverbs 44 sends write commands
		 * through UVERBS_METHOD_INVOKE_WRITE once its probe succeeds. */
		errno = ENOSYS;
		return -1;
	}
	RESOLVE(write);
	return real_write(fd, buf, count);
}

/* Reads of the event fds are counted: the destroy responses report the
 * events read, as the kernel's do. */
EXPORT ssize_t read(int fd, void *buf, size_t count)
{
	ssize_t n;

	RESOLVE(read);
	n = real_read(fd, buf, count);
	if (n > 0 && kind_of(fd) == BRIDGE_FD_EVENT)
		mlx5bRead(fd, buf, n);
	return n;
}

EXPORT int socket(int domain, int type, int protocol)
{
	/* Hide the RDMA netlink family: libibverbs then reads sysfs. */
	if (domain == AF_NETLINK && protocol == NETLINK_RDMA) {
		pthread_once(&sysfs_once, build_sysfs);
		errno = EPROTONOSUPPORT;
		return -1;
	}
	RESOLVE(socket);
	return real_socket(domain, type, protocol);
}

EXPORT void *mmap(void *addr, size_t len, int prot, int flags, int fd, off_t off)
{
	void *p;
	int i, err = 0;

	if (kind_of(fd) != BRIDGE_FD_CMD) {
		RESOLVE(mmap);
		return real_mmap(addr, len, prot, flags, fd, off);
	}
	p = mlx5bMmap(fd, (long long)off, len, &err);
	if (!p) {
		errno = err ? err : EINVAL;
		return MAP_FAILED;
	}
	pthread_mutex_lock(&maps_lock);
	for (i = 0; i < MAX_MAPS; i++)
		if (!maps[i]) {
			maps[i] = p;
			break;
		}
	pthread_mutex_unlock(&maps_lock);
	return p;
}
EXPORT void *mmap64(void *addr, size_t len, int prot, int flags, int fd, off_t off) __attribute__((alias("mmap")));

EXPORT int munmap(void *addr, size_t len)
{
	int i, ours = 0;

	if (addr) {
		pthread_mutex_lock(&maps_lock);
		for (i = 0; i < MAX_MAPS; i++)
			if (maps[i] == addr) {
				maps[i] = NULL;
				ours = 1;
				break;
			}
		pthread_mutex_unlock(&maps_lock);
	}
	if (ours) {
		int err = mlx5bMunmap(addr, len);

		if (err) {
			errno = err;
			return -1;
		}
		return 0;
	}
	RESOLVE(munmap);
	return real_munmap(addr, len);
}
