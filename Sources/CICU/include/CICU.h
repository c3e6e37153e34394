#ifndef WIKILOG_CICU_H
#define WIKILOG_CICU_H

#include <stdint.h>

/// The sort key of UTF-8 `text` (`length` bytes; invalid sequences are read as U+FFFD) under
/// ICU's root collation with its default attributes, as CouchDB's `couch_ejson_compare` opens
/// it (`ucol_open("")`): comparing two keys byte by byte orders the strings as ICU's
/// `ucol_strcoll` does. The key ends with its only zero byte. Writes at most `capacity` bytes
/// to `out` and returns the key's length with its zero, which may be more than `capacity`
/// (call again with room for it); -1 when ICU fails.
int32_t wikilog_icu_sort_key(const char *text, int32_t length, uint8_t *out, int32_t capacity);

/// ICU's comparison of two UTF-8 strings under the same collation: -1, 0 or 1.
int32_t wikilog_icu_compare(const char *a, int32_t alength, const char *b, int32_t blength);

/// The version of ICU's collation (UCA), as "major.minor.patch".
const char *wikilog_icu_uca_version(void);

/// The versions CouchDB's `/_node/{node}/_versions` reports of its collation driver, four
/// numbers each: ICU's own (`u_getVersion`) in `out[0..<4]`, its collation algorithm's
/// (`ucol_getUCAVersion`) in `out[4..<8]` and the root collator's (`ucol_getVersion`) in
/// `out[8..<12]`; zeros when ICU fails.
void wikilog_icu_versions(uint8_t *out);

#endif
