// The OS edge's one door to libc and the kernel, in both build modes: the C library headers
// PiconetPosix (and PiconetLights' libgpiod file) use, the Linux headers Swift's Glibc module
// does not cover (epoll, eventfd, timerfd, signalfd, netlink), and inline helpers for macros
// Swift cannot import (errno, CMSG_*). Embedded Swift (the node) has no Glibc module at all,
// so nothing in the node imports Glibc: ordinary Swift uses this same module.
// Only PiconetPosix and PiconetLights/GPIOChip.swift import this.
#ifndef PICONET_POSIX_SHIM_H
#define PICONET_POSIX_SHIM_H
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <dirent.h>
#include <poll.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/types.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <sys/utsname.h>
#include <arpa/inet.h>
#include <pthread.h>
#include <sched.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/timerfd.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <net/if.h>
#include <ifaddrs.h>
#include <netdb.h>
#include <spawn.h>
#include <unistd.h>
// getrandom(2): the kernel's secure random bytes (SecureRandom).
#include <sys/random.h>
// Route netlink (interface and address change notifications): not in Glibc's Swift module.
#include <linux/netlink.h>
#include <linux/rtnetlink.h>

// GNU extensions Glibc's Swift module hides (it is built without _GNU_SOURCE).
extern int pipe2(int pipefd[2], int flags);
extern int accept4(int sockfd, struct sockaddr *addr, socklen_t *addrlen, int flags);
extern pid_t gettid(void);
extern int unshare(int flags);
// recvmmsg/sendmmsg: several datagrams per syscall. `struct mmsghdr` is GNU-only too, so
// this twin has its layout (a msghdr, then the byte count the kernel fills in).
struct timespec;
struct piconet_mmsghdr { struct msghdr msg_hdr; unsigned int msg_len; };
extern int recvmmsg(int sockfd, struct piconet_mmsghdr *msgvec, unsigned int vlen, int flags, struct timespec *timeout);
extern int sendmmsg(int sockfd, struct piconet_mmsghdr *msgvec, unsigned int vlen, int flags);
// epoll_pwait2 (Linux 5.11, glibc 2.35): epoll_wait with a nanosecond timeout, GNU-only too.
extern int epoll_pwait2(int epfd, struct epoll_event *events, int maxevents, const struct timespec *timeout,
                        const sigset_t *sigmask);
// CLONE_NEWNET from <sched.h>, hidden the same way.
static const int piconet_clone_newnet = 0x40000000;

// Socket types and flags as plain ints: Glibc imports them as an enum type whose visibility
// depends on which other C module claimed <bits/socket_type.h> first (CBlueZ does too).
static const int piconet_sock_stream = SOCK_STREAM;
static const int piconet_sock_dgram = SOCK_DGRAM;
static const int piconet_sock_seqpacket = SOCK_SEQPACKET;
static const int piconet_sock_raw = SOCK_RAW;
static const int piconet_sock_nonblock = SOCK_NONBLOCK;
static const int piconet_sock_cloexec = SOCK_CLOEXEC;

// The process environment (posix_spawn passes it on); unistd.h declares it only with _GNU_SOURCE.
extern char **environ;
static inline char **piconet_environment(void) { return environ; }

// signal(sig, SIG_DFL): SIG_DFL and SIG_ERR are casts of integers to function pointers,
// which Swift cannot import. Returns 0, or -1 with errno set.
static inline int piconet_signal_default(int sig) { return signal(sig, SIG_DFL) == SIG_ERR ? -1 : 0; }

// errno is a macro (a thread-local lvalue): Swift sees it through these two.
static inline int piconet_errno(void) { return errno; }
static inline void piconet_set_errno(int value) { errno = value; }

// open(2), ioctl(2) and fcntl(2) are variadic in C, which Swift cannot call; Glibc's overlay
// wrapped them for ordinary Swift only. One fixed signature each, for both modes.
static inline int piconet_open(const char *path, int flags, mode_t mode) { return open(path, flags, mode); }
static inline int piconet_ioctl(int fd, unsigned long request, void *arg) { return ioctl(fd, request, arg); }
static inline int piconet_set_nonblocking(int fd) {
    int flags = fcntl(fd, F_GETFL);
    return flags < 0 ? -1 : fcntl(fd, F_SETFL, flags | O_NONBLOCK);
}

