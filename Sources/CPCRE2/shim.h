#ifndef WIKILOG_CPCRE2_SHIM_H
#define WIKILOG_CPCRE2_SHIM_H
// PCRE2 (Debian: libpcre2-dev), 8-bit code units, for Mango's $regex and wikilog grep: the
// dialect of CouchDB's $regex (Erlang's re is PCRE), with its limits on backtracking.
#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>
#endif
