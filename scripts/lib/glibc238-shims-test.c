/* Checks scripts/lib/glibc238-shims.c against what glibc 2.38 documents for these functions;
 * stage 72-arm64 builds and runs it on this machine (glibc 2.36 has none of them, so no clash). */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
long __isoc23_strtol(const char *, char **, int);
long long __isoc23_strtoll(const char *, char **, int);
unsigned long __isoc23_strtoul(const char *, char **, int);
int __isoc23_sscanf(const char *, const char *, ...);
size_t strlcpy(char *, const char *, size_t);
size_t strlcat(char *, const char *, size_t);
static int failed = 0, passed = 0;
#define CHECK(c) do { if (c) passed++; else { failed++; printf("FAILED: %s (line %d)\n", #c, __LINE__); } } while (0)
int main(void) {
  char *end;
  CHECK(__isoc23_strtol("  -42xyz", &end, 10) == -42 && strcmp(end, "xyz") == 0);
  CHECK(__isoc23_strtol("0x1f", &end, 0) == 31 && *end == 0);
  CHECK(__isoc23_strtol("0b101", &end, 0) == 5 && *end == 0);
  CHECK(__isoc23_strtol("-0B11z", &end, 2) == -3 && *end == 'z');
  CHECK(__isoc23_strtol("0b2", &end, 0) == 0 && strcmp(end, "b2") == 0);
  CHECK(__isoc23_strtol("0b101", &end, 10) == 0 && strcmp(end, "b101") == 0);
  errno = 0; CHECK(__isoc23_strtoll("0b1" "0000000000000000000000000000000000000000000000000000000000000000", &end, 0) == LLONG_MAX && errno == ERANGE);
  errno = 0; CHECK(__isoc23_strtoll("-0b1" "000000000000000000000000000000000000000000000000000000000000000", &end, 0) == LLONG_MIN && errno == 0);
  CHECK(__isoc23_strtoll("123456789012", &end, 10) == 123456789012LL);
  CHECK(__isoc23_strtoul("0b1111", &end, 0) == 15 && *end == 0);
  CHECK(__isoc23_strtoul("ffffffff", &end, 16) == 0xffffffffUL && *end == 0);
  int a = 0; char s[8] = "";
  CHECK(__isoc23_sscanf("7 seven", "%d %7s", &a, s) == 2 && a == 7 && strcmp(s, "seven") == 0);
  char b[4];
  CHECK(strlcpy(b, "abcdef", sizeof b) == 6 && strcmp(b, "abc") == 0);
  CHECK(strlcpy(b, "ab", sizeof b) == 2 && strcmp(b, "ab") == 0);
  CHECK(strlcat(b, "cdef", sizeof b) == 6 && strcmp(b, "abc") == 0);
  CHECK(strlcpy(b, "zz", 0) == 2);
  printf("%d passed, %d failed\n", passed, failed);
  return failed != 0;
}
