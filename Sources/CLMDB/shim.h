#ifndef WIKILOG_CLMDB_SHIM_H
#define WIKILOG_CLMDB_SHIM_H
// LMDB's public header (Debian: liblmdb-dev; Homebrew: lmdb).
#include <lmdb.h>
#endif
