/* The same-way baseline for e2e-latency (scripts/bench.d/66-e2e-latency): what the nodes and
 * the hub do there, in plain C and without sessions, batches or aggregation. Separate sender
 * processes, each woken by a periodic timerfd in its own epoll loop, send one PAYLOAD-byte
 * datagram stamped with CLOCK_MONOTONIC to one receiver process that sleeps in epoll_wait
 * between datagrams and records now - stamp. So: the same process layout, wake-ups on both
 * sides, rate per sender and clock as the e2e figure; the difference is Piconet's own work.
 *   udp_oneway_procs recv SECONDS            prints "ready PORT", then "COUNT P50_US P99_US"
 *   udp_oneway_procs send PORT INTERVAL_US N [PAYLOAD]                                    */
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

enum { MAX_SAMPLES = 1 << 20, WARMUP = 20 };

static int receive(int seconds) {
    int fd = socket(AF_INET, SOCK_DGRAM | SOCK_NONBLOCK, 0);
    struct sockaddr_in addr = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
    socklen_t len = sizeof addr;
    if (fd < 0 || bind(fd, (struct sockaddr *)&addr, len) < 0 || getsockname(fd, (struct sockaddr *)&addr, &len) < 0) {
        perror("udp_oneway_procs: bind"); return 1;
    }
    int ep = epoll_create1(0);
    struct epoll_event ev = { .events = EPOLLIN, .data.fd = fd };
    if (ep < 0 || epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ev) < 0) { perror("udp_oneway_procs: epoll"); return 1; }
    printf("ready %d\n", ntohs(addr.sin_port));
    fflush(stdout);
    long long *lat = malloc(sizeof(long long) * MAX_SAMPLES);
    if (!lat) return 1;
    long n = 0, seen = 0;
    long long end = now_ns() + (long long)seconds * 1000000000LL;
    unsigned char buf[2048];
    for (;;) {
        long long left = end - now_ns();
        if (left <= 0) break;
        struct epoll_event got;
        int r = epoll_wait(ep, &got, 1, (int)(left / 1000000) + 1);
        if (r <= 0) continue;
        ssize_t k;
        while ((k = recv(fd, buf, sizeof buf, 0)) >= (ssize_t)sizeof(long long)) {
            long long t = now_ns(), stamp;
            memcpy(&stamp, buf, sizeof stamp);
            if (++seen > WARMUP && n < MAX_SAMPLES) lat[n++] = t - stamp;
        }
    }
    if (n == 0) { fprintf(stderr, "udp_oneway_procs: nothing received\n"); return 1; }
    double p50, p99;
    percentiles_us(lat, n, &p50, &p99);
    printf("%ld %.1f %.1f\n", n, p50, p99);
    return 0;
}

static int send_paced(int port, long interval_us, long count, int payload) {
    int fd = socket(AF_INET, SOCK_DGRAM, 0);
    struct sockaddr_in to = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port), .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
    int timer = timerfd_create(CLOCK_MONOTONIC, 0);
    int ep = epoll_create1(0);
    if (fd < 0 || timer < 0 || ep < 0) { perror("udp_oneway_procs: socket"); return 1; }
    struct itimerspec every = { .it_interval = { interval_us / 1000000, (interval_us % 1000000) * 1000 },
                                .it_value = { interval_us / 1000000, (interval_us % 1000000) * 1000 } };
    timerfd_settime(timer, 0, &every, NULL);
    struct epoll_event ev = { .events = EPOLLIN, .data.fd = timer };
    epoll_ctl(ep, EPOLL_CTL_ADD, timer, &ev);
    unsigned char buf[2048] = {0};
    if (payload < (int)sizeof(long long)) payload = sizeof(long long);
    if (payload > (int)sizeof buf) payload = sizeof buf;
    for (long i = 0; i < count;) {
        struct epoll_event got;
        if (epoll_wait(ep, &got, 1, -1) <= 0) continue;
        uint64_t ticks;
        if (read(timer, &ticks, sizeof ticks) != sizeof ticks) continue;
        long long stamp = now_ns();
        memcpy(buf, &stamp, sizeof stamp);
        sendto(fd, buf, (size_t)payload, 0, (struct sockaddr *)&to, sizeof to);
        i++;
    }
    return 0;
}

int main(int argc, char **argv) {
    if (argc == 3 && strcmp(argv[1], "recv") == 0) return receive(atoi(argv[2]));
    if ((argc == 5 || argc == 6) && strcmp(argv[1], "send") == 0)
        return send_paced(atoi(argv[2]), atol(argv[3]), atol(argv[4]), argc == 6 ? atoi(argv[5]) : 200);
    fprintf(stderr, "usage: udp_oneway_procs recv SECONDS | send PORT INTERVAL_US N [PAYLOAD]\n");
    return 64;
}
