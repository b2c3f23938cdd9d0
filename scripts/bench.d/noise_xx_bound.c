/* The ceiling the protocol's crypto puts on Noise XX handshakes/s on one core: both sides of
 * Noise_XX_25519_ChaChaPoly_SHA256 (the session's protocol) in one loop, every operation the
 * Noise specification requires and nothing else: 8 X25519 (2 ephemeral keys, ee, es, se on
 * each side), the SHA-256 MixHash and HMAC-SHA256 HKDF chain, and ChaCha20-Poly1305 for the
 * static keys and payloads (PAYLOAD bytes in messages 2 and 3), then Split, with the same
 * libsodium the session links. No datagrams, no state tables, no allocation.
 * x25519_bound.c counts the scalar multiplications alone; this adds the rest of the crypto.
 *
 * usage: noise_xx_bound N [PAYLOAD]; prints "handshakes_per_s". Exits 1 if the two sides'
 * transport keys differ (the handshake must be a real one). */
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

typedef struct {
  unsigned char h[32], ck[32], k[32];
  int has_key;
  unsigned long long n;
} symmetric;

static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec + t.tv_nsec / 1e9;
}

static void mix_hash(symmetric *s, const unsigned char *data, size_t len) {
  crypto_hash_sha256_state st;
  crypto_hash_sha256_init(&st);
  crypto_hash_sha256_update(&st, s->h, 32);
  crypto_hash_sha256_update(&st, data, len);
  crypto_hash_sha256_final(&st, s->h);
}

static void hmac(const unsigned char key[32], const unsigned char *a, size_t alen, const unsigned char *b, size_t blen,
                 unsigned char out[32]) {
  crypto_auth_hmacsha256_state st;
  crypto_auth_hmacsha256_init(&st, key, 32);
  crypto_auth_hmacsha256_update(&st, a, alen);
  if (blen) crypto_auth_hmacsha256_update(&st, b, blen);
  crypto_auth_hmacsha256_final(&st, out);
}

/* HKDF with two outputs (Noise section 4.3): ck and k (or the two Split keys). */
static void hkdf2(const unsigned char ck[32], const unsigned char *ikm, size_t len, unsigned char o1[32], unsigned char o2[32]) {
  unsigned char temp[32], one = 1, two = 2, t1[32];
  hmac(ck, ikm, len, NULL, 0, temp);
  hmac(temp, &one, 1, NULL, 0, t1);
  hmac(temp, t1, 32, &two, 1, o2);
  memcpy(o1, t1, 32);
}

static void mix_key(symmetric *s, const unsigned char dh[32]) {
  hkdf2(s->ck, dh, 32, s->ck, s->k);
  s->has_key = 1;
  s->n = 0;
}

static void nonce(unsigned long long n, unsigned char out[12]) {
  memset(out, 0, 12);
  for (int i = 0; i < 8; i++) out[4 + i] = (unsigned char)(n >> (8 * i));
}

static size_t encrypt_and_hash(symmetric *s, const unsigned char *p, size_t len, unsigned char *out) {
  size_t written = len;
  if (s->has_key) {
    unsigned char iv[12];
    unsigned long long clen;
    nonce(s->n++, iv);
    crypto_aead_chacha20poly1305_ietf_encrypt(out, &clen, p, len, s->h, 32, NULL, iv, s->k);
    written = (size_t)clen;
  } else {
    memcpy(out, p, len);
  }
  mix_hash(s, out, written);
  return written;
}

static int decrypt_and_hash(symmetric *s, const unsigned char *c, size_t len, unsigned char *out) {
  if (s->has_key) {
    unsigned char iv[12];
    unsigned long long plen;
    nonce(s->n++, iv);
    if (crypto_aead_chacha20poly1305_ietf_decrypt(out, &plen, NULL, c, len, s->h, 32, iv, s->k) != 0) return -1;
  } else {
    memcpy(out, c, len);
  }
  mix_hash(s, c, len);
  return 0;
}

