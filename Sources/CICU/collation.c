// ICU's root collation for wikilog's Collation (CouchDB's view and Mango order of strings).
// One collator for the process, opened once; ICU's const functions are thread-safe.
#include "CICU.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <unicode/ucol.h>
#include <unicode/ustring.h>
#include <unicode/uiter.h>
#include <unicode/uversion.h>
#include <string.h>

static UCollator *collator = NULL;
static pthread_once_t once = PTHREAD_ONCE_INIT;
static char version[32] = "";

static void open_collator(void) {
  UErrorCode status = U_ZERO_ERROR;
  collator = ucol_open("", &status);
  if (U_FAILURE(status)) {
    collator = NULL;
    return;
  }
  UVersionInfo info;
  ucol_getUCAVersion(collator, info);
  snprintf(version, sizeof version, "%d.%d.%d", info[0], info[1], info[2]);
}

int32_t wikilog_icu_sort_key(const char *text, int32_t length, uint8_t *out, int32_t capacity) {
  pthread_once(&once, open_collator);
  if (collator == NULL) return -1;
  UChar stack[256];
  UChar *buffer = stack;
  int32_t units = 0;
  UErrorCode status = U_ZERO_ERROR;
  u_strFromUTF8WithSub(buffer, 256, &units, text, length, 0xFFFD, NULL, &status);
  if (status == U_BUFFER_OVERFLOW_ERROR) {
    buffer = malloc(sizeof(UChar) * (size_t)(units + 1));
    if (buffer == NULL) return -1;
    status = U_ZERO_ERROR;
    u_strFromUTF8WithSub(buffer, units + 1, &units, text, length, 0xFFFD, NULL, &status);
  }
  int32_t result = -1;
  if (!U_FAILURE(status)) {
    result = ucol_getSortKey(collator, buffer, units, out, capacity);
    if (result == 0) result = -1;
  }
  if (buffer != stack) free(buffer);
  return result;
}

int32_t wikilog_icu_compare(const char *a, int32_t alength, const char *b, int32_t blength) {
  pthread_once(&once, open_collator);
  if (collator == NULL) return 0;
  UCharIterator ia, ib;
  uiter_setUTF8(&ia, a, alength);
  uiter_setUTF8(&ib, b, blength);
  UErrorCode status = U_ZERO_ERROR;
  UCollationResult r = ucol_strcollIter(collator, &ia, &ib, &status);
  return U_FAILURE(status) ? 0 : (int32_t)r;
}

const char *wikilog_icu_uca_version(void) {
  pthread_once(&once, open_collator);
  return version;
}

void wikilog_icu_versions(uint8_t *out) {
  pthread_once(&once, open_collator);
  memset(out, 0, 12);
  UVersionInfo info;
  u_getVersion(info);
  memcpy(out, info, 4);
  if (collator == NULL) return;
  ucol_getUCAVersion(collator, info);
  memcpy(out + 4, info, 4);
  ucol_getVersion(collator, info);
  memcpy(out + 8, info, 4);
}
