/*
 * lmdb_trace.c: the LMDB work under a wikilog workload, without wikilog.
 *
 * Built two ways:
 *
 *   cc -O2 -shared -fPIC -DLMDB_TRACE_RECORD -o lmdb_trace_record.so lmdb_trace.c -ldl -lpthread
 *   cc -O2 -o lmdb_trace lmdb_trace.c -llmdb
 *
 * Recording: LD_PRELOAD=./lmdb_trace_record.so LMDB_TRACE=trace.bin <program> runs the program
 * with every write-side liblmdb call it makes (environment setup, write transactions and nested
 * ones, database opens, puts, gets, deletes, drops, cursor calls, syncs) appended to trace.bin
 * with its arguments' bytes and its return code; for an MDB_RESERVE put, the bytes the program
 * then writes into the reserved space. Calls in read-only transactions are left out: they change
 * nothing.
 *
 * Replaying: `lmdb_trace TRACE DIR [--from K] [--to L]` makes the same calls with the same bytes,
 * in the same order, on fresh environments under DIR (the first one opened is DIR/0, ...), and
 * checks that each returns what it returned when recorded. It times the top-level write
 * transactions K..L-1 (begin to commit; all of them by default) and prints
 *
 *   replay <transactions> <seconds> <transactions per second>
 *   ops <calls in them> mismatches <return codes that differed>
 *
 * and with --list first one line per top-level write transaction: its index and number of calls.
 * So the replay is the engine's own cost of exactly the B-tree work wikilog asked for (no JSON,
 * no hashing, no Swift), against which wikilog's time for the same transactions can be set.
 *
 * Two options change the work, to see where its time goes: `--skip NAME` (repeatable) leaves out
 * every call on the database NAME; `--split N` commits a timed transaction and begins another
 * every N calls, reopening its cursors (a call that depended on a cursor's position may then
 * return otherwise, and is counted as a mismatch).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <lmdb.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

enum {
  OP_ENV_MAPSIZE = 1,
  OP_ENV_MAXDBS,
  OP_ENV_MAXREADERS,
  OP_ENV_OPEN,
  OP_ENV_CLOSE,
  OP_ENV_FLAGS,
  OP_ENV_SYNC,
  OP_TXN_BEGIN,
  OP_TXN_COMMIT,
  OP_TXN_ABORT,
  OP_DBI_OPEN,
  OP_PUT,
  OP_GET,
  OP_DEL,
  OP_DROP,
  OP_CURSOR_OPEN,
  OP_CURSOR_CLOSE,
  OP_CURSOR_GET,
  OP_CURSOR_PUT,
  OP_CURSOR_DEL,
  OP_FILL, /* the bytes the caller wrote into the space an MDB_RESERVE put returned */
};

#ifdef LMDB_TRACE_RECORD
/* ------------------------------------------------------------------------------------------ */
/* The recorder, preloaded in front of liblmdb.                                                */
#include <dlfcn.h>
#include <pthread.h>

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static FILE *out;

/* Read-only transactions and their cursors, whose calls are not recorded. */
#define MAX_READERS 1024
static void *readers[MAX_READERS];
static void *reader_cursors[MAX_READERS];

static int in_set(void **set, void *p) {
  for (int i = 0; i < MAX_READERS; i++)
    if (set[i] == p) return 1;
  return 0;
}
static void set_add(void **set, void *p) {
  if (in_set(set, p)) return;
  for (int i = 0; i < MAX_READERS; i++)
    if (!set[i]) {
      set[i] = p;
      return;
    }
  fprintf(stderr, "lmdb_trace: more than %d read-only transactions or cursors\n", MAX_READERS);
  abort();
}
static void set_remove(void **set, void *p) {
  for (int i = 0; i < MAX_READERS; i++)
    if (set[i] == p) set[i] = NULL;
}

/* An MDB_RESERVE put's space is written by the caller after the call returns: its bytes are
   recorded when the same thread next calls into LMDB (before that call can move them). */
static void *pending_data;
static size_t pending_size;
static pthread_t pending_thread;

static void fill_pending(void);