static void initialize(symmetric *s) {
  static const char name[] = "Noise_XX_25519_ChaChaPoly_SHA256"; /* exactly 32 bytes: used as h */
  memcpy(s->h, name, 32);
  memcpy(s->ck, s->h, 32);
  s->has_key = 0;
  s->n = 0;
  mix_hash(s, (const unsigned char *)"", 0); /* the empty prologue */
}

static int dh(unsigned char out[32], const unsigned char sk[32], const unsigned char pk[32]) {
  return crypto_scalarmult(out, sk, pk);
}

int main(int argc, char **argv) {
  int count = argc > 1 ? atoi(argv[1]) : 2000;
  size_t payload = argc > 2 ? (size_t)atoi(argv[2]) : 64;
  if (sodium_init() < 0 || count <= 0 || payload > 1024) return 1;
  unsigned char is[32], ip[32], rs[32], rp[32];
  randombytes_buf(is, 32);
  crypto_scalarmult_base(ip, is);
  randombytes_buf(rs, 32);
  crypto_scalarmult_base(rp, rs);
  unsigned char body[1024] = {0}, msg[2048], plain[1100], shared[32];
  unsigned char i_send[32], i_recv[32], r_send[32], r_recv[32];
  double t0 = now();
  for (int round = 0; round < count; round++) {
    symmetric a, b;
    unsigned char ie[32], iep[32], re[32], rep[32], a_re[32], a_rs[32], b_re[32], b_rs[32];
    size_t len, at;
    initialize(&a);
    initialize(&b);
    /* -> e */
    randombytes_buf(ie, 32);
    crypto_scalarmult_base(iep, ie);
    memcpy(msg, iep, 32);
    mix_hash(&a, iep, 32);
    len = 32 + encrypt_and_hash(&a, body, 0, msg + 32);
    memcpy(b_re, msg, 32);
    mix_hash(&b, b_re, 32);
    if (decrypt_and_hash(&b, msg + 32, len - 32, plain)) return 1;
    /* <- e, ee, s, es */
    randombytes_buf(re, 32);
    crypto_scalarmult_base(rep, re);
    memcpy(msg, rep, 32);
    mix_hash(&b, rep, 32);
    if (dh(shared, re, b_re)) return 1;
    mix_key(&b, shared);
    at = 32 + encrypt_and_hash(&b, rp, 32, msg + 32);
    if (dh(shared, rs, b_re)) return 1;
    mix_key(&b, shared);
    len = at + encrypt_and_hash(&b, body, payload, msg + at);
    memcpy(a_re, msg, 32);
    mix_hash(&a, a_re, 32);
    if (dh(shared, ie, a_re)) return 1;
    mix_key(&a, shared);
    if (decrypt_and_hash(&a, msg + 32, 48, a_rs)) return 1;
    if (dh(shared, ie, a_rs)) return 1;
    mix_key(&a, shared);
    if (decrypt_and_hash(&a, msg + 80, len - 80, plain)) return 1;
    /* -> s, se */
    at = encrypt_and_hash(&a, ip, 32, msg);
    if (dh(shared, is, a_re)) return 1;
    mix_key(&a, shared);
    len = at + encrypt_and_hash(&a, body, payload, msg + at);
    if (decrypt_and_hash(&b, msg, 48, b_rs)) return 1;
    if (dh(shared, re, b_rs)) return 1;
    mix_key(&b, shared);
    if (decrypt_and_hash(&b, msg + 48, len - 48, plain)) return 1;
    hkdf2(a.ck, NULL, 0, i_send, i_recv);
    hkdf2(b.ck, NULL, 0, r_recv, r_send);
    if (memcmp(i_send, r_recv, 32) || memcmp(i_recv, r_send, 32)) { fprintf(stderr, "noise_xx_bound: keys differ\n"); return 1; }
    body[0] ^= i_send[0]; /* a data dependency between rounds */
  }
  double t1 = now();
  printf("%.0f\n", count / (t1 - t0));
  return 0;
}
