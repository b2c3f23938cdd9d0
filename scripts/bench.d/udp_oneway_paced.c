/* The same-way baseline for session-oneway-p50/p99 (scripts/bench.d/40-session): what
 * `piconet session-bench --latency` does, in plain C and without a session. One process, one
 * epoll loop, two UDP sockets on 127.0.0.1; a 1 ms timerfd sends one PAYLOAD-byte datagram
 * from the first socket to the second, stamped with CLOCK_MONOTONIC; the loop wakes on the
 * second socket, receives it and records now - stamp. So: same rate, payload, wake-up
 * pattern and process layout as the session's figure; no crypto, no framing.
 * With "aead", the least any encrypted session must add: each message is sealed before its
 * send (ChaCha20-Poly1305 IETF from libsodium, the session's AEAD and library: an 18-byte clear
 * header as associated data, as a session frame's header, index and counter are; the counter as
 * nonce; the 16-byte tag after the body) and opened after its receive, the time taken after the
 * open. No replay window, no framing, no session state: a floor, not a protocol.
 *   udp_oneway_paced N [aead]   WARMUP + N messages; prints "P50_US P99_US" */
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
#include <sodium.h>
#include "bench_clock.h"

enum { WARMUP = 100, PAYLOAD = 100, AD = 18, TAG = 16 };

static unsigned char key[crypto_aead_chacha20poly1305_ietf_KEYBYTES];

static void nonce_of(uint64_t counter, unsigned char nonce[12]) {
    memset(nonce, 0, 12);
    memcpy(nonce + 4, &counter, 8);
}

/* Seals `plain` (PAYLOAD bytes) into `out` as header | ciphertext | tag; returns its length. */
static size_t seal(const unsigned char *plain, uint64_t counter, unsigned char *out) {
    unsigned char nonce[12];
    unsigned long long tag_length;
    memset(out, 0x11, AD);
    memcpy(out + AD - 8, &counter, 8);
    nonce_of(counter, nonce);
    crypto_aead_chacha20poly1305_ietf_encrypt_detached(out + AD, out + AD + PAYLOAD, &tag_length, plain, PAYLOAD,
                                                       out, AD, NULL, nonce, key);
    return AD + PAYLOAD + TAG;
}

/* Opens a sealed datagram of `n` bytes into `plain`; 0 when authentic. */
static int open_sealed(const unsigned char *in, size_t n, unsigned char *plain) {
    unsigned char nonce[12];
    uint64_t counter;
    if (n != AD + PAYLOAD + TAG) return -1;
    memcpy(&counter, in + AD - 8, 8);
    nonce_of(counter, nonce);
    return crypto_aead_chacha20poly1305_ietf_decrypt_detached(plain, NULL, in + AD, PAYLOAD, in + AD + PAYLOAD,
                                                              in, AD, nonce, key);
}

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
    int aead = argc > 2 && strcmp(argv[2], "aead") == 0;
    if (n <= 0 || (argc > 2 && !aead)) { fprintf(stderr, "usage: udp_oneway_paced N [aead]\n"); return 2; }
    if (aead) {
        if (sodium_init() < 0) { fprintf(stderr, "udp_oneway_paced: sodium_init failed\n"); return 1; }
        randombytes_buf(key, sizeof key);
    }
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
    unsigned char out[PAYLOAD], in[2048], sealed[AD + PAYLOAD + TAG], plain[PAYLOAD];
    uint64_t counter = 0;
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
                const unsigned char *datagram = out;
                size_t length = sizeof out;
                if (aead) { length = seal(out, counter++, sealed); datagram = sealed; }
                if (sendto(a, datagram, length, 0, (struct sockaddr *)&b_addr, sizeof b_addr) == (ssize_t)length) sent++;
            } else {
                ssize_t r;
                while ((r = recv(b, in, sizeof in, 0)) >= (ssize_t)sizeof(long long)) {
                    long long t, at;
                    if (aead) {
                        if (open_sealed(in, (size_t)r, plain) != 0) { fprintf(stderr, "udp_oneway_paced: a datagram failed to open\n"); return 1; }
                        memcpy(&t, plain, sizeof t);
                    } else {
                        memcpy(&t, in, sizeof t);
                    }
                    at = now_ns();
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
