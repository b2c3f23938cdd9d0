// The few libm functions the Embedded node calls, built into the node (see libm_subset.c).
// Nothing to import: the Swift code calls the C names (ceil, sin, ...) as before; only the
// link changes. Pure: math, no I/O.
#ifndef PICONET_NODE_LIBM_H
#define PICONET_NODE_LIBM_H
double ceil(double);
double floor(double);
double round(double);
double sqrt(double);
double sin(double);
double cos(double);
double log(double);
#endif