// Terminals (`piconet pick`): raw mode and back, and the window's size.
#include <termios.h>
/// Saves fd's modes in *saved, then turns off line editing, echo, the signal keys (Ctrl-C comes
/// as a byte), flow control and CR-to-NL; output processing stays ("\n" still starts a line).
/// Reads return each byte as it comes. 0, or -1 with errno.
static inline int piconet_terminal_raw(int fd, struct termios *saved) {
    if (tcgetattr(fd, saved) != 0) return -1;
    struct termios raw = *saved;
    raw.c_lflag &= ~(tcflag_t)(ICANON | ECHO | ISIG | IEXTEN);
    raw.c_iflag &= ~(tcflag_t)(IXON | ICRNL | INLCR | IGNCR | ISTRIP | BRKINT);
    raw.c_cc[VMIN] = 1;
    raw.c_cc[VTIME] = 0;
    return tcsetattr(fd, TCSANOW, &raw);
}
/// Puts saved modes back once what was written is out (typed input is kept). 0, or -1 with errno.
static inline int piconet_terminal_restore(int fd, const struct termios *saved) { return tcsetattr(fd, TCSADRAIN, saved); }
/// The window's rows and columns (TIOCGWINSZ). 0, or -1 with errno.
static inline int piconet_terminal_size(int fd, int *rows, int *columns) {
    struct winsize w;
    if (ioctl(fd, TIOCGWINSZ, &w) != 0) return -1;
    *rows = w.ws_row;
    *columns = w.ws_col;
    return 0;
}

static inline struct cmsghdr *piconet_cmsg_firsthdr(struct msghdr *m) { return CMSG_FIRSTHDR(m); }
static inline struct cmsghdr *piconet_cmsg_nxthdr(struct msghdr *m, struct cmsghdr *c) { return CMSG_NXTHDR(m, c); }
static inline unsigned char *piconet_cmsg_data(struct cmsghdr *c) { return CMSG_DATA(c); }
static inline size_t piconet_cmsg_space(size_t n) { return CMSG_SPACE(n); }
static inline size_t piconet_cmsg_len(size_t n) { return CMSG_LEN(n); }

// UDP generic segmentation / receive offload (Linux 4.18 / 5.0): the option names from
// <netinet/udp.h> and the level (SOL_UDP is IPPROTO_UDP), as plain ints.
#include <netinet/udp.h>
static const int piconet_sol_udp = IPPROTO_UDP;
static const int piconet_udp_segment = UDP_SEGMENT;
static const int piconet_udp_gro = UDP_GRO;

// Application services: a user's ids, an inotify watch on the services directory, and the
// start of a service's program (pidfd_open: reaped on the loop, no SIGCHLD handler).
#include <pwd.h>
#include <grp.h>
#include <sys/inotify.h>
#include <sys/resource.h>
#include <sys/syscall.h>
extern int setgroups(size_t size, const gid_t *list);

/// The user's ids and home, 0 when found, else -1 (errno 0: no such user).
static inline int piconet_user_ids(const char *name, unsigned *uid, unsigned *gid, char *home, size_t home_size) {
    struct passwd pw, *found = NULL;
    char buffer[4096];
    errno = 0;
    int rc = getpwnam_r(name, &pw, buffer, sizeof buffer, &found);
    if (rc != 0) { errno = rc; return -1; }
    if (found == NULL) { errno = 0; return -1; }
    *uid = pw.pw_uid;
    *gid = pw.pw_gid;
    snprintf(home, home_size, "%s", pw.pw_dir ? pw.pw_dir : "/");
    return 0;
}

