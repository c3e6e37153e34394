/*
 * sqlite_store.c: wikilog's event and document workloads on SQLite, for `make compare`.
 *
 * What a careful SQLite application would build for the same job: one database file in WAL
 * mode holding the events, the documents and their revisions, with the indexes a document store
 * needs. `full` runs use synchronous=FULL (every commit flushed: durable like wikilog's synced
 * and group-commit modes); `normal` runs use synchronous=NORMAL (WAL: a commit is flushed at the
 * next checkpoint; survives a process crash, not a power loss).
 *
 *   CREATE TABLE events(seq INTEGER PRIMARY KEY, stream TEXT, type TEXT, time INTEGER,
 *                       actor TEXT, body BLOB,
 *                       version INTEGER, prev INTEGER);  -- the log; seq is the rowid; a
 *                                                        -- stream's events chained by prev
 *   CREATE TABLE streams(name PRIMARY KEY, version, last) WITHOUT ROWID;  -- stream heads
 *   CREATE TABLE stream_index(name, version, seq, PRIMARY KEY(name, version)) WITHOUT ROWID;
 *   CREATE TABLE docs(id TEXT PRIMARY KEY, rev TEXT, seq INTEGER, deleted INTEGER)
 *     WITHOUT ROWID;                                       -- one row per document: its winner
 *   CREATE UNIQUE INDEX docs_by_seq ON docs(seq);          -- the changes feed
 *   CREATE TABLE revs(doc_id TEXT, rev TEXT, parent TEXT, seq INTEGER, deleted INTEGER,
 *     PRIMARY KEY(doc_id, rev)) WITHOUT ROWID;             -- every revision (the rev tree)
 *
 * A document body is stored once, in its event (as wikilog stores it once, in its log); `docs`
 * and `revs` point to it by seq. A document edit is what wikilog's local edit does: read the
 * document's current rev (the _rev check: a create must find no row, an update must name the
 * current rev), make the new rev, append the event, insert the revision row and upsert the
 * document row. The new rev is generation + a 128-bit FNV-1a hash of the parent rev and the
 * body: cheaper than wikilog's MD5 over canonical JSON, and this program does not parse JSON
 * either, so SQLite's figures include less work than wikilog's.
 *
 *   sqlite_store append-events DB COUNT BATCH full|normal
 *       events with 100-byte bodies in streams "stream-(i % 1000)", BATCH per transaction,
 *       kept as wikilog's log keeps them (and as lmdb_log.c append-streams does): each event
 *       records its stream version and its stream's previous event, each transaction upserts
 *       the head of every stream it touched, and every 64th version goes into stream_index. (An
 *       index on events(stream, seq) instead costs SQLite about 10x at 1,000,000 events: every
 *       event inserts into it at its stream's place.)
 *   sqlite_store doc-create DB COUNT BATCH full|normal
 *       COUNT new ~300-byte documents, BATCH edits per transaction
 *   sqlite_store doc-update DB COUNT BATCH full|normal
 *       COUNT documents created (untimed), then each updated once with its rev, BATCH per
 *       transaction
 *   sqlite_store doc-concurrent DB THREADS EDITS busy|mutex
 *       THREADS threads, each with its own connection (synchronous=FULL), each editing its own
 *       document EDITS times, one transaction (BEGIN IMMEDIATE ... COMMIT) per edit. SQLite has
 *       one writer at a time: with `busy` the threads contend through busy_timeout (SQLite's
 *       busy handler sleeps and retries), with `mutex` they queue on a process mutex around
 *       each transaction, so no time is lost sleeping. Each edit is durable when its commit
 *       returns, as with wikilog's group commit.
 *   sqlite_store doc-single DB COUNT
 *       one writer editing one document COUNT times, one synchronous=FULL transaction per edit
 *   sqlite_store changes DB
 *       the changes feed of a database made by doc-create: every document row in seq order
 *       (docs_by_seq), each formatted as wikilog's NDJSON row {"seq":..,"id":..,"changes":[..]}
 *
 * Prints one line: "<workload> <count> <seconds> <per_second>".
 * Build: cc -O2 -o sqlite_store sqlite_store.c -lsqlite3 -lpthread
 */
