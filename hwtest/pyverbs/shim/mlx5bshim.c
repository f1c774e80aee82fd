/*
 * mlx5bshim: the C half of hwtest/pyverbs's bridge. Preloaded
 * (LD_PRELOAD) into a program that uses the unmodified libibverbs and
 * libmlx5, it stands in for the kernel's uverbs character device and
 * carries every command to the bridge process (hwtest/pyverbs/bridge, pure
 * Go), which answers it with the software ConnectX of package model.
 *
 * Its approach follows the oracle's fake kernel (../shared/oracle): the
 * RDMA netlink family is hidden, so libibverbs discovers the device in
 * the sysfs tree at $SYSFS_PATH (the bridge writes it), and
 * /dev/infiniband/uverbs0 is reported as the character device 231:192.
 * Each open of it is a connection of its own (a SOCK_SEQPACKET unix socket
 * to $MLX5B_SOCKET): a device context.
 *
 * The device reads and writes the program's memory (queue buffers,
 * doorbell records, registered memory) in place, and the bridge is
 * another process. So when the bridge needs a range (MIRROR), the shim
 * moves the pages under it, at the same addresses, into memfds
 * ("mlx5b-mirror") it shares with the bridge, which maps them at the same
 * addresses too. UAR and clock pages come the other way: memfds from the
 * bridge, mapped where mmap(2) puts them. Event descriptors (the async
 * event file, completion channels, DEVX async command fds) are the
 * bridge's pipes and socket pairs, passed with SCM_RIGHTS.
 *
 * Protocol: hwtest/pyverbs/bridge/proto.go. Everything a command means is
 * decided there; this file only carries bytes, fds and pages.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <linux/netlink.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <sys/types.h>
#include <sys/un.h>

#define CDEV_PATH "/dev/infiniband/uverbs0"
#define CDEV_MAJOR 231
#define CDEV_MINOR 192
#define EXPORT __attribute__((visibility("default")))

/* RDMA_VERBS_IOCTL: _IOWR(0x1b, 1, struct ib_uverbs_ioctl_hdr). */
#define VERBS_IOCTL 0xc0181b01UL
#define HDR_SIZE 24
#define ATTR_SIZE 16

/* Message types (proto.go). */
enum {
	OP_IOCTL = 1,
	OP_MMAP = 2,
	OP_MUNMAP = 3,
	OP_READ = 4,
	OP_CLOSEFD = 5,
	OP_FDMAP = 6,
	OP_MIRRORED = 7,
	OP_RESULT = 100,
	OP_MIRROR = 101,
};

enum { FD_NONE, FD_CMD, FD_EVENT };

#define MAX_FD 4096
#define MAX_MSG (256 * 1024)
#define MAX_PASS 16
#define MAX_SEGS 64
#define MAX_MAPS 1024
#define PAGE 4096UL

/*
 * A connection is one open of the character device: the socket, under
 * every fd that names it (dup(2) of a command fd, as ibv_import_device's
 * callers make, shares it, as it shares the kernel's file), a lock that
 * keeps one request at a time on it, and the count of those fds.
 */
struct conn {
	pthread_mutex_t lock;
	int refs;
	int fd; /* one open fd of the socket, while refs > 0 */
};

static volatile uint8_t fd_kind[MAX_FD];
/* For a command fd, its connection; for an event fd, the connection it
 * came on (NULL once that closed). */
static struct conn *volatile fd_conn[MAX_FD];
static pthread_mutex_t conns_lock = PTHREAD_MUTEX_INITIALIZER;

static struct {
	void *addr;
	size_t len;
	uint64_t token;
	struct conn *conn;
} maps[MAX_MAPS];
static pthread_mutex_t maps_lock = PTHREAD_MUTEX_INITIALIZER;

static char sock_path[sizeof(((struct sockaddr_un *)0)->sun_path)];
static pid_t owner;
static int tracing;

#define REAL(name) static __typeof__(name) *real_##name
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

