/* The kernel-limit baseline for scripts/bench.d/82-udp-limit: 100-byte UDP datagrams from one
 * socket to another on 127.0.0.1 with sendmmsg/recvmmsg, batches of 32, for SECONDS.
 *   udp_blaster one-thread SECONDS   one thread sends a batch, then drains what arrived (the
 *                                    shape of `piconet session-bench`: one loop, both ends)
 *   udp_blaster two-threads SECONDS  a sender thread floods, a receiver thread blocks in
 *                                    recvmmsg (a flood: the kernel drops what the receiver
 *                                    cannot take, so it is no ceiling; not used by the bench)
 * Prints "DELIVERED_PER_S OFFERED_PER_S LOSS_PERCENT" on stdout. */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <time.h>
#include "bench_clock.h"

enum { BATCH = 32, PAYLOAD = 100 };

static int tx, rx;
static long long deadline_ns;
static volatile int sending = 1;
static long sent_total, received_total;
static long long last_arrival;

static void send_batch(void) {
    static char buf[BATCH][PAYLOAD];
    struct iovec iov[BATCH];
    struct mmsghdr msgs[BATCH];
    memset(msgs, 0, sizeof msgs);
    for (int i = 0; i < BATCH; i++) {
        iov[i].iov_base = buf[i]; iov[i].iov_len = PAYLOAD;
        msgs[i].msg_hdr.msg_iov = &iov[i]; msgs[i].msg_hdr.msg_iovlen = 1;
    }
    int n = sendmmsg(tx, msgs, BATCH, 0);
    if (n > 0) sent_total += n;
}

/* Returns how many datagrams one recvmmsg call took (0 when none were waiting). */
static int receive_batch(int flags) {
    static char buf[BATCH][2048];
    struct iovec iov[BATCH];
    struct mmsghdr msgs[BATCH];
    memset(msgs, 0, sizeof msgs);
    for (int i = 0; i < BATCH; i++) {
        iov[i].iov_base = buf[i]; iov[i].iov_len = sizeof buf[i];
        msgs[i].msg_hdr.msg_iov = &iov[i]; msgs[i].msg_hdr.msg_iovlen = 1;
    }
    int n = recvmmsg(rx, msgs, BATCH, flags, NULL);
    if (n > 0) { received_total += n; last_arrival = now_ns(); return n; }
    return 0;
}

static void *sender(void *arg) {
    (void)arg;
    while (now_ns() < deadline_ns) send_batch();
    sending = 0;
    return NULL;
}

int main(int argc, char **argv) {
    if (argc != 3) { fprintf(stderr, "usage: udp_blaster one-thread|two-threads SECONDS\n"); return 2; }
    int threads = strcmp(argv[1], "two-threads") == 0;
    double seconds = atof(argv[2]);
    if (seconds <= 0 || seconds > 60) { fprintf(stderr, "SECONDS: 0...60\n"); return 2; }
    struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
    socklen_t len = sizeof a;
    tx = socket(AF_INET, SOCK_DGRAM, 0);
    rx = socket(AF_INET, SOCK_DGRAM, 0);
    if (tx < 0 || rx < 0) { perror("socket"); return 1; }
    if (bind(rx, (struct sockaddr *)&a, sizeof a) < 0 || getsockname(rx, (struct sockaddr *)&a, &len) < 0) { perror("bind"); return 1; }
    if (connect(tx, (struct sockaddr *)&a, sizeof a) < 0) { perror("connect"); return 1; }
    struct timeval idle = { .tv_sec = 0, .tv_usec = 200000 };
    setsockopt(rx, SOL_SOCKET, SO_RCVTIMEO, &idle, sizeof idle);

    long long start = now_ns();
    deadline_ns = start + (long long)(seconds * 1e9);
    if (threads) {
        pthread_t t;
        if (pthread_create(&t, NULL, sender, NULL) != 0) { fprintf(stderr, "pthread_create failed\n"); return 1; }
        /* Blocks; the receive timeout ends it once the sender stopped and the queue is empty. */
        while (receive_batch(0) > 0 || sending) {}
        pthread_join(t, NULL);
    } else {
        while (now_ns() < deadline_ns) {
            send_batch();
            while (receive_batch(MSG_DONTWAIT) > 0) {}
        }
        while (receive_batch(MSG_DONTWAIT) > 0) {}
    }
    double elapsed = (double)(last_arrival - start) / 1e9;
    double offered = (double)sent_total / seconds;
    printf("%.0f %.0f %.2f\n", elapsed > 0 ? (double)received_total / elapsed : 0, offered,
           sent_total ? 100.0 * (double)(sent_total - received_total) / (double)sent_total : 0);
    return 0;
}
