/* Shared by the C baselines of scripts/bench.d (mqtt_bench.c, coap_bench.c, udp_blaster.c,
 * udp_pingpong.c, udp_oneway_paced.c):
 * the clock every figure uses (CLOCK_MONOTONIC, same as `piconet session-bench`) and the
 * p50/p99 of a latency sample, so all rows are measured and summarised the same way. */
#ifndef PICONET_BENCH_CLOCK_H
#define PICONET_BENCH_CLOCK_H
#include <stdlib.h>
#include <time.h>

static inline long long now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (long long)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

static inline int compare_ns(const void *a, const void *b) {
    long long x = *(const long long *)a, y = *(const long long *)b;
    return (x > y) - (x < y);
}

/* Sorts `samples` (n > 0, nanoseconds) and returns p50 and p99 in microseconds. */
static inline void percentiles_us(long long *samples, long n, double *p50, double *p99) {
    qsort(samples, (size_t)n, sizeof *samples, compare_ns);
    long i99 = n * 99 / 100;
    if (i99 > n - 1) i99 = n - 1;
    *p50 = samples[n / 2] / 1000.0;
    *p99 = samples[i99] / 1000.0;
}
#endif