#define RESOLVE(name)                                                   \
	do {                                                            \
		if (!real_##name)                                       \
			real_##name = dlsym(RTLD_NEXT, #name);          \
	} while (0)

static void trace(const char *fmt, ...)
{
	char b[512];
	va_list ap;
	int n;

	if (!tracing)
		return;
	va_start(ap, fmt);
	n = vsnprintf(b, sizeof(b) - 1, fmt, ap);
	va_end(ap);
	if (n < 0)
		return;
	if (n > (int)sizeof(b) - 2)
		n = sizeof(b) - 2;
	b[n++] = '\n';
	RESOLVE(write);
	if (real_write(2, "mlx5bshim: ", 11) < 0 || real_write(2, b, n) < 0)
		return;
}

__attribute__((constructor)) static void shim_init(void)
{
	const char *s = getenv("MLX5B_SOCKET");
	const char *p = getenv("MLX5B_PID");
	char b[32];

	tracing = getenv("MLX5B_TRACE") != NULL;
	if (s)
		snprintf(sock_path, sizeof(sock_path), "%s", s);
	/* The process the bridge serves is the first one the shim is
	 * loaded in; a child (fork, or a program it runs) gets no device. */
	if (p) {
		owner = (pid_t)atol(p);
	} else {
		owner = getpid();
		snprintf(b, sizeof(b), "%ld", (long)owner);
		setenv("MLX5B_PID", b, 1);
	}
}

static int kind_of(int fd)
{
	return fd >= 0 && fd < MAX_FD ? fd_kind[fd] : FD_NONE;
}

/* sendmsg and recvmsg of one record, with fds. */
static int send_rec(int s, const void *buf, size_t n, const int *fds, int nfds)
{
	struct iovec iov = { (void *)buf, n };
	char cbuf[CMSG_SPACE(sizeof(int) * MAX_SEGS)];
	struct msghdr m = { 0 };
	ssize_t r;

	m.msg_iov = &iov;
	m.msg_iovlen = 1;
	if (nfds > 0) {
		struct cmsghdr *c;

		memset(cbuf, 0, sizeof(cbuf));
		m.msg_control = cbuf;
		m.msg_controllen = CMSG_SPACE(sizeof(int) * nfds);
		c = CMSG_FIRSTHDR(&m);
		c->cmsg_level = SOL_SOCKET;
		c->cmsg_type = SCM_RIGHTS;
		c->cmsg_len = CMSG_LEN(sizeof(int) * nfds);
		memcpy(CMSG_DATA(c), fds, sizeof(int) * nfds);
	}
	do
		r = sendmsg(s, &m, MSG_NOSIGNAL);
	while (r < 0 && errno == EINTR);
	if (r < 0)
		return -errno;
	return r == (ssize_t)n ? 0 : -EIO;
}

static ssize_t recv_rec(int s, void *buf, size_t n, int *fds, int *nfds)
{
	struct iovec iov = { buf, n };
	char cbuf[CMSG_SPACE(sizeof(int) * MAX_SEGS)];
	struct msghdr m = { 0 };
	struct cmsghdr *c;
	ssize_t r;

	*nfds = 0;
	m.msg_iov = &iov;
	m.msg_iovlen = 1;
	m.msg_control = cbuf;
	m.msg_controllen = sizeof(cbuf);
	do
		r = recvmsg(s, &m, MSG_CMSG_CLOEXEC);
	while (r < 0 && errno == EINTR);
	if (r < 0)
		return -errno;
	for (c = CMSG_FIRSTHDR(&m); c; c = CMSG_NXTHDR(&m, c)) {
		if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS) {
			int k = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);

			if (k > MAX_SEGS - *nfds)
				k = MAX_SEGS - *nfds;
			memcpy(fds + *nfds, CMSG_DATA(c), sizeof(int) * k);
			*nfds += k;
		}
	}
	if (r == 0)
		return -ECONNRESET;
	if (m.msg_flags & (MSG_TRUNC | MSG_CTRUNC))
		return -EMSGSIZE;
	return r;
}

static void put32(uint8_t *p, uint32_t v) { memcpy(p, &v, 4); }
static void put64(uint8_t *p, uint64_t v) { memcpy(p, &v, 8); }
static uint32_t get32(const uint8_t *p) { uint32_t v; memcpy(&v, p, 4); return v; }
static uint64_t get64(const uint8_t *p) { uint64_t v; memcpy(&v, p, 8); return v; }
static uint16_t get16(const uint8_t *p) { uint16_t v; memcpy(&v, p, 2); return v; }

/*
 * Mirroring. The pages of [lo, hi) that are mapped readable and are not a
 * mirror yet move, in place, into memfds; the reply names each new
 * segment (address, length, prot) and passes its fd. Pages already
 * mirrored are the bridge's already; holes are left alone (the device's
 * own checks answer for them).
 */
struct seg {
	uint64_t addr, len;
	uint32_t prot;
};

static int read_maps(char **out)
{
	size_t cap = 1 << 16, n = 0;
	char *b = malloc(cap);
	int fd;

	if (!b)
		return -ENOMEM;
	RESOLVE(openat);
	RESOLVE(read);
	RESOLVE(close);
	fd = real_openat(AT_FDCWD, "/proc/self/maps", O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		free(b);
		return -errno;
	}
	for (;;) {
		ssize_t r;

		if (cap - n < 4096) {
			char *nb = realloc(b, cap * 2);

			if (!nb) {
				free(b);
				real_close(fd);
				return -ENOMEM;
			}
			b = nb;
			cap *= 2;
		}
		r = real_read(fd, b + n, cap - n - 1);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			break;
		n += r;
	}
	real_close(fd);
	b[n] = 0;
	*out = b;
	return 0;
}

