/* The CoAP baseline for scripts/bench.d/81-coap: a libcoap server resource and a client session
 * in one process, one thread, one libcoap context, over UDP on 127.0.0.1 (the same shape as
 * `piconet session-bench`: both ends on one loop, same clock).
 *   coap_bench PORT non|con RATE_N LATENCY_N PAYLOAD
 * Each message is a POST /s carrying PAYLOAD bytes (byte 0 tags the phase).
 * non: NON requests with No-Response (RFC 7967, suppress all) - fire and forget, offered in
 *      paced bursts of 32 like session-bench's unreliable phase (the next burst waits until
 *      this one was read, at most 2 ms); delivered/s counted at the server from the first send
 *      to the last arrival.
 * con: CON requests, the server answers 2.04 piggybacked on the ACK; NSTART = 1 (RFC 7252's
 *      default: one outstanding CON per peer), so the rate is acknowledged requests per second.
 * Latency phase: LATENCY_N requests 1 ms apart carrying their CLOCK_MONOTONIC send time;
 * one-way latency = arrival at the server's handler - send.
 * Prints "RATE_MSGS_PER_S LOSS_PERCENT P50_US P99_US" on stdout. */
#include <coap3/coap.h>
#include <arpa/inet.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "bench_clock.h"

static long received_rate, acked, received_latency, latency_capacity;
static long long last_arrival;
static long long *latencies;

static void on_post(coap_resource_t *r, coap_session_t *s, const coap_pdu_t *request,
                    const coap_string_t *query, coap_pdu_t *response) {
    (void)r; (void)s; (void)query;
    long long t = now_ns();
    size_t len; const uint8_t *data;
    if (coap_get_data(request, &len, &data) && len >= 9) {
        if (data[0] == 2) { received_rate++; last_arrival = t; }
        else if (data[0] == 3 && received_latency < latency_capacity) {
            long long sent; memcpy(&sent, data + 1, sizeof sent);
            latencies[received_latency++] = t - sent;
        }
    }
    /* For NON + No-Response libcoap sends nothing; for CON this rides on the ACK. */
    coap_pdu_set_code(response, COAP_RESPONSE_CODE_CHANGED);
}

static coap_response_t on_response(coap_session_t *s, const coap_pdu_t *sent,
                                   const coap_pdu_t *received, const coap_mid_t mid) {
    (void)s; (void)sent; (void)received; (void)mid;
    acked++;
    return COAP_RESPONSE_OK;
}

static int send_post(coap_session_t *s, int con, const uint8_t *payload, size_t size) {
    coap_pdu_t *pdu = coap_pdu_init(con ? COAP_MESSAGE_CON : COAP_MESSAGE_NON, COAP_REQUEST_CODE_POST,
                                    coap_new_message_id(s), coap_session_max_pdu_size(s));
    if (!pdu) return -1;
    coap_add_option(pdu, COAP_OPTION_URI_PATH, 1, (const uint8_t *)"s");
    if (!con) {
        uint8_t suppress_all = 2 | 8 | 16; /* RFC 7967: no 2.xx, 4.xx or 5.xx response */
        coap_add_option(pdu, COAP_OPTION_NORESPONSE, 1, &suppress_all);
    }
    coap_add_data(pdu, size, payload);
    return coap_send(s, pdu) == COAP_INVALID_MID ? -1 : 0;
}

/* Runs the loop until `*counter` reaches `target` or nothing changed for `idle_ms`. */
static void run_until(coap_context_t *ctx, long *counter, long target, int idle_ms) {
    long seen = *counter; long long since = now_ns();
    while (*counter < target) {
        coap_io_process(ctx, 1);
        if (*counter != seen) { seen = *counter; since = now_ns(); }
        else if (now_ns() - since > (long long)idle_ms * 1000000) return;
    }
}

