#ifndef WIKILOG_CZLIB_SHIM_H
#define WIKILOG_CZLIB_SHIM_H
// zlib (Debian: zlib1g-dev), for gzip-encoding attachments exactly as CouchDB stores them.
#include <zlib.h>

// deflateInit2 is a macro over deflateInit2_; this wrapper is what Swift can call.
static inline int wikilog_deflate_init_gzip(z_stream *stream, int level) {
  // CouchDB's couch_stream: zlib:deflateInit(Z, Level, deflated, 16 + 15, 8, default).
  return deflateInit2(stream, level, Z_DEFLATED, 16 + 15, 8, Z_DEFAULT_STRATEGY);
}

// inflateInit2 likewise: a gzip stream (window 2^15, gzip wrapper only), for sending gzip-stored
// attachments decoded.
static inline int wikilog_inflate_init_gzip(z_stream *stream) {
  return inflateInit2(stream, 16 + 15);
}
#endif