static int move_to_memfd(uint64_t a, uint64_t len, int prot, int *fdp)
{
	int fd = memfd_create("mlx5b-mirror", MFD_CLOEXEC);
	uint64_t done = 0;
	void *p;

	if (fd < 0)
		return -errno;
	if (ftruncate(fd, len) < 0)
		goto fail;
	/* The pages must be readable for the copy; prot is theirs. */
	while (done < len) {
		ssize_t w = pwrite(fd, (void *)(uintptr_t)(a + done), len - done, done);

		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			goto fail;
		done += w;
	}
	RESOLVE(mmap);
	p = real_mmap((void *)(uintptr_t)a, len, prot, MAP_SHARED | MAP_FIXED, fd, 0);
	if (p == MAP_FAILED)
		goto fail;
	*fdp = fd;
	return 0;
fail:
	{
		int e = errno ? errno : EIO;

		RESOLVE(close);
		real_close(fd);
		return -e;
	}
}

/* One mirror at a time in the process: a command's and the pager's may
 * ask for the same pages. */
static pthread_mutex_t mirror_lock = PTHREAD_MUTEX_INITIALIZER;

static int mirror_locked(uint64_t addr, uint64_t len, struct seg *segs, int *fds, int *nsegs);

static int mirror(uint64_t addr, uint64_t len, struct seg *segs, int *fds, int *nsegs)
{
	int err;

	pthread_mutex_lock(&mirror_lock);
	err = mirror_locked(addr, len, segs, fds, nsegs);
	pthread_mutex_unlock(&mirror_lock);
	return err;
}

