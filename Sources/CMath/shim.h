// libm for PiconetSensors' simulated wearable (sin, cos, log). A C module rather than
// swift-numerics' RealModule so the same source builds in Embedded Swift (the node) and in
// ordinary Swift; on Linux RealModule called these same libm functions, so the seeded
// samples are unchanged. Pure: math, no I/O. Only PiconetSensors imports this.
#ifndef PICONET_MATH_SHIM_H
#define PICONET_MATH_SHIM_H
#include <math.h>
#endif