#include <pthread.h>
#include <sqlite3.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static void die(sqlite3 *db, const char *what) {
  fprintf(stderr, "sqlite_store: %s: %s\n", what, db ? sqlite3_errmsg(db) : "?");
  exit(1);
}

#define CHECK(db, x)                                            \
  do {                                                          \
    int rc_ = (x);                                              \
    if (rc_ != SQLITE_OK && rc_ != SQLITE_DONE && rc_ != SQLITE_ROW) die(db, #x); \
  } while (0)

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec + ts.tv_nsec / 1e9;
}

static int64_t micros(void) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

static void exec(sqlite3 *db, const char *sql) {
  char *err = NULL;
  if (sqlite3_exec(db, sql, NULL, NULL, &err) != SQLITE_OK) {
    fprintf(stderr, "sqlite_store: %s: %s\n", sql, err);
    exit(1);
  }
}

static const char *schema =
    "CREATE TABLE IF NOT EXISTS events(seq INTEGER PRIMARY KEY, stream TEXT NOT NULL,"
    " type TEXT NOT NULL, time INTEGER NOT NULL, actor TEXT NOT NULL, body BLOB NOT NULL,"
    " version INTEGER, prev INTEGER);"
    "CREATE TABLE IF NOT EXISTS streams(name TEXT PRIMARY KEY, version INTEGER NOT NULL,"
    " last INTEGER NOT NULL) WITHOUT ROWID;"
    "CREATE TABLE IF NOT EXISTS stream_index(name TEXT NOT NULL, version INTEGER NOT NULL,"
    " seq INTEGER NOT NULL, PRIMARY KEY(name, version)) WITHOUT ROWID;"
    "CREATE TABLE IF NOT EXISTS docs(id TEXT PRIMARY KEY, rev TEXT NOT NULL, seq INTEGER NOT NULL,"
    " deleted INTEGER NOT NULL) WITHOUT ROWID;"
    "CREATE UNIQUE INDEX IF NOT EXISTS docs_by_seq ON docs(seq);"
    "CREATE TABLE IF NOT EXISTS revs(doc_id TEXT NOT NULL, rev TEXT NOT NULL, parent TEXT,"
    " seq INTEGER NOT NULL, deleted INTEGER NOT NULL, PRIMARY KEY(doc_id, rev)) WITHOUT ROWID;";

static sqlite3 *open_db(const char *path, int full) {
  sqlite3 *db;
  if (sqlite3_open_v2(path, &db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX,
                      NULL) != SQLITE_OK)
    die(db, "open");
  sqlite3_busy_timeout(db, 60000);
  exec(db, "PRAGMA journal_mode=WAL");
  exec(db, full ? "PRAGMA synchronous=FULL" : "PRAGMA synchronous=NORMAL");
  exec(db, "PRAGMA cache_size=-65536"); /* 64 MB of page cache */
  exec(db, schema);
  return db;
}

static sqlite3_stmt *prepare(sqlite3 *db, const char *sql) {
  sqlite3_stmt *stmt;
  if (sqlite3_prepare_v3(db, sql, -1, SQLITE_PREPARE_PERSISTENT, &stmt, NULL) != SQLITE_OK)
    die(db, sql);
  return stmt;
}

static void step_done(sqlite3 *db, sqlite3_stmt *stmt) {
  if (sqlite3_step(stmt) != SQLITE_DONE) die(db, sqlite3_sql(stmt));
  sqlite3_reset(stmt);
}

/* MARK: Documents */

typedef struct {
  sqlite3 *db;
  sqlite3_stmt *get, *event, *rev, *doc;
} Store;

static Store store_open(const char *path, int full) {
  Store s;
  s.db = open_db(path, full);
  s.get = prepare(s.db, "SELECT rev FROM docs WHERE id = ?1");
  s.event = prepare(s.db, "INSERT INTO events(stream, type, time, actor, body) VALUES(?1, 'doc.edit', ?2, ?3, ?4)");
  s.rev = prepare(s.db, "INSERT INTO revs(doc_id, rev, parent, seq, deleted) VALUES(?1, ?2, ?3, ?4, 0)");
  s.doc = prepare(s.db, "INSERT INTO docs(id, rev, seq, deleted) VALUES(?1, ?2, ?3, 0)"
                        " ON CONFLICT(id) DO UPDATE SET rev = excluded.rev, seq = excluded.seq,"
                        " deleted = excluded.deleted");
  return s;
}

