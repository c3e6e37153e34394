#ifndef WIKILOG_JSSANDBOX_H
#define WIKILOG_JSSANDBOX_H

#ifdef __cplusplus
extern "C" {
#endif

/// Runs wikilog's JavaScript query server on standard input and output until its input ends:
/// CouchDB's query-server protocol, every design document in a sandbox of its own (see
/// JSSandbox.cpp). `memoryMiB` bounds the JavaScript heap; `walls` (non-zero) adds the
/// process's own walls (a seccomp filter, resource limits). Returns only when the engine
/// could not start.
int wikilog_js_query_server(int memoryMiB, int walls);

#ifdef __cplusplus
}
#endif

#endif
