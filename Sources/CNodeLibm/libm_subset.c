// The seven libm functions piconet-node calls, compiled into the node in Embedded mode
// (Package.swift adds this target only with PICONET_EMBEDDED=1), so the board binary does not
// load libm.so at all. Why: loading libm.so costs about 380 KiB resident for a program that
// calls seven functions (the loader runs libm's ifunc resolvers, spread over its text, and the
// kernel maps 64 KiB around each), more than a tenth of the node's 3 MiB idle budget; glibc's
// static libm.a cannot be linked into a dynamic program (its x86_64 ifunc resolvers need
// ld.so's private cpu_features). The ordinary build (hub, CLI, tests) keeps glibc's libm.
//
// ceil, floor, round and sqrt are exact functions: any correct implementation returns the same
// bits (sqrt is the hardware instruction: -fno-math-errno). sin, cos and log follow Sun's
// fdlibm (as musl does; copyright 1993 Sun Microsystems, "Permission to use, copy, modify, and
// distribute this software is freely granted, provided that this notice is preserved"): under
// 1 ulp, so the simulated wearable's samples can differ from glibc's in the last bit only.
// sin/cos reduce by pi/2 in three parts (Cody-Waite, fdlibm's medium case): under 1 ulp for
// |x| < 2^20 * pi/2 (1.6e6); beyond that (a simulated wearable's phase after weeks) the
// reduction loses digits gradually (1e-7 absolute at 1e9; any finite x gives a value in
// [-1, 1]) instead of carrying Payne-Hanek's table, whose accuracy a phase of that size
// (ulp >= 2^-22) no longer has anyway.
// Assumes the default rounding mode (round to nearest), as the node never changes it.
#include <stdint.h>
#include "CNodeLibm.h"

typedef union { double f; uint64_t i; } bits64;
static const double toint = 4503599627370496.0; // 2^52: x + toint - toint rounds x to an integer

double floor(double x) {
    bits64 u = { x };
    int e = (int)(u.i >> 52 & 0x7ff);
    if (e >= 0x3ff + 52 || x == 0) return x;
    volatile double y = (u.i >> 63) ? x - toint + toint - x : x + toint - toint - x;
    if (e <= 0x3ff - 1) return (u.i >> 63) ? -1.0 : 0.0;
    return y > 0 ? x + y - 1 : x + y;
}

double ceil(double x) {
    bits64 u = { x };
    int e = (int)(u.i >> 52 & 0x7ff);
    if (e >= 0x3ff + 52 || x == 0) return x;
    volatile double y = (u.i >> 63) ? x - toint + toint - x : x + toint - toint - x;
    if (e <= 0x3ff - 1) return (u.i >> 63) ? -0.0 : 1.0;
    return y < 0 ? x + y + 1 : x + y;
}

double round(double x) {
    bits64 u = { x };
    int e = (int)(u.i >> 52 & 0x7ff);
    if (e >= 0x3ff + 52) return x;
    int negative = (int)(u.i >> 63);
    if (negative) x = -x;
    if (e < 0x3ff - 1) return 0 * u.f; // |x| < 0.5: a zero of x's sign
    volatile double t = x + toint - toint;
    double y = t - x;
    if (y > 0.5) y = y + x - 1;
    else if (y <= -0.5) y = y + x + 1;
    else y = y + x;
    return negative ? -y : y;
}

double sqrt(double x) { return __builtin_sqrt(x); } // one instruction with -fno-math-errno

// fdlibm __kernel_sin / __kernel_cos on [-pi/4, pi/4]; y is the tail of x.
static double kernel_sin(double x, double y, int iy) {
    static const double S1 = -1.66666666666666324348e-01, S2 = 8.33333333332248946124e-03,
        S3 = -1.98412698298579493134e-04, S4 = 2.75573137070700676789e-06,
        S5 = -2.50507602534068634195e-08, S6 = 1.58969099521155010221e-10;
    double z = x * x, w = z * z;
    double r = S2 + z * (S3 + z * S4) + z * w * (S5 + z * S6);
    double v = z * x;
    if (iy == 0) return x + v * (S1 + z * r);
    return x - ((z * (0.5 * y - v * r) - y) - v * S1);
}

static double kernel_cos(double x, double y) {
    static const double C1 = 4.16666666666666019037e-02, C2 = -1.38888888888741095749e-03,
        C3 = 2.48015872894767294178e-05, C4 = -2.75573143513906633035e-07,
        C5 = 2.08757232129817482790e-09, C6 = -1.13596475577881948265e-11;
    double z = x * x, w = z * z;
    double r = z * (C1 + z * (C2 + z * C3)) + w * w * (C4 + z * (C5 + z * C6));
    double hz = 0.5 * z;
    w = 1.0 - hz;
    return w + (((1.0 - w) - hz) + (z * r - x * y));
}

