/* The glibc 2.38 functions that Debian's aarch64 Swift runtime (libswiftCore.a, libdispatch.a,
 * built against sid's glibc) references and glibc 2.36 (Debian 12 / Raspberry Pi OS bookworm) lacks:
 * the C23 entry points below and strlcpy/strlcat (BSD's, added to glibc in 2.38). Found with
 * `llvm-nm -u` over every archive of swift_static/linux: __isoc23_{strtol,strtoll,strtoul,sscanf}.
 * Linked into the aarch64 piconet-hub and piconet (scripts/lib/aarch64.sh) so that they run on
 * bookworm as well as trixie. glibc 2.38 added them as the C23 variants of strtol, strtoll and
 * sscanf: the only difference is that base 0 or 2 also accepts a "0b"/"0B" binary prefix.
 * Here: strtol/strtoll after handling that prefix; sscanf forwards to vsscanf (no %b). */
#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Parses "[space][sign]0b<binary digits>" when base allows it; returns 1 and the value, or 0
 * when the text has no binary prefix (then the C library's function parses it). */
static int binary_prefixed(const char *s, char **end, int base, long long min, long long max, long long *out) {
  if (base != 0 && base != 2) return 0;
  const char *p = s;
  while (isspace((unsigned char)*p)) p++;
  int negative = 0;
  if (*p == '+' || *p == '-') negative = (*p++ == '-');
  if (p[0] != '0' || (p[1] != 'b' && p[1] != 'B') || (p[2] != '0' && p[2] != '1')) return 0;
  p += 2;
  unsigned long long v = 0; int overflow = 0;
  for (; *p == '0' || *p == '1'; p++) {
    if (v > (ULLONG_MAX >> 1)) overflow = 1;
    v = (v << 1) | (unsigned long long)(*p - '0');
  }
  if (end) *end = (char *)p;
  unsigned long long limit = negative ? (unsigned long long)max + 1 : (unsigned long long)max;
  if (overflow || v > limit) { errno = ERANGE; *out = negative ? min : max; return 1; }
  *out = negative ? (long long)(0 - v) : (long long)v;
  return 1;
}

long __isoc23_strtol(const char *s, char **end, int base) {
  long long v;
  if (binary_prefixed(s, end, base, LONG_MIN, LONG_MAX, &v)) return (long)v;
  return strtol(s, end, base);
}

long long __isoc23_strtoll(const char *s, char **end, int base) {
  long long v;
  if (binary_prefixed(s, end, base, LLONG_MIN, LLONG_MAX, &v)) return v;
  return strtoll(s, end, base);
}

unsigned long __isoc23_strtoul(const char *s, char **end, int base) {
  long long v;
  /* strtoul's range is ULONG_MAX and a "-" negates; binary literals that large are not expected
   * from the runtime (UUID and ICU version digits), so only the common range is read here. */
  if (binary_prefixed(s, end, base, LLONG_MIN, LLONG_MAX, &v)) return (unsigned long)v;
  return strtoul(s, end, base);
}

int __isoc23_sscanf(const char *s, const char *format, ...) {
  va_list args;
  va_start(args, format);
  int n = vsscanf(s, format, args);
  va_end(args);
  return n;
}

/* BSD strlcpy: copies at most size - 1 bytes, always terminates (size > 0), returns strlen(src). */
size_t strlcpy(char *dst, const char *src, size_t size) {
  size_t n = strlen(src);
  if (size > 0) {
    size_t m = n < size - 1 ? n : size - 1;
    memcpy(dst, src, m);
    dst[m] = 0;
  }
  return n;
}

/* BSD strlcat: appends to the string in dst (of at most size bytes), returns the length tried. */
size_t strlcat(char *dst, const char *src, size_t size) {
  size_t d = strnlen(dst, size);
  if (d == size) return size + strlen(src);
  return d + strlcpy(dst + d, src, size - d);
}