static int mirror_locked(uint64_t addr, uint64_t len, struct seg *segs, int *fds, int *nsegs)
{
	uint64_t lo = addr & ~(PAGE - 1), hi;
	char *maps_txt = NULL, *line, *save = NULL;
	int err;

	*nsegs = 0;
	if (len == 0 || addr + len < addr)
		return 0;
	hi = (addr + len + PAGE - 1) & ~(PAGE - 1);
	if (hi < lo)
		return 0;
	err = read_maps(&maps_txt);
	if (err)
		return err;
	for (line = strtok_r(maps_txt, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
		unsigned long long s, e;
		char perms[8] = "";
		int off = 0, prot = 0;
		uint64_t a, b;

		if (sscanf(line, "%llx-%llx %7s %*s %*s %*s %n", &s, &e, perms, &off) < 3)
			continue;
		if (e <= lo || s >= hi)
			continue;
		if (off > 0 && strstr(line + off, "/memfd:mlx5b-mirror"))
			continue; /* mirrored before */
		if (perms[0] != 'r')
			continue; /* the device's own check refuses it */
		if (perms[0] == 'r')
			prot |= PROT_READ;
		if (perms[1] == 'w')
			prot |= PROT_WRITE;
		if (perms[2] == 'x')
			prot |= PROT_EXEC;
		a = s > lo ? s : lo;
		b = e < hi ? e : hi;
		if (*nsegs == MAX_SEGS) {
			err = -E2BIG;
			break;
		}
		err = move_to_memfd(a, b - a, prot, &fds[*nsegs]);
		if (err)
			break;
		segs[*nsegs].addr = a;
		segs[*nsegs].len = b - a;
		segs[*nsegs].prot = prot;
		(*nsegs)++;
		trace("mirror [%#llx, %#llx) prot %d", (unsigned long long)a, (unsigned long long)b, prot);
	}
	free(maps_txt);
	return err;
}

static void close_all(int *fds, int n)
{
	int i;

	RESOLVE(close);
	for (i = 0; i < n; i++)
		real_close(fds[i]);
}

/* answer_mirror serves one MIRROR request of the bridge. */
static int answer_mirror(int s, const uint8_t *req, ssize_t n)
{
	struct seg segs[MAX_SEGS];
	int fds[MAX_SEGS], nsegs = 0, i, err;
	uint8_t out[16 + MAX_SEGS * 24];

	if (n < 24)
		return -EPROTO;
	err = mirror(get64(req + 8), get64(req + 16), segs, fds, &nsegs);
	put32(out, OP_MIRRORED);
	put32(out + 4, (uint32_t)-err);
	put32(out + 8, nsegs);
	put32(out + 12, 0);
	for (i = 0; i < nsegs; i++) {
		put64(out + 16 + 24 * i, segs[i].addr);
		put64(out + 24 + 24 * i, segs[i].len);
		put64(out + 32 + 24 * i, segs[i].prot);
	}
	err = send_rec(s, out, 16 + 24 * nsegs, fds, nsegs);
	close_all(fds, nsegs);
	return err;
}

/*
 * call sends req on connection s and waits for its RESULT (serving the
 * MIRROR requests that come first). The result is in buf (of MAX_MSG), its
 * fds in fds. Returns the result's length or -errno of the transport.
 */
static ssize_t call(int s, const void *req, size_t n, uint8_t *buf, int *fds, int *nfds)
{
	int err = send_rec(s, req, n, NULL, 0);

	if (err)
		return err;
	for (;;) {
		ssize_t r = recv_rec(s, buf, MAX_MSG, fds, nfds);

		if (r < 0)
			return r;
		if (r < 8) {
			close_all(fds, *nfds);
			return -EPROTO;
		}
		if (get32(buf) == OP_MIRROR) {
			close_all(fds, *nfds);
			err = answer_mirror(s, buf, r);
			if (err)
				return err;
			continue;
		}
		if (get32(buf) != OP_RESULT) {
			close_all(fds, *nfds);
			return -EPROTO;
		}
		return r;
	}
}

/* conn_get takes a reference to fd's connection (NULL for none), with
 * conns_lock; conn_put drops it. */
static struct conn *conn_get(int fd)
{
	struct conn *c;

	if (fd < 0 || fd >= MAX_FD)
		return NULL;
	pthread_mutex_lock(&conns_lock);
	c = fd_conn[fd];
	if (c)
		c->refs++;
	pthread_mutex_unlock(&conns_lock);
	return c;
}

static void conn_put(struct conn *c)
{
	int last;

	pthread_mutex_lock(&conns_lock);
	last = --c->refs == 0;
	pthread_mutex_unlock(&conns_lock);
	if (last) {
		pthread_mutex_destroy(&c->lock);
		free(c);
	}
}

/* live_fd is an open fd of c's socket, or -1 once every one closed.
 * Held under c->lock. */
static int live_fd(struct conn *c)
{
	int fd;

	pthread_mutex_lock(&conns_lock);
	fd = c->fd;
	pthread_mutex_unlock(&conns_lock);
	return fd;
}

/* simple sends a request whose result carries an errno only. */
static int simple(struct conn *c, const uint8_t *req, size_t n)
{
	uint8_t *buf = malloc(MAX_MSG);
	int fds[MAX_SEGS], nfds, s;
	ssize_t r;

	if (!buf)
		return ENOMEM;
	pthread_mutex_lock(&c->lock);
	s = live_fd(c);
	r = s < 0 ? -EBADF : call(s, req, n, buf, fds, &nfds);
	pthread_mutex_unlock(&c->lock);
	if (r >= 0) {
		close_all(fds, nfds);
		r = -(int32_t)get32(buf + 4);
	}
	free(buf);
	return (int)-r;
}

/*
 * The pager: one more connection, to $MLX5B_PAGER, on which the bridge
 * asks for pages at any time (the ODP page faults of the device), served
 * by a thread of its own. It starts with the first open of the device.
 */
static pthread_once_t pager_once = PTHREAD_ONCE_INIT;

static void *pager_loop(void *arg)
{
	int s = (int)(intptr_t)arg, fds[MAX_SEGS], nfds;
	uint8_t *buf = malloc(MAX_MSG);

	while (buf) {
		ssize_t r = recv_rec(s, buf, MAX_MSG, fds, &nfds);

		if (r < 0)
			break;
		close_all(fds, nfds);
		if (r < 24 || get32(buf) != OP_MIRROR || answer_mirror(s, buf, r))
			break;
	}
	free(buf);
	RESOLVE(close);
	real_close(s);
	return NULL;
}

static void start_pager(void)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	const char *path = getenv("MLX5B_PAGER");
	sigset_t all, old;
	pthread_attr_t attr;
	pthread_t th;
	int s;

	if (!path)
		return;
	RESOLVE(socket);
	RESOLVE(close);
	s = real_socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
	if (s < 0)
		return;
	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", path);
	if (connect(s, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
		trace("pager: connect %s: %s", path, strerror(errno));
		real_close(s);
		return;
	}
	/* The thread takes no signal of the program's. */
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	pthread_attr_init(&attr);
	pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
	if (pthread_create(&th, &attr, pager_loop, (void *)(intptr_t)s)) {
		trace("pager: no thread");
		real_close(s);
	}
	pthread_attr_destroy(&attr);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
}

static int open_cdev(int flags)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	int s;

	if (!sock_path[0]) {
		errno = ENOENT;
		return -1;
	}
	if (getpid() != owner) {
		errno = ENODEV;
		return -1;
	}
	RESOLVE(socket);
	RESOLVE(close);
	s = real_socket(AF_UNIX, SOCK_SEQPACKET | ((flags & O_CLOEXEC) ? SOCK_CLOEXEC : 0), 0);
	if (s < 0)
		return -1;
	if (s >= MAX_FD) {
		real_close(s);
		errno = EMFILE;
		return -1;
	}
	memcpy(sa.sun_path, sock_path, sizeof(sa.sun_path));
	if (connect(s, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
		int e = errno;

		real_close(s);
		trace("connect %s: %s", sock_path, strerror(e));
		errno = ENODEV;
		return -1;
	}
	{
		struct conn *c = calloc(1, sizeof(*c));

		if (!c) {
			real_close(s);
			errno = ENOMEM;
			return -1;
		}
		pthread_mutex_init(&c->lock, NULL);
		c->refs = 1; /* the fd's */
		c->fd = s;
		pthread_mutex_lock(&conns_lock);
		fd_conn[s] = c;
		fd_kind[s] = FD_CMD;
		pthread_mutex_unlock(&conns_lock);
	}
	trace("open " CDEV_PATH ": fd %d", s);
	pthread_once(&pager_once, start_pager);
	return s;
}

/* is_cdev: path names the character device. (A function, so that the
 * compiler does not take open's nonnull path for granted.) */
static __attribute__((noinline)) int is_cdev(const char *path)
{
	return path && !strcmp(path, CDEV_PATH);
}

static mode_t mode_arg(int flags, va_list ap)
{
	return (flags & (O_CREAT | O_TMPFILE)) ? va_arg(ap, mode_t) : 0;
}

/* open and openat: the character device is a connection; every other
 * path is libc's (open is openat from the working directory). */
static int do_open(int dirfd, const char *path, int flags, mode_t mode)
{
	if (is_cdev(path))
		return open_cdev(flags);
	RESOLVE(openat);
	return real_openat(dirfd, path, flags, mode);
}

EXPORT int open(const char *path, int flags, ...)
{
	va_list ap;
	mode_t mode;

	va_start(ap, flags);
	mode = mode_arg(flags, ap);
	va_end(ap);
	return do_open(AT_FDCWD, path, flags, mode);
}
EXPORT int open64(const char *path, int flags, ...) __attribute__((alias("open")));

EXPORT int openat(int dirfd, const char *path, int flags, ...)
{
	va_list ap;
	mode_t mode;

	va_start(ap, flags);
	mode = mode_arg(flags, ap);
	va_end(ap);
	return do_open(dirfd, path, flags, mode);
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
	if (sock_path[0] && is_cdev(path)) {
		cdev_stat(st);
		return 0;
	}
	RESOLVE(stat);
	return real_stat(path, st);
}

EXPORT int fstat(int fd, struct stat *st)
{
	if (kind_of(fd) == FD_CMD) {
		cdev_stat(st);
		return 0;
	}
	RESOLVE(fstat);
	return real_fstat(fd, st);
}

EXPORT int socket(int domain, int type, int protocol)
{
	/* Hide the RDMA netlink family: libibverbs then reads sysfs. */
	if (sock_path[0] && domain == AF_NETLINK && protocol == NETLINK_RDMA) {
		errno = EPROTONOSUPPORT;
		return -1;
	}
	RESOLVE(socket);
	return real_socket(domain, type, protocol);
}

/* close_cmd drops fd's hold on its connection; the socket itself is
 * closed by the caller's close. With the last fd, events fds and maps
 * that came on it forget it. */
static void close_cmd(int fd)
{
	struct conn *c;
	int i, last = 0;

	pthread_mutex_lock(&conns_lock);
	c = fd_conn[fd];
	fd_conn[fd] = NULL;
	fd_kind[fd] = FD_NONE;
	if (c && c->fd == fd) {
		c->fd = -1;
		for (i = 0; i < MAX_FD; i++)
			if (fd_kind[i] == FD_CMD && fd_conn[i] == c) {
				c->fd = i;
				break;
			}
	}
	if (c && c->fd < 0) {
		last = 1;
		for (i = 0; i < MAX_FD; i++)
			if (fd_kind[i] == FD_EVENT && fd_conn[i] == c) {
				fd_conn[i] = NULL;
				c->refs--;
			}
	}
	pthread_mutex_unlock(&conns_lock);
	if (last) {
		pthread_mutex_lock(&maps_lock);
		for (i = 0; i < MAX_MAPS; i++)
			if (maps[i].addr && maps[i].conn == c) {
				maps[i].conn = NULL;
				conn_put(c);
			}
		pthread_mutex_unlock(&maps_lock);
	}
	if (c)
		conn_put(c);
}

EXPORT int close(int fd)
{
	int k = kind_of(fd);

	RESOLVE(close);
	if (k == FD_CMD) {
		struct conn *c = conn_get(fd);
		int r;

		/* Not while a request of another thread is on the socket. */
		if (c)
			pthread_mutex_lock(&c->lock);
		close_cmd(fd);
		r = real_close(fd);
		if (c) {
			pthread_mutex_unlock(&c->lock);
			conn_put(c);
		}
		return r;
	}
	if (k == FD_EVENT) {
		struct conn *c = conn_get(fd);
		uint8_t req[8];

		pthread_mutex_lock(&conns_lock);
		fd_kind[fd] = FD_NONE;
		if (fd_conn[fd]) {
			fd_conn[fd] = NULL;
			c->refs--; /* the event fd's */
		}
		pthread_mutex_unlock(&conns_lock);
		if (c) {
			put32(req, OP_CLOSEFD);
			put32(req + 4, fd);
			simple(c, req, sizeof(req));
			conn_put(c);
		}
	}
	return real_close(fd);
}

/* A dup of a command fd names the same connection. */
static int dup_of(int old, int fd)
{
	if (fd >= 0 && fd < MAX_FD && kind_of(old) == FD_CMD) {
		pthread_mutex_lock(&conns_lock);
		if (fd_conn[old]) {
			fd_conn[fd] = fd_conn[old];
			fd_conn[fd]->refs++;
			fd_kind[fd] = FD_CMD;
		}
		pthread_mutex_unlock(&conns_lock);
	}
	return fd;
}

REAL(dup);
REAL(dup2);
REAL(dup3);
REAL(fcntl);

EXPORT int dup(int old)
{
	RESOLVE(dup);
	return dup_of(old, real_dup(old));
}

EXPORT int dup2(int old, int fd)
{
	RESOLVE(dup2);
	if (old != fd && kind_of(fd) != FD_NONE)
		close(fd);
	return dup_of(old, real_dup2(old, fd));
}

EXPORT int dup3(int old, int fd, int flags)
{
	RESOLVE(dup3);
	if (old != fd && kind_of(fd) != FD_NONE)
		close(fd);
	return dup_of(old, real_dup3(old, fd, flags));
}

EXPORT int fcntl(int fd, int cmd, ...)
{
	va_list ap;
	long arg;

	va_start(ap, cmd);
	arg = va_arg(ap, long);
	va_end(ap);
	RESOLVE(fcntl);
	if (cmd == F_DUPFD || cmd == F_DUPFD_CLOEXEC)
		return dup_of(fd, real_fcntl(fd, cmd, arg));
	return real_fcntl(fd, cmd, arg);
}
EXPORT int fcntl64(int fd, int cmd, ...) __attribute__((alias("fcntl")));

/* Reads of the event fds are reported, so that the destroy responses
 * count the events read, as ib_uverbs counts them. */
EXPORT ssize_t read(int fd, void *buf, size_t count)
{
	ssize_t n;

	RESOLVE(read);
	n = real_read(fd, buf, count);
	if (n > 0 && kind_of(fd) == FD_EVENT) {
		struct conn *c = conn_get(fd);
		int e = errno;
		uint8_t *req;

		if (c && (req = malloc(8 + n))) {
			put32(req, OP_READ);
			put32(req + 4, fd);
			memcpy(req + 8, buf, n);
			simple(c, req, 8 + n);
			free(req);
		}
		if (c)
			conn_put(c);
		errno = e;
	}
	return n;
}

EXPORT ssize_t write(int fd, const void *buf, size_t count)
{
	if (kind_of(fd) == FD_CMD) {
		/* The legacy write() ABI: libibverbs sends write commands
		 * through UVERBS_METHOD_INVOKE_WRITE once its probe fails
		 * here. */
		errno = ENOSYS;
		return -1;
	}
	RESOLVE(write);
	return real_write(fd, buf, count);
}

/*
 * The ioctl: the header, its attributes and each attribute's buffer
 * (len > 8) go to the bridge; the attributes come back (flags, new
 * handles), with the buffers the bridge changed and the fds it made.
 */
static int do_ioctl(struct conn *cn, uint8_t *arg)
{
	int s;
	uint16_t hlen = get16(arg), nattrs = get16(arg + 6);
	size_t n = 8 + hlen, off;
	uint8_t *req, *buf;
	int fds[MAX_SEGS], nfds = 0, i, err;
	ssize_t r;

	if (hlen != HDR_SIZE + nattrs * ATTR_SIZE)
		return EINVAL;
	for (i = 0; i < nattrs; i++) {
		uint16_t len = get16(arg + HDR_SIZE + i * ATTR_SIZE + 2);

		if (len > 8)
			n += len;
	}
	if (n > MAX_MSG)
		return E2BIG;
	req = malloc(n);
	buf = malloc(MAX_MSG);
	if (!req || !buf) {
		free(req);
		free(buf);
		return ENOMEM;
	}
	put32(req, OP_IOCTL);
	put32(req + 4, 0);
	memcpy(req + 8, arg, hlen);
	off = 8 + hlen;
	for (i = 0; i < nattrs; i++) {
		uint8_t *a = arg + HDR_SIZE + i * ATTR_SIZE;
		uint16_t len = get16(a + 2);

		if (len > 8) {
			memcpy(req + off, (void *)(uintptr_t)get64(a + 8), len);
			off += len;
		}
	}
	pthread_mutex_lock(&cn->lock);
	s = live_fd(cn);
	r = s < 0 ? -EBADF : call(s, req, n, buf, fds, &nfds);
	free(req);
	if (r < 0) {
		pthread_mutex_unlock(&cn->lock);
		free(buf);
		return (int)-r;
	}
	err = (int32_t)get32(buf + 4);
	/* RESULT: op, errno, nattrs attributes, u32 nblobs, u32 npass, then
	 * each blob (u16 index, u16 0, u32 len, bytes padded to 8) and each
	 * fd placement (u16 index, u16 where, u32 offset, u32 token, u32 0);
	 * the fds in that order. */
	{
		size_t p = 8 + nattrs * ATTR_SIZE;
		uint32_t nblobs, npass;
		int bad = 0;

		if ((size_t)r < p + 8) {
			bad = 1;
			goto done;
		}
		for (i = 0; i < nattrs; i++) {
			uint8_t *a = arg + HDR_SIZE + i * ATTR_SIZE;
			const uint8_t *b = buf + 8 + i * ATTR_SIZE;
			uint64_t data = get64(a + 8);

			memcpy(a, b, ATTR_SIZE);
			if (get16(a + 2) > 8)
				put64(a + 8, data); /* a pointer stays the caller's */
		}
		nblobs = get32(buf + p);
		npass = get32(buf + p + 4);
		p += 8;
		for (i = 0; i < (int)nblobs; i++) {
			uint16_t idx;
			uint32_t len;
			uint8_t *a;

			if ((size_t)r < p + 8) {
				bad = 1;
				goto done;
			}
			idx = get16(buf + p);
			len = get32(buf + p + 4);
			p += 8;
			if (idx >= nattrs || (size_t)r < p + len) {
				bad = 1;
				goto done;
			}
			a = arg + HDR_SIZE + idx * ATTR_SIZE;
			if (len != get16(a + 2) || len == 0) {
				bad = 1;
				goto done;
			}
			memcpy((void *)(uintptr_t)get64(a + 8), buf + p, len);
			p += (len + 7) & ~7U;
		}
		if ((int)npass != nfds || npass > MAX_PASS) {
			bad = 1;
			goto done;
		}
		if (npass > 0) {
			uint8_t map[8 + MAX_PASS * 8];

			put32(map, OP_FDMAP);
			put32(map + 4, npass);
			for (i = 0; i < (int)npass; i++, p += 16) {
				uint16_t idx, where;
				uint32_t at, token;
				uint8_t *a;
				int fd = fds[i];

				if ((size_t)r < p + 16) {
					bad = 1;
					goto done;
				}
				idx = get16(buf + p);
				where = get16(buf + p + 2);
				at = get32(buf + p + 4);
				token = get32(buf + p + 8);
				if (idx >= nattrs || fd >= MAX_FD) {
					bad = 1;
					goto done;
				}
				a = arg + HDR_SIZE + idx * ATTR_SIZE;
				if (where == 0) {
					put64(a + 8, (uint64_t)fd);
				} else {
					uint16_t len = get16(a + 2);

					if (len == 0 || at + 4 > len) {
						bad = 1;
						goto done;
					}
					put32((uint8_t *)(uintptr_t)get64(a + 8) + at, (uint32_t)fd);
				}
				pthread_mutex_lock(&conns_lock);
				fd_conn[fd] = cn;
				cn->refs++; /* the event fd's */
				fd_kind[fd] = FD_EVENT;
				pthread_mutex_unlock(&conns_lock);
				put32(map + 8 + i * 8, token);
				put32(map + 12 + i * 8, fd);
			}
			nfds = 0; /* they are the caller's now */
			{
				int mfds[MAX_SEGS], mn;
				ssize_t q = call(s, map, 8 + npass * 8, buf, mfds, &mn);

				if (q < 0) {
					bad = 1;
					goto done;
				}
				close_all(mfds, mn);
			}
		}
done:
		if (bad) {
			trace("ioctl: malformed result (%zd bytes)", r);
			err = EPROTO;
		}
	}
	pthread_mutex_unlock(&cn->lock);
	close_all(fds, nfds);
	free(buf);
	return err;
}

EXPORT int ioctl(int fd, unsigned long req, ...)
{
	va_list ap;
	void *arg;
	int err;

	va_start(ap, req);
	arg = va_arg(ap, void *);
	va_end(ap);
	if (kind_of(fd) != FD_CMD) {
		RESOLVE(ioctl);
		return real_ioctl(fd, req, arg);
	}
	if (getpid() != owner) {
		errno = ENODEV;
		return -1;
	}
	if (req != VERBS_IOCTL || !arg) {
		errno = ENOTTY;
		return -1;
	}
	{
		struct conn *c = conn_get(fd);

		err = c ? do_ioctl(c, arg) : EBADF;
		if (c)
			conn_put(c);
	}
	if (err) {
		errno = err;
		return -1;
	}
	return 0;
}

EXPORT void *mmap(void *addr, size_t len, int prot, int flags, int fd, off_t off)
{
	uint8_t req[24], *buf;
	int fds[MAX_SEGS], nfds = 0, err, i;
	struct conn *c;
	uint64_t token;
	ssize_t r;
	void *p;

	RESOLVE(mmap);
	if (kind_of(fd) != FD_CMD)
		return real_mmap(addr, len, prot, flags, fd, off);
	if (getpid() != owner) {
		errno = ENODEV;
		return MAP_FAILED;
	}
	buf = malloc(MAX_MSG);
	if (!buf) {
		errno = ENOMEM;
		return MAP_FAILED;
	}
	put32(req, OP_MMAP);
	put32(req + 4, 0);
	put64(req + 8, (uint64_t)off);
	put64(req + 16, (uint64_t)len);
	c = conn_get(fd);
	if (!c) {
		free(buf);
		errno = EBADF;
		return MAP_FAILED;
	}
	pthread_mutex_lock(&c->lock);
	r = call(fd, req, sizeof(req), buf, fds, &nfds);
	pthread_mutex_unlock(&c->lock);
	if (r < 0) {
		free(buf);
		conn_put(c);
		errno = (int)-r;
		return MAP_FAILED;
	}
	err = (int32_t)get32(buf + 4);
	token = r >= 16 ? get64(buf + 8) : 0;
	free(buf);
	if (!err && nfds != 1)
		err = EPROTO;
	if (err) {
		close_all(fds, nfds);
		conn_put(c);
		errno = err;
		return MAP_FAILED;
	}
	p = real_mmap(addr, len, prot, (flags & ~MAP_PRIVATE) | MAP_SHARED, fds[0], 0);
	err = errno;
	close_all(fds, nfds);
	if (p == MAP_FAILED) {
		conn_put(c);
		errno = err;
		return MAP_FAILED;
	}
	pthread_mutex_lock(&maps_lock);
	for (i = 0; i < MAX_MAPS; i++)
		if (!maps[i].addr) {
			maps[i].addr = p;
			maps[i].len = len;
			maps[i].token = token;
			maps[i].conn = c; /* its reference */
			c = NULL;
			break;
		}
	pthread_mutex_unlock(&maps_lock);
	if (c)
		conn_put(c); /* no slot: munmap will not tell the bridge */
	trace("mmap fd %d off %#llx len %zu -> %p", fd, (unsigned long long)off, len, p);
	return p;
}
EXPORT void *mmap64(void *addr, size_t len, int prot, int flags, int fd, off_t off) __attribute__((alias("mmap")));

EXPORT int munmap(void *addr, size_t len)
{
	int i, found = 0;
	struct conn *conn = NULL;
	uint64_t token = 0;

	if (addr) {
		pthread_mutex_lock(&maps_lock);
		for (i = 0; i < MAX_MAPS; i++)
			if (maps[i].addr == addr) {
				conn = maps[i].conn;
				token = maps[i].token;
				maps[i].addr = NULL;
				found = 1;
				break;
			}
		pthread_mutex_unlock(&maps_lock);
	}
	RESOLVE(munmap);
	if (found && conn) {
		uint8_t req[16];
		int err;

		put32(req, OP_MUNMAP);
		put32(req + 4, 0);
		put64(req + 8, token);
		err = simple(conn, req, sizeof(req));
		conn_put(conn);
		if (err) {
			real_munmap(addr, len);
			errno = err;
			return -1;
		}
	}
	return real_munmap(addr, len);
}