static void store_close(Store *s) {
  sqlite3_finalize(s->get);
  sqlite3_finalize(s->event);
  sqlite3_finalize(s->rev);
  sqlite3_finalize(s->doc);
  sqlite3_close(s->db);
}

/* The id and ~300-byte JSON body of page i, version v (the pages DocCompare writes). */
static void page(int64_t i, int v, char *id, size_t idsize, char *body, size_t bodysize) {
  snprintf(id, idsize, "w%lld:Page %lld", (long long)(i % 100), (long long)i);
  snprintf(body, bodysize,
           "{\"type\":\"page\",\"wiki_id\":\"w%lld\",\"updated_by\":\"user%lld\","
           "\"updated_at\":\"2026-01-0%dT10:00:00Z\",\"markdown\":\"# Page %lld\\n\\nVersion %d"
           " of this page. It links to [[Page %lld]] and to [[Home]], and has a few more words"
           " so that its body is about the size of a short wiki page.\"}",
           (long long)(i % 100), (long long)(i % 7), v % 10, (long long)i, v, (long long)(i + 1));
}

/* The new revision: generation + 32 hex digits of a 128-bit FNV-1a over parent and body. */
static void new_rev(const char *parent, const char *body, char out[48]) {
  uint64_t h1 = 0xcbf29ce484222325ULL, h2 = 0x84222325cbf29ce4ULL;
  int gen = parent ? atoi(parent) + 1 : 1;
  for (const char *p = parent ? parent : ""; *p; p++) {
    h1 = (h1 ^ (unsigned char)*p) * 0x100000001b3ULL;
    h2 = (h2 ^ (unsigned char)*p) * 0x100000001b3ULL + 1;
  }
  for (const char *p = body; *p; p++) {
    h1 = (h1 ^ (unsigned char)*p) * 0x100000001b3ULL;
    h2 = (h2 ^ (unsigned char)*p) * 0x100000001b3ULL + 1;
  }
  snprintf(out, 48, "%d-%016llx%016llx", gen, (unsigned long long)h1, (unsigned long long)h2);
}

/* One local edit inside the caller's transaction. `expected` is the client's _rev (NULL for a
 * create). Returns 0 and the new rev in `rev`, or -1 on a conflict (nothing written). */
static int edit(Store *s, const char *id, const char *expected, const char *body, char rev[48]) {
  char current[64] = "";
  int found = 0;
  sqlite3_bind_text(s->get, 1, id, -1, SQLITE_STATIC);
  int rc = sqlite3_step(s->get);
  if (rc == SQLITE_ROW) {
    found = 1;
    snprintf(current, sizeof current, "%s", (const char *)sqlite3_column_text(s->get, 0));
  } else if (rc != SQLITE_DONE) {
    die(s->db, "select rev");
  }
  sqlite3_reset(s->get);
  if (found != (expected != NULL) || (found && strcmp(current, expected) != 0)) return -1;
  new_rev(expected, body, rev);

  sqlite3_bind_text(s->event, 1, id, -1, SQLITE_STATIC);
  sqlite3_bind_int64(s->event, 2, micros());
  sqlite3_bind_text(s->event, 3, "bench", -1, SQLITE_STATIC);
  sqlite3_bind_blob(s->event, 4, body, (int)strlen(body), SQLITE_STATIC);
  step_done(s->db, s->event);
  sqlite3_int64 seq = sqlite3_last_insert_rowid(s->db);

  sqlite3_bind_text(s->rev, 1, id, -1, SQLITE_STATIC);
  sqlite3_bind_text(s->rev, 2, rev, -1, SQLITE_STATIC);
  if (expected) sqlite3_bind_text(s->rev, 3, expected, -1, SQLITE_STATIC);
  else sqlite3_bind_null(s->rev, 3);
  sqlite3_bind_int64(s->rev, 4, seq);
  step_done(s->db, s->rev);

  sqlite3_bind_text(s->doc, 1, id, -1, SQLITE_STATIC);
  sqlite3_bind_text(s->doc, 2, rev, -1, SQLITE_STATIC);
  sqlite3_bind_int64(s->doc, 3, seq);
  step_done(s->db, s->doc);
  return 0;
}

