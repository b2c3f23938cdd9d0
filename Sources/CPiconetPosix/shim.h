// Linux headers Swift's Glibc module does not cover (epoll, eventfd, timerfd, signalfd),
// and inline helpers for the CMSG_* macros, which Swift cannot import.
// Only PiconetPosix imports this.
#ifndef PICONET_POSIX_SHIM_H
#define PICONET_POSIX_SHIM_H
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/timerfd.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <net/if.h>
#include <ifaddrs.h>
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

static inline struct cmsghdr *piconet_cmsg_firsthdr(struct msghdr *m) { return CMSG_FIRSTHDR(m); }
static inline struct cmsghdr *piconet_cmsg_nxthdr(struct msghdr *m, struct cmsghdr *c) { return CMSG_NXTHDR(m, c); }
static inline unsigned char *piconet_cmsg_data(struct cmsghdr *c) { return CMSG_DATA(c); }
static inline size_t piconet_cmsg_space(size_t n) { return CMSG_SPACE(n); }
#endif
