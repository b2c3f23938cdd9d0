// libsodium (Debian libsodium-dev 1.0.18, amd64 and arm64) for PiconetSession's Noise:
// X25519, ChaCha20-Poly1305 IETF, SHA-256, HMAC-SHA256, randombytes, sodium_memzero.
// A C library rather than a Swift package so the node can build in Embedded Swift
// (swift-crypto cannot) and link it statically for a board. Only PiconetSession imports this.
#ifndef PICONET_SODIUM_SHIM_H
#define PICONET_SODIUM_SHIM_H
#include <sodium.h>
#endif
