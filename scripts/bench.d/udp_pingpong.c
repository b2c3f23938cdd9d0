/* The baseline for scripts/bench.d/10-udp-roundtrip: plain blocking sendto/recvfrom
 * UDP ping-pong on 127.0.0.1, one message outstanding, 64-byte payload.
 *   udp_pingpong server            binds 127.0.0.1:0, prints "ready PORT", echoes until killed
 *   udp_pingpong client PORT N     WARMUP + N round trips; prints "MSGS_PER_S P50_US P99_US"
 * Same protocol and output as `piconet-loop-probe udp-echo/udp-ping`. */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include "bench_clock.h"

enum { WARMUP = 1000, PAYLOAD = 64 };

int main(int argc, char **argv) {
    if (argc < 2) { fprintf(stderr, "usage: udp_pingpong server | client PORT N\n"); return 2; }
    int fd = socket(AF_INET, SOCK_DGRAM, 0);
    if (fd < 0) { perror("socket"); return 1; }
    struct sockaddr_in me = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
    if (bind(fd, (struct sockaddr *)&me, sizeof me) < 0) { perror("bind"); return 1; }
    char buf[65536];
    if (strcmp(argv[1], "server") == 0) {
        socklen_t len = sizeof me;
        getsockname(fd, (struct sockaddr *)&me, &len);
        printf("ready %d\n", ntohs(me.sin_port));
        fflush(stdout);
        for (;;) {
            struct sockaddr_in from; socklen_t fl = sizeof from;
            ssize_t n = recvfrom(fd, buf, sizeof buf, 0, (struct sockaddr *)&from, &fl);
            if (n >= 0) sendto(fd, buf, (size_t)n, 0, (struct sockaddr *)&from, fl);
        }
    }
    if (argc != 4) { fprintf(stderr, "usage: udp_pingpong client PORT N\n"); return 2; }
    struct sockaddr_in to = { .sin_family = AF_INET, .sin_port = htons((unsigned short)atoi(argv[2])),
                              .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
    long n = atol(argv[3]);
    if (n <= 0) return 2;
    /* A datagram lost on loopback is rare; re-send after a second rather than hang. */
    struct timeval tv = { .tv_sec = 1 };
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    long long *samples = malloc(sizeof(long long) * (size_t)n);
    memset(buf, 0x5A, PAYLOAD);
    long long started = 0;
    for (long i = 0; i < WARMUP + n; i++) {
        if (i == WARMUP) started = now_ns();
        long long t0 = now_ns();
        int tries = 0;
        for (;;) {
            sendto(fd, buf, PAYLOAD, 0, (struct sockaddr *)&to, sizeof to);
            if (recvfrom(fd, buf, sizeof buf, 0, NULL, NULL) >= 0) break;
            /* Ten silent seconds: the server is gone (a bench once waited here for 15 minutes). */
            if (++tries == 10) { fprintf(stderr, "udp_pingpong: no echo in 10 s, giving up\n"); return 1; }
        }
        if (i >= WARMUP) samples[i - WARMUP] = now_ns() - t0;
    }
    double total = (double)(now_ns() - started) / 1e9;
    double p50, p99;
    percentiles_us(samples, n, &p50, &p99);
    printf("%.0f %.3f %.3f\n", (double)n / total, p50, p99);
    free(samples);
    return 0;
}