int main(int argc, char **argv) {
    if (argc != 6) { fprintf(stderr, "usage: coap_bench PORT non|con RATE_N LATENCY_N PAYLOAD\n"); return 2; }
    int port = atoi(argv[1]), con = strcmp(argv[2], "con") == 0;
    long rate_n = atol(argv[3]), latency_n = atol(argv[4]);
    size_t size = (size_t)atol(argv[5]);
    if (size < 9 || size > 1000 || rate_n < 1 || latency_n < 1) { fprintf(stderr, "payload 9...1000, counts >= 1\n"); return 2; }
    latency_capacity = latency_n;
    latencies = calloc((size_t)latency_n, sizeof *latencies);
    uint8_t *payload = calloc(1, size);
    if (!latencies || !payload) return 1;

    coap_startup();
    coap_set_log_level(LOG_WARNING);
    coap_context_t *ctx = coap_new_context(NULL);
    if (!ctx) { fprintf(stderr, "coap_new_context failed\n"); return 1; }
    coap_address_t addr;
    coap_address_init(&addr);
    addr.addr.sin.sin_family = AF_INET;
    addr.addr.sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    addr.addr.sin.sin_port = htons((uint16_t)port);
    addr.size = sizeof(struct sockaddr_in);
    if (!coap_new_endpoint(ctx, &addr, COAP_PROTO_UDP)) { fprintf(stderr, "bind 127.0.0.1:%d failed\n", port); return 1; }
    coap_resource_t *resource = coap_resource_init(coap_make_str_const("s"), 0);
    coap_register_request_handler(resource, COAP_REQUEST_POST, on_post);
    coap_add_resource(ctx, resource);
    coap_register_response_handler(ctx, on_response);
    coap_session_t *session = coap_new_client_session(ctx, NULL, &addr, COAP_PROTO_UDP);
    if (!session) { fprintf(stderr, "client session failed\n"); return 1; }

    long long start = now_ns();
    payload[0] = 2;
    long sent = 0;
    while (sent < rate_n) {
        if (con) {
            if (send_post(session, 1, payload, size) < 0) { fprintf(stderr, "coap_send failed\n"); return 1; }
            sent++;
            run_until(ctx, &acked, sent, 3000); /* NSTART = 1: wait for this ACK */
            if (acked < sent) break;
        } else {
            for (int i = 0; i < 32 && sent < rate_n; i++, sent++)
                if (send_post(session, 0, payload, size) < 0) { fprintf(stderr, "coap_send failed\n"); return 1; }
            /* libcoap reads about one datagram per ready socket per pass: drain what this
             * burst put in flight before the next one (or give up on it after 2 ms). */
            long long until = now_ns() + 50000, give_up = now_ns() + 2000000;
            do coap_io_process(ctx, COAP_IO_NO_WAIT);
            while (now_ns() < until || (received_rate < sent && now_ns() < give_up));
        }
    }
    run_until(ctx, &received_rate, rate_n, 500);
    double elapsed = (double)(last_arrival - start) / 1e9;
    double rate = elapsed > 0 ? (double)received_rate / elapsed : 0;
    double loss = 100.0 * (double)(rate_n - received_rate) / (double)rate_n;

    payload[0] = 3;
    for (long i = 0; i < latency_n; i++) {
        long long t = now_ns();
        memcpy(payload + 1, &t, sizeof t);
        send_post(session, con, payload, size);
        long long next = t + 1000000;
        while (now_ns() < next) coap_io_process(ctx, 1);
    }
    run_until(ctx, &received_latency, latency_n, 500);
    if (received_latency == 0) { fprintf(stderr, "no latency samples arrived\n"); return 1; }
    long n = received_latency;
    double p50, p99;
    percentiles_us(latencies, n, &p50, &p99);
    printf("%.0f %.2f %.1f %.1f\n", rate, loss, p50, p99);
    coap_session_release(session);
    coap_free_context(ctx);
    coap_cleanup();
    return 0;
}