static void *real(const char *name) {
  void *f = dlsym(RTLD_NEXT, name);
  if (!f) {
    fprintf(stderr, "lmdb_trace: no %s\n", name);
    abort();
  }
  return f;
}
#define REAL(name)                                                                             \
  static __typeof__(&name) f;                                                                  \
  if (!f) f = (__typeof__(&name))real(#name);                                                  \
  fill_pending()

static void start(uint8_t op) {
  pthread_mutex_lock(&lock);
  if (!out) {
    const char *path = getenv("LMDB_TRACE");
    out = fopen(path ? path : "lmdb.trace", "wb");
    if (!out) {
      perror("lmdb_trace");
      abort();
    }
    setvbuf(out, NULL, _IOFBF, 1 << 22);
  }
  fwrite(&op, 1, 1, out);
}
static void u64(uint64_t v) { fwrite(&v, 8, 1, out); }
static void i32(int32_t v) { fwrite(&v, 4, 1, out); }
static void val(const MDB_val *v) {
  uint32_t n = v ? (uint32_t)v->mv_size : UINT32_MAX;
  fwrite(&n, 4, 1, out);
  if (v && n) fwrite(v->mv_data, 1, n, out);
}
static void str(const char *s) {
  MDB_val v = {s ? strlen(s) : 0, (void *)s};
  val(s ? &v : NULL);
}
static void finish(void) { pthread_mutex_unlock(&lock); }

static void fill_pending(void) {
  if (!pending_data || !pthread_equal(pending_thread, pthread_self())) return;
  MDB_val v = {pending_size, pending_data};
  pending_data = NULL;
  start(OP_FILL), val(&v), finish();
}

int mdb_env_set_mapsize(MDB_env *env, size_t size) {
  REAL(mdb_env_set_mapsize);
  int rc = f(env, size);
  start(OP_ENV_MAPSIZE), u64((uintptr_t)env), u64(size), i32(rc), finish();
  return rc;
}
int mdb_env_set_maxdbs(MDB_env *env, MDB_dbi n) {
  REAL(mdb_env_set_maxdbs);
  int rc = f(env, n);
  start(OP_ENV_MAXDBS), u64((uintptr_t)env), u64(n), i32(rc), finish();
  return rc;
}
int mdb_env_set_maxreaders(MDB_env *env, unsigned int n) {
  REAL(mdb_env_set_maxreaders);
  int rc = f(env, n);
  start(OP_ENV_MAXREADERS), u64((uintptr_t)env), u64(n), i32(rc), finish();
  return rc;
}
int mdb_env_open(MDB_env *env, const char *path, unsigned int flags, mdb_mode_t mode) {
  REAL(mdb_env_open);
  int rc = f(env, path, flags, mode);
  start(OP_ENV_OPEN), u64((uintptr_t)env), u64(flags), u64(mode), str(path), i32(rc), finish();
  return rc;
}
void mdb_env_close(MDB_env *env) {
  REAL(mdb_env_close);
  start(OP_ENV_CLOSE), u64((uintptr_t)env), finish();
  f(env);
}
int mdb_env_set_flags(MDB_env *env, unsigned int flags, int onoff) {
  REAL(mdb_env_set_flags);
  int rc = f(env, flags, onoff);
  start(OP_ENV_FLAGS), u64((uintptr_t)env), u64(flags), u64(onoff), i32(rc), finish();
  return rc;
}
int mdb_env_sync(MDB_env *env, int force) {
  REAL(mdb_env_sync);
  int rc = f(env, force);
  start(OP_ENV_SYNC), u64((uintptr_t)env), u64(force), i32(rc), finish();
  return rc;
}
int mdb_txn_begin(MDB_env *env, MDB_txn *parent, unsigned int flags, MDB_txn **txn) {
  REAL(mdb_txn_begin);
  int rc = f(env, parent, flags, txn);
  if (rc == 0 && (flags & MDB_RDONLY)) {
    pthread_mutex_lock(&lock), set_add(readers, *txn), pthread_mutex_unlock(&lock);
    return rc;
  }
  start(OP_TXN_BEGIN), u64((uintptr_t)env), u64((uintptr_t)parent), u64(flags);
  u64(rc == 0 ? (uintptr_t)*txn : 0), i32(rc), finish();
  return rc;
}
int mdb_txn_renew(MDB_txn *txn) {
  REAL(mdb_txn_renew);
  return f(txn); /* only read-only transactions are renewed; they stay in `readers` */
}
static int end(MDB_txn *txn, uint8_t op, int rc) {
  pthread_mutex_lock(&lock);
  if (in_set(readers, txn)) {
    set_remove(readers, txn);
    pthread_mutex_unlock(&lock);
    return rc;
  }
  pthread_mutex_unlock(&lock);
  start(op), u64((uintptr_t)txn), i32(rc), finish();
  return rc;
}
int mdb_txn_commit(MDB_txn *txn) {
  REAL(mdb_txn_commit);
  return end(txn, OP_TXN_COMMIT, f(txn));
}
void mdb_txn_abort(MDB_txn *txn) {
  REAL(mdb_txn_abort);
  f(txn);
  end(txn, OP_TXN_ABORT, 0);
}
static int reading(MDB_txn *txn) {
  pthread_mutex_lock(&lock);
  int r = in_set(readers, txn);
  pthread_mutex_unlock(&lock);
  return r;
}
int mdb_dbi_open(MDB_txn *txn, const char *name, unsigned int flags, MDB_dbi *dbi) {
  REAL(mdb_dbi_open);
  int rc = f(txn, name, flags, dbi);
  if (reading(txn)) return rc;
  start(OP_DBI_OPEN), u64((uintptr_t)txn), str(name), u64(flags), u64(rc == 0 ? *dbi : 0);
  i32(rc), finish();
  return rc;
}
int mdb_put(MDB_txn *txn, MDB_dbi dbi, MDB_val *key, MDB_val *data, unsigned int flags) {
  REAL(mdb_put);
  MDB_val k = *key, d = *data;
  int rc = f(txn, dbi, key, data, flags);
  if (flags & MDB_RESERVE) d.mv_data = NULL; /* not written yet: only its size is recorded */
  start(OP_PUT), u64((uintptr_t)txn), u64(dbi), u64(flags), val(&k), u64(d.mv_size);
  if (!(flags & MDB_RESERVE)) val(&d);
  i32(rc);
  if (rc == 0 && (flags & MDB_RESERVE))
    pending_data = data->mv_data, pending_size = data->mv_size, pending_thread = pthread_self();
  finish();
  return rc;
}
int mdb_get(MDB_txn *txn, MDB_dbi dbi, MDB_val *key, MDB_val *data) {
  REAL(mdb_get);
  MDB_val k = *key;
  int rc = f(txn, dbi, key, data);
  if (reading(txn)) return rc;
  start(OP_GET), u64((uintptr_t)txn), u64(dbi), val(&k), i32(rc), finish();
  return rc;
}
int mdb_del(MDB_txn *txn, MDB_dbi dbi, MDB_val *key, MDB_val *data) {
  REAL(mdb_del);
  MDB_val k = *key, d = data ? *data : (MDB_val){0, 0};
  int rc = f(txn, dbi, key, data);
  start(OP_DEL), u64((uintptr_t)txn), u64(dbi), val(&k), val(data ? &d : NULL), i32(rc);
  finish();
  return rc;
}
int mdb_drop(MDB_txn *txn, MDB_dbi dbi, int del) {
  REAL(mdb_drop);
  int rc = f(txn, dbi, del);
  start(OP_DROP), u64((uintptr_t)txn), u64(dbi), u64(del), i32(rc), finish();
  return rc;
}
int mdb_cursor_open(MDB_txn *txn, MDB_dbi dbi, MDB_cursor **cursor) {
  REAL(mdb_cursor_open);
  int rc = f(txn, dbi, cursor);
  if (rc == 0 && reading(txn)) {
    pthread_mutex_lock(&lock), set_add(reader_cursors, *cursor), pthread_mutex_unlock(&lock);
    return rc;
  }
  start(OP_CURSOR_OPEN), u64((uintptr_t)txn), u64(dbi), u64(rc == 0 ? (uintptr_t)*cursor : 0);
  i32(rc), finish();
  return rc;
}
static int reading_cursor(MDB_cursor *c) {
  pthread_mutex_lock(&lock);
  int r = in_set(reader_cursors, c);
  pthread_mutex_unlock(&lock);
  return r;
}
void mdb_cursor_close(MDB_cursor *cursor) {
  REAL(mdb_cursor_close);
  pthread_mutex_lock(&lock);
  int r = in_set(reader_cursors, cursor);
  if (r) set_remove(reader_cursors, cursor);
  pthread_mutex_unlock(&lock);
  if (!r) start(OP_CURSOR_CLOSE), u64((uintptr_t)cursor), finish();
  f(cursor);
}
static int takes_key(MDB_cursor_op op) {
  return op == MDB_SET || op == MDB_SET_KEY || op == MDB_SET_RANGE || op == MDB_GET_BOTH ||
         op == MDB_GET_BOTH_RANGE;
}
int mdb_cursor_get(MDB_cursor *cursor, MDB_val *key, MDB_val *data, MDB_cursor_op op) {
  REAL(mdb_cursor_get);
  MDB_val k = takes_key(op) ? *key : (MDB_val){0, 0};
  MDB_val d = (op == MDB_GET_BOTH || op == MDB_GET_BOTH_RANGE) ? *data : (MDB_val){0, 0};
  int rc = f(cursor, key, data, op);
  if (reading_cursor(cursor)) return rc;
  start(OP_CURSOR_GET), u64((uintptr_t)cursor), u64(op), val(&k), val(&d), i32(rc), finish();
  return rc;
}
int mdb_cursor_put(MDB_cursor *cursor, MDB_val *key, MDB_val *data, unsigned int flags) {
  REAL(mdb_cursor_put);
  MDB_val k = *key, d = *data;
  int rc = f(cursor, key, data, flags);
  start(OP_CURSOR_PUT), u64((uintptr_t)cursor), u64(flags), val(&k), u64(d.mv_size);
  if (!(flags & MDB_RESERVE)) val(&d);
  i32(rc);
  if (rc == 0 && (flags & MDB_RESERVE))
    pending_data = data->mv_data, pending_size = data->mv_size, pending_thread = pthread_self();
  finish();
  return rc;
}
int mdb_cursor_del(MDB_cursor *cursor, unsigned int flags) {
  REAL(mdb_cursor_del);
  int rc = f(cursor, flags);
  start(OP_CURSOR_DEL), u64((uintptr_t)cursor), u64(flags), i32(rc), finish();
  return rc;
}
__attribute__((destructor)) static void flush_trace(void) {
  fill_pending();
  if (out) fflush(out);
}

#else
/* ------------------------------------------------------------------------------------------ */
/* The replayer.                                                                               */

static const uint8_t *p, *end_of_trace;

static uint8_t op8(void) { return *p++; }
static uint64_t u64(void) {
  uint64_t v;
  memcpy(&v, p, 8);
  p += 8;
  return v;
}
static int32_t i32(void) {
  int32_t v;
  memcpy(&v, p, 4);
  p += 4;
  return v;
}
/* A recorded value; `present` is 0 for a NULL one. */
static MDB_val val(int *present) {
  uint32_t n;
  memcpy(&n, p, 4);
  p += 4;
  if (n == UINT32_MAX) {
    if (present) *present = 0;
    return (MDB_val){0, NULL};
  }
  if (present) *present = 1;
  MDB_val v = {n, (void *)p};
  p += n;
  return v;
}

/* Recorded pointers (environments, transactions, cursors) to live ones: a small open map. */
#define SLOTS 4096
static uint64_t keys[SLOTS];
static void *vals[SLOTS];
static size_t slot(uint64_t k) {
  size_t i = (size_t)(k * 0x9E3779B97F4A7C15ull >> 52) & (SLOTS - 1);
  while (keys[i] && keys[i] != k) i = (i + 1) & (SLOTS - 1);
  return i;
}
static void bind(uint64_t k, void *v) {
  size_t i = slot(k);
  keys[i] = k, vals[i] = v;
}
static void *lookup(uint64_t k) {
  size_t i = slot(k);
  if (!keys[i]) {
    fprintf(stderr, "lmdb_trace: unknown handle %llx\n", (unsigned long long)k);
    exit(1);
  }
  return vals[i];
}
/* Removing from linear probing: re-insert the rest of the run. */
static void unbind(uint64_t k) {
  size_t i = slot(k);
  if (!keys[i]) return;
  keys[i] = 0;
  for (size_t j = (i + 1) & (SLOTS - 1); keys[j]; j = (j + 1) & (SLOTS - 1)) {
    uint64_t kk = keys[j];
    void *vv = vals[j];
    keys[j] = 0;
    bind(kk, vv);
  }
}

/* Recorded dbi to live dbi: the replay opens the same names in the same order, so they match,
   but the map keeps that an assumption checked rather than made. */
static MDB_dbi dbis[1 << 16];
static char skipped[1 << 16]; /* databases named by --skip: their calls are left out */
static MDB_dbi dbi_of(uint64_t recorded) {
  if (recorded >= (1 << 16)) exit(1);
  return dbis[recorded];
}

/* The live environment of a recorded one, created at its first call (its setup calls come
   before mdb_env_open). */
static MDB_env *env_of(uint64_t recorded) {
  size_t i = slot(recorded);
  if (keys[i]) return vals[i];
  MDB_env *e = NULL;
  if (mdb_env_create(&e)) {
    fprintf(stderr, "lmdb_trace: mdb_env_create failed\n");
    exit(1);
  }
  bind(recorded, e);
  return e;
}

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec + ts.tv_nsec / 1e9;
}