// x = n * pi/2 + y[0] + y[1], |y| <= pi/4; returns n (mod 4 is what matters).
static int64_t reduce_pio2(double x, double *y) {
    static const double invpio2 = 6.36619772367581382433e-01,
        pio2_1 = 1.57079632673412561417e+00, pio2_1t = 6.07710050650619224932e-11,
        pio2_2 = 6.07710050630396597660e-11, pio2_2t = 2.02226624879595063154e-21,
        pio2_3 = 2.02226624871116645580e-21, pio2_3t = 8.47842766036889956997e-32;
    static const double toint_n = 6755399441055744.0; // 1.5 * 2^52
    // |x| >= 2^30: whole turns off first, each pass shrinking |x| by about 2^-50 (at most 21
    // passes from DBL_MAX); the phase digits are gone at that size anyway, the result stays finite.
    for (int pass = 0; pass < 32; pass++) {
        bits64 big = { x };
        if ((big.i >> 52 & 0x7ff) < 0x3ff + 30) break;
        double k = floor(x * 1.59154943091895335768e-01 + 0.5); // x / 2pi
        x = (x - k * (4 * pio2_1)) - k * (4 * pio2_1t);
    }
    volatile double scaled = x * invpio2 + toint_n;
    double fn = scaled - toint_n;
    double r = x - fn * pio2_1, w = fn * pio2_1t;
    y[0] = r - w;
    bits64 ux = { x }, uy = { y[0] };
    int ex = (int)(ux.i >> 52 & 0x7ff), ey = (int)(uy.i >> 52 & 0x7ff);
    if (ex - ey > 16) { // cancellation: 33 more bits of pi/2
        double t = r;
        w = fn * pio2_2; r = t - w; w = fn * pio2_2t - ((t - r) - w); y[0] = r - w;
        uy.f = y[0]; ey = (int)(uy.i >> 52 & 0x7ff);
        if (ex - ey > 49) { // and 33 more
            t = r;
            w = fn * pio2_3; r = t - w; w = fn * pio2_3t - ((t - r) - w); y[0] = r - w;
        }
    }
    y[1] = (r - y[0]) - w;
    double m = fn - 4.0 * floor(fn * 0.25); // fn mod 4, exact, whatever fn's size
    return (int64_t)m;
}

double sin(double x) {
    bits64 u = { x };
    uint32_t ix = (uint32_t)(u.i >> 32) & 0x7fffffff;
    if (ix <= 0x3fe921fb) { // |x| <= pi/4
        if (ix < 0x3e500000) return x; // |x| < 2^-26: sin x = x in double
        return kernel_sin(x, 0.0, 0);
    }
    if (ix >= 0x7ff00000) return x - x; // inf or NaN: NaN
    double y[2];
    switch (reduce_pio2(x, y) & 3) {
    case 0: return kernel_sin(y[0], y[1], 1);
    case 1: return kernel_cos(y[0], y[1]);
    case 2: return -kernel_sin(y[0], y[1], 1);
    default: return -kernel_cos(y[0], y[1]);
    }
}

double cos(double x) {
    bits64 u = { x };
    uint32_t ix = (uint32_t)(u.i >> 32) & 0x7fffffff;
    if (ix <= 0x3fe921fb) {
        if (ix < 0x3e46a09e) return 1.0; // |x| < 2^-27 * sqrt(2)
        return kernel_cos(x, 0.0);
    }
    if (ix >= 0x7ff00000) return x - x;
    double y[2];
    switch (reduce_pio2(x, y) & 3) {
    case 0: return kernel_cos(y[0], y[1]);
    case 1: return -kernel_sin(y[0], y[1], 1);
    case 2: return -kernel_cos(y[0], y[1]);
    default: return kernel_sin(y[0], y[1], 1);
    }
}

// fdlibm __ieee754_log: x = 2^k * (1 + f), sqrt(2)/2 < 1 + f < sqrt(2); log(1 + f) by a
// minimax polynomial in s = f / (2 + f).
double log(double x) {
    static const double ln2_hi = 6.93147180369123816490e-01, ln2_lo = 1.90821492927058770002e-10,
        Lg1 = 6.666666666666735130e-01, Lg2 = 3.999999999940941908e-01, Lg3 = 2.857142874366239149e-01,
        Lg4 = 2.222219843214978396e-01, Lg5 = 1.818357216161805012e-01, Lg6 = 1.531383769920937332e-01,
        Lg7 = 1.479819860511658591e-01;
    bits64 u = { x };
    uint32_t hx = (uint32_t)(u.i >> 32);
    int k = 0;
    if (hx < 0x00100000 || hx >> 31) {
        if (u.i << 1 == 0) return -1 / (x * x); // log(+-0) = -inf
        if (hx >> 31) return (x - x) / 0.0;     // log(negative) = NaN
        k -= 54; x *= 18014398509481984.0;       // subnormal: scale by 2^54
        u.f = x; hx = (uint32_t)(u.i >> 32);
    } else if (hx >= 0x7ff00000) {
        return x;
    } else if (hx == 0x3ff00000 && u.i << 32 == 0) {
        return 0;
    }
    hx += 0x3ff00000 - 0x3fe6a09e;
    k += (int)(hx >> 20) - 0x3ff;
    hx = (hx & 0x000fffff) + 0x3fe6a09e;
    u.i = (uint64_t)hx << 32 | (u.i & 0xffffffff);
    x = u.f;
    double f = x - 1.0, hfsq = 0.5 * f * f, s = f / (2.0 + f), z = s * s, w = z * z;
    double t1 = w * (Lg2 + w * (Lg4 + w * Lg6));
    double t2 = z * (Lg1 + w * (Lg3 + w * (Lg5 + w * Lg7)));
    double R = t2 + t1, dk = k;
    return s * (hfsq + R) + dk * ln2_lo - hfsq + f + dk * ln2_hi;
}