/// fork + exec of a service's program with `stdio_fd` as its standard input and output,
/// under `uid`/`gid` when `set_ids`, with the two resource limits when positive, signals
/// unblocked and at their defaults, in its own session. The child runs only C between fork
/// and exec. Returns the pid (and a pidfd in *pidfd_out, -1 without pidfd_open), or -errno:
/// a failed exec is reported through a close-on-exec pipe, so "no such file" is an error
/// here, not an exit status 127 later.
static inline int piconet_spawn_service(const char *path, char *const argv[], char *const envp[], int stdio_fd,
                                        int set_ids, unsigned uid, unsigned gid,
                                        long max_files, long max_address_space, int *pidfd_out) {
    int errpipe[2];
    *pidfd_out = -1;
    if (pipe2(errpipe, O_CLOEXEC) == -1) return -errno;
    pid_t pid = fork();
    if (pid == -1) { int e = errno; close(errpipe[0]); close(errpipe[1]); return -e; }
    if (pid == 0) {
        sigset_t none;
        sigemptyset(&none);
        sigprocmask(SIG_SETMASK, &none, NULL);
        for (int s = 1; s < 32; s++) if (s != SIGKILL && s != SIGSTOP) signal(s, SIG_DFL);
        setsid();
        int e = 0;
        if (dup2(stdio_fd, 0) == -1 || dup2(stdio_fd, 1) == -1) { e = errno; goto fail; }
        if (set_ids && (setgroups(0, NULL) == -1 || setgid(gid) == -1 || setuid(uid) == -1)) { e = errno; goto fail; }
        struct rlimit r;
        if (max_files > 0) {
            r.rlim_cur = r.rlim_max = (rlim_t)max_files;
            if (setrlimit(RLIMIT_NOFILE, &r) == -1) { e = errno; goto fail; }
        }
        if (max_address_space > 0) {
            r.rlim_cur = r.rlim_max = (rlim_t)max_address_space;
            if (setrlimit(RLIMIT_AS, &r) == -1) { e = errno; goto fail; }
        }
        execve(path, argv, envp);
        e = errno;
    fail:
        (void)!write(errpipe[1], &e, sizeof e);
        _exit(127);
    }
    close(errpipe[1]);
    int e = 0;
    ssize_t n;
    do n = read(errpipe[0], &e, sizeof e); while (n == -1 && errno == EINTR);
    close(errpipe[0]);
    if (n == (ssize_t)sizeof e) {
        int status;
        while (waitpid(pid, &status, 0) == -1 && errno == EINTR) {}
        return -(e ? e : ECHILD);
    }
    *pidfd_out = (int)syscall(SYS_pidfd_open, pid, 0);
    if (*pidfd_out >= 0) fcntl(*pidfd_out, F_SETFD, FD_CLOEXEC);
    return pid;
}

/// waitpid(WNOHANG): 1 and the status when `pid` ended, 0 while it runs, -1 on error.
/// A descriptor this process inherited (socket activation): non-blocking, and closed on exec so
/// the programs it starts do not hold it.
static inline int piconet_adopt_descriptor(int fd) {
    int flags = fcntl(fd, F_GETFL);
    if (flags == -1 || fcntl(fd, F_SETFL, flags | O_NONBLOCK) == -1) return -1;
    int fdflags = fcntl(fd, F_GETFD);
    return fdflags == -1 ? -1 : fcntl(fd, F_SETFD, fdflags | FD_CLOEXEC);
}
/// A close-on-exec copy of `fd` (numbered 3 or above), or -1.
static inline int piconet_duplicate_cloexec(int fd) { return fcntl(fd, F_DUPFD_CLOEXEC, 3); }
/// Lets `fd` pass through the next exec (a restart in place hands it over), or -1.
static inline int piconet_clear_cloexec(int fd) {
    int fdflags = fcntl(fd, F_GETFD);
    return fdflags == -1 ? -1 : fcntl(fd, F_SETFD, fdflags & ~FD_CLOEXEC);
}
static inline int piconet_set_blocking(int fd) {
    int flags = fcntl(fd, F_GETFL);
    return flags == -1 ? -1 : fcntl(fd, F_SETFL, flags & ~O_NONBLOCK);
}
static inline int piconet_reap(int pid, int *exited, int *code) {
    int status = 0;
    int rc;
    do rc = waitpid(pid, &status, WNOHANG); while (rc == -1 && errno == EINTR);
    if (rc <= 0) return rc;
    if (WIFEXITED(status)) { *exited = 1; *code = WEXITSTATUS(status); }
    else { *exited = 0; *code = WIFSIGNALED(status) ? WTERMSIG(status) : 0; }
    return 1;
}
static const unsigned piconet_in_watch_mask = IN_CLOSE_WRITE | IN_MOVED_TO | IN_MOVED_FROM | IN_DELETE
                                              | IN_DELETE_SELF | IN_MOVE_SELF | IN_ONLYDIR;
#endif
