// Checks Sources/CNodeLibm/libm_subset.c (the libm functions built into the Embedded node)
// against glibc's libm. The stage 70-release-footprint compiles the subset with its names
// prefixed (-Dsin=node_sin ...) and links this against -lm:
//   ceil, floor, round, sqrt: bit-identical to glibc on edge cases and 2 million seeded values;
//   sin, cos: within 1 ulp of glibc for |x| < 1.6e6, within 1e-6 absolute up to 1e9, and in
//   [-1, 1] for every finite x; log: within 1 ulp on positive values, the same special values.
// Prints one line per function and exits 1 on the first disagreement class found.
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

double node_ceil(double), node_floor(double), node_round(double), node_sqrt(double);
double node_sin(double), node_cos(double), node_log(double);

static uint64_t state = 0x9e3779b97f4a7c15ull;
static uint64_t next(void) { state ^= state << 13; state ^= state >> 7; state ^= state << 17; return state; }
static double unit(void) { return (double)(next() >> 11) * 0x1p-53; }
static int same(double a, double b) { return (a != a && b != b) || memcmp(&a, &b, sizeof a) == 0; }
static double ulps(double a, double b) {
    if (same(a, b)) return 0;
    if (a != a || b != b || isinf(a) || isinf(b)) return INFINITY;
    return fabs(a - b) / (nextafter(fabs(b), INFINITY) - fabs(b));
}

static const double edges[] = {
    0.0, -0.0, 0.5, -0.5, 1.5, -1.5, 2.5, -2.5, 0.49999999999999994, -0.49999999999999994, 1.0, -1.0,
    1.0000000000000002, 0.9999999999999999, 4503599627370495.5, -4503599627370495.5, 4503599627370496.0,
    1e300, -1e300, 1e-310, -1e-310, 0x1p-1074, 0.7853981633974483, 3.141592653589793, 1e6, 123456.789,
    INFINITY, -INFINITY, NAN,
};

int main(void) {
    int failed = 0;
    struct { const char *name; double (*mine)(double), (*ref)(double); } exact[] = {
        { "ceil", node_ceil, ceil }, { "floor", node_floor, floor }, { "round", node_round, round }, { "sqrt", node_sqrt, sqrt },
    };
    for (int f = 0; f < 4; f++) {
        long bad = 0, n = 0;
        for (unsigned i = 0; i < sizeof edges / sizeof *edges; i++, n++)
            if (!same(exact[f].mine(edges[i]), exact[f].ref(edges[i]))) bad++;
        for (long i = 0; i < 2000000; i++, n++) {
            double x; uint64_t r = next();
            if (i & 1) memcpy(&x, &r, sizeof x); else x = (unit() - 0.5) * 1e7;
            if (!same(exact[f].mine(x), exact[f].ref(x))) {
                if (bad++ < 3) printf("  %s(%a): %a, glibc %a\n", exact[f].name, x, exact[f].mine(x), exact[f].ref(x));
            }
        }
        printf("%s: %ld of %ld values differ from glibc\n", exact[f].name, bad, n);
        failed |= bad != 0;
    }
    struct { const char *name; double (*mine)(double), (*ref)(double); } trig[] = { { "sin", node_sin, sin }, { "cos", node_cos, cos } };
    for (int f = 0; f < 2; f++) {
        double worst = 0, worstFar = 0; int outside = 0;
        for (long i = 0; i < 2000000; i++) {
            double x = (unit() - 0.5) * 3.2e6;
            double e = ulps(trig[f].mine(x), trig[f].ref(x)); if (e > worst) worst = e;
            double far = (unit() - 0.5) * 2e9;
            double d = fabs(trig[f].mine(far) - trig[f].ref(far)); if (d > worstFar) worstFar = d;
            double any; uint64_t r = next(); memcpy(&any, &r, sizeof any);
            if (isfinite(any)) { double y = trig[f].mine(any); if (!(y >= -1 && y <= 1)) outside++; }
        }
        for (unsigned i = 0; i < sizeof edges / sizeof *edges; i++)
            if (!isfinite(edges[i]) && !(trig[f].mine(edges[i]) != trig[f].mine(edges[i]))) outside++;
        printf("%s: worst %.2f ulp for |x| < 1.6e6, %.2g absolute up to 1e9, %d results outside [-1, 1] or not NaN for inf/NaN\n",
               trig[f].name, worst, worstFar, outside);
        failed |= worst > 1 || worstFar > 1e-6 || outside != 0;
    }
    double worst = 0; long special = 0;
    for (long i = 0; i < 2000000; i++) {
        double x; uint64_t r = next() & 0x7fffffffffffffffull; memcpy(&x, &r, sizeof x);
        if (i % 3 == 0) x = unit() * 100;
        double e = ulps(node_log(x), log(x)); if (e > worst && isfinite(log(x))) worst = e;
    }
    for (unsigned i = 0; i < sizeof edges / sizeof *edges; i++) {
        double a = node_log(edges[i]), b = log(edges[i]);
        if (!same(a, b) && !(isfinite(b) && ulps(a, b) <= 1)) { special++; printf("  log(%a): %a, glibc %a\n", edges[i], a, b); }
    }
    printf("log: worst %.2f ulp on positive values, %ld edge values differ\n", worst, special);
    failed |= worst > 1 || special != 0;
    return failed;
}
