/* The MQTT baseline for scripts/bench.d/80-mqtt: one publisher and one subscriber (libmosquitto,
 * each with its own network thread) in one process, through a Mosquitto broker on 127.0.0.1.
 *   mqtt_bench PORT QOS RATE_N LATENCY_N PAYLOAD
 * Rate phase: RATE_N messages published as fast as libmosquitto takes them; delivered/s is
 * counted at the subscriber from the first publish to the last arrival (like session-bench).
 * Latency phase: LATENCY_N messages 1 ms apart, each carrying its CLOCK_MONOTONIC send time;
 * one-way latency = arrival - send (same process, same clock). Byte 0 tags the phase.
 * Prints "RATE_MSGS_PER_S LOSS_PERCENT P50_US P99_US" on stdout. */
#include <mosquitto.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "bench_clock.h"
#include <unistd.h>

static const char *TOPIC = "piconet/bench/sensor";
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static long received_rate, received_latency, subscribed;
static long long last_arrival;
static long long *latencies;
static long latency_capacity;

static void on_subscribe(struct mosquitto *m, void *u, int mid, int n, const int *q) {
    (void)m; (void)u; (void)mid; (void)n; (void)q;
    pthread_mutex_lock(&lock); subscribed = 1; pthread_mutex_unlock(&lock);
}

static void on_message(struct mosquitto *m, void *u, const struct mosquitto_message *msg) {
    (void)m; (void)u;
    long long t = now_ns();
    const unsigned char *p = msg->payload;
    if (msg->payloadlen < 9) return;
    pthread_mutex_lock(&lock);
    if (p[0] == 2) { received_rate++; last_arrival = t; }
    else if (p[0] == 3 && received_latency < latency_capacity) {
        long long sent; memcpy(&sent, p + 1, sizeof sent);
        latencies[received_latency++] = t - sent;
    }
    pthread_mutex_unlock(&lock);
}

static struct mosquitto *client(const char *id, int port) {
    struct mosquitto *m = mosquitto_new(id, true, NULL);
    if (!m) { fprintf(stderr, "mosquitto_new failed\n"); exit(1); }
    /* Small messages one at a time: without this, Nagle holds them back behind unacked ones. */
    mosquitto_int_option(m, MOSQ_OPT_TCP_NODELAY, 1);
    if (mosquitto_connect(m, "127.0.0.1", port, 60) != MOSQ_ERR_SUCCESS) {
        fprintf(stderr, "connect to 127.0.0.1:%d failed\n", port); exit(1);
    }
    return m;
}

/* Waits until `*counter` reaches `target` or nothing arrived for `idle_ms`. */
static void wait_for(long *counter, long target, int idle_ms) {
    long seen = -1; int idle = 0;
    for (;;) {
        pthread_mutex_lock(&lock); long c = *counter; pthread_mutex_unlock(&lock);
        if (c >= target) return;
        if (c == seen) { if (++idle >= idle_ms) return; } else { seen = c; idle = 0; }
        usleep(1000);
    }
}

int main(int argc, char **argv) {
    if (argc != 6) { fprintf(stderr, "usage: mqtt_bench PORT QOS RATE_N LATENCY_N PAYLOAD\n"); return 2; }
    int port = atoi(argv[1]), qos = atoi(argv[2]);
    long rate_n = atol(argv[3]), latency_n = atol(argv[4]);
    int size = atoi(argv[5]);
    if (size < 9 || rate_n < 1 || latency_n < 1) { fprintf(stderr, "payload >= 9, counts >= 1\n"); return 2; }
    latency_capacity = latency_n;
    latencies = calloc((size_t)latency_n, sizeof *latencies);
    unsigned char *payload = calloc(1, (size_t)size);
    if (!latencies || !payload) return 1;

    mosquitto_lib_init();
    struct mosquitto *sub = client("piconet-bench-sub", port);
    struct mosquitto *pub = client("piconet-bench-pub", port);
    mosquitto_subscribe_callback_set(sub, on_subscribe);
    mosquitto_message_callback_set(sub, on_message);
    mosquitto_loop_start(sub);
    mosquitto_loop_start(pub);
    mosquitto_subscribe(sub, NULL, TOPIC, qos);
    wait_for(&subscribed, 1, 3000);
    if (!subscribed) { fprintf(stderr, "no SUBACK from the broker\n"); return 1; }

    long long start = now_ns();
    payload[0] = 2;
    for (long i = 0; i < rate_n; i++) {
        int rc;
        while ((rc = mosquitto_publish(pub, NULL, TOPIC, size, payload, qos, false)) == MOSQ_ERR_NOMEM) usleep(100);
        if (rc != MOSQ_ERR_SUCCESS) { fprintf(stderr, "publish: %s\n", mosquitto_strerror(rc)); return 1; }
    }
    wait_for(&received_rate, rate_n, 2000);
    pthread_mutex_lock(&lock);
    double elapsed = (double)(last_arrival - start) / 1e9;
    double rate = elapsed > 0 ? (double)received_rate / elapsed : 0;
    double loss = 100.0 * (double)(rate_n - received_rate) / (double)rate_n;
    pthread_mutex_unlock(&lock);

    payload[0] = 3;
    for (long i = 0; i < latency_n; i++) {
        long long t = now_ns();
        memcpy(payload + 1, &t, sizeof t);
        mosquitto_publish(pub, NULL, TOPIC, size, payload, qos, false);
        usleep(1000);
    }
    wait_for(&received_latency, latency_n, 500);
    pthread_mutex_lock(&lock);
    long n = received_latency;
    pthread_mutex_unlock(&lock);
    if (n == 0) { fprintf(stderr, "no latency samples arrived\n"); return 1; }
    double p50, p99;
    percentiles_us(latencies, n, &p50, &p99);
    printf("%.0f %.2f %.1f %.1f\n", rate, loss, p50, p99);
    mosquitto_disconnect(pub); mosquitto_disconnect(sub);
    mosquitto_loop_stop(pub, false); mosquitto_loop_stop(sub, false);
    mosquitto_destroy(pub); mosquitto_destroy(sub);
    mosquitto_lib_cleanup();
    return 0;
}
