#ifndef WIKILOG_CLMDB_SHIM_H
#define WIKILOG_CLMDB_SHIM_H
// LMDB's public header (Debian: liblmdb-dev; Homebrew: lmdb).
#include <lmdb.h>
#include <stddef.h>
#include <stdint.h>

// CRC-32C with the CPU's instruction where it has one (x86-64 SSE4.2, ARMv8 CRC), for the
// log's record checksums. wikilog_crc32c_update returns 0 and sets *done = 0 when the CPU lacks
// the instruction; Log then uses its table-driven version. `crc` is the running (inverted) value.
#if defined(__x86_64__)
#include <cpuid.h>
static inline int wikilog_crc32c_hardware(void) {
  unsigned int a, b, c, d;
  if (!__get_cpuid(1, &a, &b, &c, &d)) return 0;
  return (c & bit_SSE4_2) != 0;
}
__attribute__((target("sse4.2")))
static inline uint32_t wikilog_crc32c_update(uint32_t crc, const void *data, size_t n) {
  const unsigned char *p = (const unsigned char *)data;
  uint64_t c = crc;
  while (n >= 8) {
    uint64_t w;
    __builtin_memcpy(&w, p, 8);
    c = __builtin_ia32_crc32di(c, w);
    p += 8;
    n -= 8;
  }
  uint32_t c32 = (uint32_t)c;
  while (n--) c32 = __builtin_ia32_crc32qi(c32, *p++);
  return c32;
}
#elif defined(__aarch64__) && defined(__ARM_FEATURE_CRC32)
#include <arm_acle.h>
static inline int wikilog_crc32c_hardware(void) { return 1; }
static inline uint32_t wikilog_crc32c_update(uint32_t crc, const void *data, size_t n) {
  const unsigned char *p = (const unsigned char *)data;
  while (n >= 8) {
    uint64_t w;
    __builtin_memcpy(&w, p, 8);
    crc = __crc32cd(crc, w);
    p += 8;
    n -= 8;
  }
  while (n--) crc = __crc32cb(crc, *p++);
  return crc;
}
#else
static inline int wikilog_crc32c_hardware(void) { return 0; }
static inline uint32_t wikilog_crc32c_update(uint32_t crc, const void *data, size_t n) {
  (void)data;
  (void)n;
  return crc;
}
#endif

// A spin-wait hint to the CPU (x86 PAUSE, ARM YIELD): for the Merkle leaf hasher's short waits
// for the writer, which a system call's round trip or a lost time slice would make long.
static inline void wikilog_spin_pause(void) {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  __asm__ __volatile__("yield");
#endif
}

#endif