/* Edits pages 0..count-1 in transactions of `batch`; with `revs`, updates (version 2) naming
 * revs[i] and storing the new ones back. Returns the seconds spent. */
static double edit_pages(Store *s, int64_t count, int64_t batch, char (*revs)[48], int update) {
  char id[64], body[512], rev[48];
  double t0 = now();
  for (int64_t i = 0; i < count;) {
    exec(s->db, "BEGIN");
    for (int64_t j = 0; j < batch && i < count; j++, i++) {
      page(i, update ? 2 : 1, id, sizeof id, body, sizeof body);
      if (edit(s, id, update ? revs[i] : NULL, body, rev) != 0) {
        fprintf(stderr, "sqlite_store: unexpected conflict on %s\n", id);
        exit(1);
      }
      memcpy(revs[i], rev, 48);
    }
    exec(s->db, "COMMIT");
  }
  return now() - t0;
}

typedef struct {
  const char *path;
  int thread, edits;
  pthread_mutex_t *mutex; /* NULL: contend through busy_timeout */
} Writer;

static void *writer_main(void *arg) {
  Writer *w = arg;
  Store s = store_open(w->path, 1);
  char id[64], body[512], rev[48], previous[48];
  int have = 0;
  for (int v = 1; v <= w->edits; v++) {
    page(w->thread, v, id, sizeof id, body, sizeof body);
    if (w->mutex) pthread_mutex_lock(w->mutex);
    exec(s.db, "BEGIN IMMEDIATE");
    if (edit(&s, id, have ? previous : NULL, body, rev) != 0) {
      fprintf(stderr, "sqlite_store: unexpected conflict on %s\n", id);
      exit(1);
    }
    exec(s.db, "COMMIT");
    if (w->mutex) pthread_mutex_unlock(w->mutex);
    memcpy(previous, rev, 48);
    have = 1;
  }
  store_close(&s);
  return NULL;
}

/* MARK: main */

static void usage(void) {
  fprintf(stderr, "usage: see the comment at the top of sqlite_store.c\n");
  exit(2);
}

