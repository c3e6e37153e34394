#ifndef WIKILOG_COPENSSL_SHIM_H
#define WIKILOG_COPENSSL_SHIM_H
// OpenSSL's libcrypto (Debian: libssl-dev), for the log's Merkle tree: SHA-256 with its public
// SHA256_Init/Update/Final, which hash straight into a context on the stack. (OpenSSL 3 marks
// them deprecated in favour of EVP, whose one-shot and context calls look the digest up and
// allocate on every hash: more than hashing a 65-byte tree node costs.)
#include <stddef.h>
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
#include <openssl/sha.h>

// SHA-256 of `a` (`na` bytes) followed by `b` (`nb` bytes, none when 0), into `out`.
static inline void wikilog_sha256(const void *a, size_t na, const void *b, size_t nb,
                                  unsigned char out[32]) {
  SHA256_CTX context;
  SHA256_Init(&context);
  SHA256_Update(&context, a, na);
  if (nb > 0) SHA256_Update(&context, b, nb);
  SHA256_Final(out, &context);
}
#pragma GCC diagnostic pop
#endif
