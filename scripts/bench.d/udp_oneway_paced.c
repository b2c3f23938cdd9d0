/* The same-way baseline for session-oneway-p50/p99 (scripts/bench.d/40-session): what
 * `piconet session-bench --latency` does, in plain C and without a session. One process, one
 * epoll loop, two UDP sockets on 127.0.0.1; a 1 ms timerfd sends one PAYLOAD-byte datagram
 * from the first socket to the second, stamped with CLOCK_MONOTONIC; the loop wakes on the
 * second socket, receives it and records now - stamp. So: same rate, payload, wake-up
 * pattern and process layout as the session's figure; no crypto, no framing.
 *   udp_oneway_paced N     WARMUP + N messages; prints "P50_US P99_US" */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/timerfd.h>
#include <unistd.h>
#include "bench_clock.h"

enum { WARMUP = 100, PAYLOAD = 100 };

static int bound_socket(struct sockaddr_in *addr) {
    int fd = socket(AF_INET, SOCK_DGRAM | SOCK_NONBLOCK, 0);
    if (fd < 0) { perror("socket"); exit(1); }
    memset(addr, 0, sizeof *addr);
    addr->sin_family = AF_INET;
    addr->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof *addr;
    if (bind(fd, (struct sockaddr *)addr, len) < 0 || getsockname(fd, (struct sockaddr *)addr, &len) < 0) {
        perror("bind"); exit(1);
    }
    return fd;
}

int main(int argc, char **argv) {
    int n = argc > 1 ? atoi(argv[1]) : 3000;
    if (n <= 0) { fprintf(stderr, "usage: udp_oneway_paced N\n"); return 2; }
    struct sockaddr_in a_addr, b_addr;
    int a = bound_socket(&a_addr), b = bound_socket(&b_addr);
    int timer = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK);
    int ep = epoll_create1(0);
    if (timer < 0 || ep < 0) { perror("timerfd/epoll"); return 1; }
    struct itimerspec every = { .it_interval = { 0, 1000000 }, .it_value = { 0, 1000000 } };
    timerfd_settime(timer, 0, &every, NULL);
    struct epoll_event ev = { .events = EPOLLIN };
    ev.data.fd = timer; epoll_ctl(ep, EPOLL_CTL_ADD, timer, &ev);
    ev.data.fd = b; epoll_ctl(ep, EPOLL_CTL_ADD, b, &ev);
    long long *lat = malloc(sizeof(long long) * (size_t)n);
    if (!lat) return 1;
    int sent = 0, received = 0, total = WARMUP + n;
    unsigned char out[PAYLOAD], in[2048];
    memset(out, 0x5a, sizeof out);
    while (received < total) {
        struct epoll_event events[4];
        int k = epoll_wait(ep, events, 4, 1000);
        if (k < 0) { perror("epoll_wait"); return 1; }
        if (k == 0) { fprintf(stderr, "udp_oneway_paced: a datagram was lost on loopback\n"); return 1; }
        for (int i = 0; i < k; i++) {
            if (events[i].data.fd == timer) {
                uint64_t ticks;
                if (read(timer, &ticks, sizeof ticks) < 0) continue;
                if (sent >= total) continue;
                long long t = now_ns();
                memcpy(out, &t, sizeof t);
                if (sendto(a, out, sizeof out, 0, (struct sockaddr *)&b_addr, sizeof b_addr) == (ssize_t)sizeof out) sent++;
            } else {
                ssize_t r;
                while ((r = recv(b, in, sizeof in, 0)) >= (ssize_t)sizeof(long long)) {
                    long long t, at = now_ns();
                    memcpy(&t, in, sizeof t);
                    if (received >= WARMUP) lat[received - WARMUP] = at - t;
                    received++;
                }
            }
        }
    }
    double p50, p99;
    percentiles_us(lat, n, &p50, &p99);
    printf("%.1f %.1f\n", p50, p99);
    return 0;
}