int main(int argc, char **argv) {
  if (argc < 3) usage();
  const char *mode = argv[1], *path = argv[2];
  double dt;
  long long n;

  if (strcmp(mode, "append-events") == 0 && argc >= 6) {
    int64_t count = atoll(argv[3]), batch = atoll(argv[4]);
    sqlite3 *db = open_db(path, strcmp(argv[5], "full") == 0);
    sqlite3_stmt *insert = prepare(
        db, "INSERT INTO events(stream, type, time, actor, body, version, prev)"
            " VALUES(?1, 'bench.event', ?2, 'bench', ?3, ?4, ?5)");
    sqlite3_stmt *head = prepare(
        db, "INSERT INTO streams(name, version, last) VALUES(?1, ?2, ?3)"
            " ON CONFLICT(name) DO UPDATE SET version = excluded.version, last = excluded.last");
    sqlite3_stmt *checkpoint = prepare(
        db, "INSERT INTO stream_index(name, version, seq) VALUES(?1, ?2, ?3)");
    enum { STREAMS = 1000 };
    int64_t versions[STREAMS] = {0}, lasts[STREAMS] = {0};
    unsigned char touched[STREAMS] = {0};
    unsigned char payload[100];
    memset(payload, 'a', sizeof payload);
    char stream[32];
    double t0 = now();
    for (int64_t i = 0; i < count;) {
      exec(db, "BEGIN");
      for (int64_t j = 0; j < batch && i < count; j++, i++) {
        int s = (int)(i % STREAMS);
        snprintf(stream, sizeof stream, "stream-%d", s);
        payload[0] = (unsigned char)i; /* events differ, as they do in wikilog */
        sqlite3_bind_text(insert, 1, stream, -1, SQLITE_STATIC);
        sqlite3_bind_int64(insert, 2, micros());
        sqlite3_bind_blob(insert, 3, payload, sizeof payload, SQLITE_STATIC);
        sqlite3_bind_int64(insert, 4, versions[s] + 1);
        sqlite3_bind_int64(insert, 5, lasts[s]);
        step_done(db, insert);
        versions[s]++;
        lasts[s] = sqlite3_last_insert_rowid(db);
        touched[s] = 1;
        if (versions[s] % 64 == 0) {
          sqlite3_bind_text(checkpoint, 1, stream, -1, SQLITE_STATIC);
          sqlite3_bind_int64(checkpoint, 2, versions[s]);
          sqlite3_bind_int64(checkpoint, 3, lasts[s]);
          step_done(db, checkpoint);
        }
      }
      for (int s = 0; s < STREAMS; s++) {
        if (!touched[s]) continue;
        touched[s] = 0;
        snprintf(stream, sizeof stream, "stream-%d", s);
        sqlite3_bind_text(head, 1, stream, -1, SQLITE_TRANSIENT);
        sqlite3_bind_int64(head, 2, versions[s]);
        sqlite3_bind_int64(head, 3, lasts[s]);
        step_done(db, head);
      }
      exec(db, "COMMIT");
    }
    sqlite3_finalize(head);
    sqlite3_finalize(checkpoint);
    dt = now() - t0;
    n = count;
    sqlite3_finalize(insert);
    sqlite3_close(db);
  } else if ((strcmp(mode, "doc-create") == 0 || strcmp(mode, "doc-update") == 0) && argc >= 6) {
    int64_t count = atoll(argv[3]), batch = atoll(argv[4]);
    int update = strcmp(mode, "doc-update") == 0;
    Store s = store_open(path, strcmp(argv[5], "full") == 0);
    char(*revs)[48] = calloc((size_t)count, 48);
    dt = edit_pages(&s, count, batch, revs, 0);
    if (update) dt = edit_pages(&s, count, batch, revs, 1);
    n = count;
    free(revs);
    store_close(&s);
  } else if (strcmp(mode, "doc-concurrent") == 0 && argc >= 6) {
    int threads = atoi(argv[3]), edits = atoi(argv[4]);
    pthread_mutex_t mutex = PTHREAD_MUTEX_INITIALIZER;
    int use_mutex = strcmp(argv[5], "mutex") == 0;
    Store init = store_open(path, 1); /* creates the schema before the threads start */
    store_close(&init);
    Writer *w = calloc((size_t)threads, sizeof *w);
    pthread_t *t = calloc((size_t)threads, sizeof *t);
    double t0 = now();
    for (int i = 0; i < threads; i++) {
      w[i] = (Writer){path, i, edits, use_mutex ? &mutex : NULL};
      pthread_create(&t[i], NULL, writer_main, &w[i]);
    }
    for (int i = 0; i < threads; i++) pthread_join(t[i], NULL);
    dt = now() - t0;
    n = (long long)threads * edits;
    free(w);
    free(t);
  } else if (strcmp(mode, "doc-single") == 0 && argc >= 4) {
    int edits = atoi(argv[3]);
    Writer w = {path, 1, edits, NULL};
    Store init = store_open(path, 1);
    store_close(&init);
    double t0 = now();
    writer_main(&w);
    dt = now() - t0;
    n = edits;
  } else if (strcmp(mode, "changes") == 0) {
    sqlite3 *db = open_db(path, 0);
    sqlite3_stmt *scan = prepare(db, "SELECT seq, id, rev, deleted FROM docs ORDER BY seq");
    size_t cap = 1 << 20, used = 0, total = 0;
    char *out = malloc(cap);
    n = 0;
    double t0 = now();
    while (sqlite3_step(scan) == SQLITE_ROW) {
      if (cap - used < 1024) { total += used; used = 0; } /* emitted: the buffer is reused */
      used += (size_t)snprintf(out + used, cap - used,
                               "{\"seq\":%lld,\"id\":\"%s\",\"changes\":[{\"rev\":\"%s\"}]%s}\n",
                               (long long)sqlite3_column_int64(scan, 0),
                               (const char *)sqlite3_column_text(scan, 1),
                               (const char *)sqlite3_column_text(scan, 2),
                               sqlite3_column_int(scan, 3) ? ",\"deleted\":true" : "");
      n++;
    }
    dt = now() - t0;
    fprintf(stderr, "(%zu bytes of NDJSON)\n", total + used);
    free(out);
    sqlite3_finalize(scan);
    sqlite3_close(db);
  } else {
    usage();
    return 2;
  }
  printf("%s %lld %.6f %.0f\n", mode, n, dt, n / dt);
  return 0;
}
