/* The ceiling the crypto alone puts on Noise XX handshakes/s on one core, measured with the
 * same libsodium the session uses: both sides of one XX handshake do 8 X25519 scalar
 * multiplications (each side: its ephemeral key = 1 base-point multiplication, then ee, es/se
 * and se/es = 3 Diffie-Hellman). Prints "dh_us base_us bound_hs_per_s". Nothing else of a
 * handshake (hashing, AEAD, datagrams, state) is counted, so a real handshake is slower. */
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec + t.tv_nsec / 1e9;
}

int main(int argc, char **argv) {
  int n = argc > 1 ? atoi(argv[1]) : 5000;
  if (sodium_init() < 0 || n <= 0) return 1;
  unsigned char sk[32], pk[32], q[32];
  randombytes_buf(sk, sizeof sk);
  if (crypto_scalarmult_base(pk, sk) != 0) return 1;
  double t0 = now();
  for (int i = 0; i < n; i++) {
    if (crypto_scalarmult(q, sk, pk) != 0) return 1;
    sk[0] ^= q[0];  /* a data dependency: no iteration can be skipped */
  }
  double t1 = now();
  for (int i = 0; i < n; i++) {
    if (crypto_scalarmult_base(q, sk) != 0) return 1;
    sk[1] ^= q[1];
  }
  double t2 = now();
  double dh = (t1 - t0) / n, base = (t2 - t1) / n;
  printf("%.1f %.1f %.0f\n", dh * 1e6, base * 1e6, 1.0 / (6 * dh + 2 * base));
  return 0;
}