int main(int argc, char **argv) {
  if (argc < 3) {
    fprintf(stderr, "usage: lmdb_trace TRACE DIR [--from K] [--to L] [--list] [--skip DB]..."
                    " [--split N]\n");
    return 2;
  }
  long from = 0, to = -1;
  int list = 0;
  long split = 0;
  const char *skip[16];
  int nskip = 0;
  for (int i = 3; i < argc; i++) {
    if (!strcmp(argv[i], "--skip") && i + 1 < argc && nskip < 16) skip[nskip++] = argv[++i];
    else if (!strcmp(argv[i], "--split") && i + 1 < argc) split = atol(argv[++i]);
    else
    if (!strcmp(argv[i], "--from") && i + 1 < argc) from = atol(argv[++i]);
    else if (!strcmp(argv[i], "--to") && i + 1 < argc) to = atol(argv[++i]);
    else if (!strcmp(argv[i], "--list")) list = 1;
  }
  int fd = open(argv[1], O_RDONLY);
  struct stat st;
  if (fd < 0 || fstat(fd, &st) != 0) {
    perror(argv[1]);
    return 1;
  }
  p = mmap(NULL, st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
  if (p == MAP_FAILED) {
    perror("mmap");
    return 1;
  }
  madvise((void *)p, st.st_size, MADV_SEQUENTIAL);
  end_of_trace = p + st.st_size;

  /* Environments get DIR/0, DIR/1, ... in the order their paths are first opened. */
  char paths[64][4096];
  int npaths = 0;
  mkdir(argv[2], 0755);

  long top = -1;          /* index of the current (or last) top-level write transaction */
  int depth = 0;          /* nesting of the open write transactions */
  int timing = 0;         /* inside a timed top-level transaction */
  long timed = 0, ops = 0, mismatches = 0, txn_ops = 0;
  double started = 0, seconds = 0;
  MDB_txn *live_top = NULL;
  uint64_t live_top_id = 0, live_env = 0;
  long since_split = 0, open_cursors = 0;
  uint64_t cursor_ids[64], cursor_dbis[64]; /* the open cursors, for --split */
  MDB_val reserved = {0, NULL}; /* the space of the last MDB_RESERVE put, for its OP_FILL */

#define CHECK(rc, recorded)                                                                     \
  do {                                                                                          \
    int r_ = (rc), e_ = (recorded);                                                             \
    if (r_ != e_) {                                                                             \
      if (mismatches++ < 10)                                                                    \
        fprintf(stderr, "lmdb_trace: op %d returned %d, recorded %d\n", op, r_, e_);           \
    }                                                                                           \
  } while (0)

  while (p < end_of_trace) {
    uint8_t op = op8();
    if (timing) ops++;
    /* --split N: a timed transaction is committed and begun again every N calls (when no nested
       transaction is open), to see what one long transaction costs against several. */
    if (timing && split > 0 && depth == 1 && ++since_split >= split &&
        (op == OP_PUT || op == OP_GET || op == OP_DEL)) {
      since_split = 0;
      int rc = mdb_txn_commit(live_top);
      if (!rc) rc = mdb_txn_begin(lookup(live_env), NULL, 0, &live_top);
      /* The transaction's cursors went with it: open them again (each positions itself anew). */
      for (long i = 0; !rc && i < open_cursors; i++)
        if (lookup(cursor_ids[i])) {
          MDB_cursor *c = NULL;
          rc = mdb_cursor_open(live_top, dbi_of(cursor_dbis[i]), &c);
          bind(cursor_ids[i], c);
        }
      if (rc) {
        fprintf(stderr, "lmdb_trace: --split: %s\n", mdb_strerror(rc));
        return 1;
      }
      bind(live_top_id, live_top);
    }
    txn_ops++;
    switch (op) {
    case OP_ENV_MAPSIZE: {
      uint64_t env = u64(), size = u64();
      int32_t rc = i32();
      MDB_env *e = env_of(env);
      CHECK(mdb_env_set_mapsize(e, size), rc);
      break;
    }
    case OP_ENV_MAXDBS:
    case OP_ENV_MAXREADERS: {
      uint64_t env = u64(), n = u64();
      int32_t rc = i32();
      MDB_env *e = env_of(env);
      CHECK(op == OP_ENV_MAXDBS ? mdb_env_set_maxdbs(e, (MDB_dbi)n)
                                : mdb_env_set_maxreaders(e, (unsigned)n),
            rc);
      break;
    }
    case OP_ENV_OPEN: {
      uint64_t env = u64(), flags = u64(), mode = u64();
      MDB_val path = val(NULL);
      int32_t rc = i32();
      int k;
      for (k = 0; k < npaths; k++)
        if (strlen(paths[k]) == path.mv_size && !memcmp(paths[k], path.mv_data, path.mv_size))
          break;
      if (k == npaths) {
        if (npaths == 64 || path.mv_size >= 4096) return 1;
        memcpy(paths[npaths], path.mv_data, path.mv_size);
        paths[npaths++][path.mv_size] = 0;
      }
      char dir[4200];
      snprintf(dir, sizeof dir, "%s/%d", argv[2], k);
      mkdir(dir, 0755);
      MDB_env *e = env_of(env);
      CHECK(mdb_env_open(e, dir, (unsigned)flags, (mdb_mode_t)mode), rc);
      break;
    }
    case OP_ENV_CLOSE: {
      uint64_t env = u64();
      mdb_env_close(lookup(env));
      unbind(env);
      break;
    }
    case OP_ENV_FLAGS: {
      uint64_t env = u64(), flags = u64(), onoff = u64();
      int32_t rc = i32();
      CHECK(mdb_env_set_flags(lookup(env), (unsigned)flags, (int)onoff), rc);
      break;
    }
    case OP_ENV_SYNC: {
      uint64_t env = u64(), force = u64();
      int32_t rc = i32();
      CHECK(mdb_env_sync(lookup(env), (int)force), rc);
      break;
    }
    case OP_TXN_BEGIN: {
      uint64_t env = u64(), parent = u64(), flags = u64(), txn = u64();
      int32_t rc = i32();
      if (!parent) {
        top++;
        if (list && top > 0) printf("txn %ld ops %ld\n", top - 1, txn_ops);
        txn_ops = 0;
        timing = top >= from && (to < 0 || top < to);
        if (timing) started = now(), timed++;
      }
      MDB_txn *t = NULL;
      CHECK(mdb_txn_begin(lookup(env), parent ? lookup(parent) : NULL, (unsigned)flags, &t), rc);
      if (rc == 0) {
        bind(txn, t);
        depth++;
        if (!parent) live_top = t, live_top_id = txn, live_env = env, since_split = 0;
      }
      break;
    }
    case OP_TXN_COMMIT:
    case OP_TXN_ABORT: {
      uint64_t txn = u64();
      int32_t rc = i32();
      MDB_txn *t = lookup(txn);
      if (op == OP_TXN_COMMIT) CHECK(mdb_txn_commit(t), rc);
      else mdb_txn_abort(t);
      unbind(txn);
      depth--;
      if (t == live_top) {
        live_top = NULL;
        if (timing) seconds += now() - started, timing = 0;
      }
      break;
    }
    case OP_DBI_OPEN: {
      uint64_t txn = u64();
      int present;
      MDB_val name = val(&present);
      uint64_t flags = u64(), dbi = u64();
      int32_t rc = i32();
      char buf[512];
      if (present) {
        if (name.mv_size >= sizeof buf) return 1;
        memcpy(buf, name.mv_data, name.mv_size);
        buf[name.mv_size] = 0;
      }
      MDB_dbi d = 0;
      CHECK(mdb_dbi_open(lookup(txn), present ? buf : NULL, (unsigned)flags, &d), rc);
      if (rc == 0 && dbi < (1 << 16)) {
        dbis[dbi] = d;
        skipped[dbi] = 0;
        for (int i = 0; i < nskip; i++)
          if (present && !strcmp(buf, skip[i])) skipped[dbi] = 1;
      }
      break;
    }
    case OP_PUT: {
      uint64_t txn = u64(), dbi = u64(), flags = u64();
      MDB_val k = val(NULL), d = {u64(), NULL};
      if (!(flags & MDB_RESERVE)) d = val(NULL);
      int32_t rc = i32();
      if (!skipped[dbi]) CHECK(mdb_put(lookup(txn), dbi_of(dbi), &k, &d, (unsigned)flags), rc);
      if (flags & MDB_RESERVE) reserved = skipped[dbi] ? (MDB_val){d.mv_size, NULL} : d;
      break;
    }
    case OP_FILL: {
      MDB_val d = val(NULL);
      if (reserved.mv_size == d.mv_size && !reserved.mv_data) /* a skipped database's */;
      else if (reserved.mv_data && reserved.mv_size == d.mv_size)
        memcpy(reserved.mv_data, d.mv_data, d.mv_size);
      else if (mismatches++ < 10)
        fprintf(stderr, "lmdb_trace: a fill without its reservation\n");
      reserved = (MDB_val){0, NULL};
      break;
    }
    case OP_GET: {
      uint64_t txn = u64(), dbi = u64();
      MDB_val k = val(NULL), d;
      int32_t rc = i32();
      if (!skipped[dbi]) CHECK(mdb_get(lookup(txn), dbi_of(dbi), &k, &d), rc);
      break;
    }
    case OP_DEL: {
      uint64_t txn = u64(), dbi = u64();
      int present;
      MDB_val k = val(NULL), d = val(&present);
      int32_t rc = i32();
      if (!skipped[dbi]) CHECK(mdb_del(lookup(txn), dbi_of(dbi), &k, present ? &d : NULL), rc);
      break;
    }
    case OP_DROP: {
      uint64_t txn = u64(), dbi = u64(), del = u64();
      int32_t rc = i32();
      if (!skipped[dbi]) CHECK(mdb_drop(lookup(txn), dbi_of(dbi), (int)del), rc);
      break;
    }
    case OP_CURSOR_OPEN: {
      uint64_t txn = u64(), dbi = u64(), cursor = u64();
      int32_t rc = i32();
      MDB_cursor *c = NULL;
      if (!skipped[dbi]) CHECK(mdb_cursor_open(lookup(txn), dbi_of(dbi), &c), rc);
      if (rc == 0) bind(cursor, c); /* c is NULL for a skipped database's */
      if (rc == 0 && open_cursors < 64)
        cursor_ids[open_cursors] = cursor, cursor_dbis[open_cursors++] = dbi;
      break;
    }
    case OP_CURSOR_CLOSE: {
      uint64_t cursor = u64();
      if (lookup(cursor)) mdb_cursor_close(lookup(cursor));
      for (long i = 0; i < open_cursors; i++)
        if (cursor_ids[i] == cursor) {
          open_cursors--;
          cursor_ids[i] = cursor_ids[open_cursors], cursor_dbis[i] = cursor_dbis[open_cursors];
        }
      unbind(cursor);
      break;
    }
    case OP_CURSOR_GET: {
      uint64_t cursor = u64(), cop = u64();
      MDB_val k = val(NULL), d = val(NULL);
      int32_t rc = i32();
      if (lookup(cursor)) CHECK(mdb_cursor_get(lookup(cursor), &k, &d, (MDB_cursor_op)cop), rc);
      break;
    }
    case OP_CURSOR_PUT: {
      uint64_t cursor = u64(), flags = u64();
      MDB_val k = val(NULL), d = {u64(), NULL};
      if (!(flags & MDB_RESERVE)) d = val(NULL);
      int32_t rc = i32();
      if (lookup(cursor)) CHECK(mdb_cursor_put(lookup(cursor), &k, &d, (unsigned)flags), rc);
      if (flags & MDB_RESERVE) reserved = d;
      break;
    }
    case OP_CURSOR_DEL: {
      uint64_t cursor = u64(), flags = u64();
      int32_t rc = i32();
      if (lookup(cursor)) CHECK(mdb_cursor_del(lookup(cursor), (unsigned)flags), rc);
      break;
    }
    default:
      fprintf(stderr, "lmdb_trace: bad op %d at byte %ld\n", op,
              (long)(p - 1 - (end_of_trace - st.st_size)));
      return 1;
    }
  }
  if (list && top >= 0) printf("txn %ld ops %ld\n", top, txn_ops);
  printf("replay %ld %.6f %.0f\n", timed, seconds, seconds > 0 ? timed / seconds : 0);
  printf("ops %ld mismatches %ld\n", ops, mismatches);
  return mismatches ? 3 : 0;
}
#endif
