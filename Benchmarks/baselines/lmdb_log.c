/*
 * lmdb_log.c: the engine's limit for wikilog's log workloads, using liblmdb directly.
 *
 * Writes records of a given size under 8-byte big-endian sequence keys with MDB_APPEND, the same
 * puts wikilog's log makes into its events database, and scans them back with a cursor.
 *
 *   lmdb_log append-batch DIR COUNT RECORD_BYTES BATCH [sync|nosync]
 *   lmdb_log append-streams DIR COUNT RECORD_BYTES BATCH STREAMS [sync|nosync]
 *       as append-batch, with event i in stream "stream-(i % STREAMS)", plus what wikilog writes
 *       for streams: per transaction one 16-byte head per stream touched (key: LEB128 length +
 *       name) and a checkpoint (name + 8-byte version -> position) every 64th version.
 *   lmdb_log append-single DIR COUNT RECORD_BYTES        (one synced transaction per record)
 *   lmdb_log scan DIR [DB]                                (cursor walk, touching every value)
 *       DB defaults to "events" (this program's); "log.events" scans a wikilog log's records.
 *   lmdb_log scan-changes DIR
 *       the raw work under a wikilog changes feed, on a wikilog store's own files: a cursor walk
 *       of docs.bySeq (seq -> document id) and, for each entry, a get of the document's record
 *       in docs.byId, touching both values; no decoding.
 *
 * Prints one line: "<workload> <count> <seconds> <per_second>".
 */
#include <lmdb.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#define CHECK(x)                                                                  \
  do {                                                                            \
    int rc_ = (x);                                                                \
    if (rc_ != MDB_SUCCESS) {                                                     \
      fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #x, mdb_strerror(rc_)); \
      exit(1);                                                                    \
    }                                                                             \
  } while (0)

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec + ts.tv_nsec / 1e9;
}

static void key_of(uint64_t seq, unsigned char out[8]) {
  for (int i = 7; i >= 0; i--) { out[i] = (unsigned char)(seq & 0xff); seq >>= 8; }
}

static MDB_env *open_env(const char *dir, unsigned flags) {
  MDB_env *env;
  mkdir(dir, 0755);
  CHECK(mdb_env_create(&env));
  CHECK(mdb_env_set_mapsize(env, (size_t)8 << 30));
  CHECK(mdb_env_set_maxdbs(env, 8));
  CHECK(mdb_env_open(env, dir, flags | MDB_NOTLS, 0644));
  return env;
}

int main(int argc, char **argv) {
  if (argc < 3) { fprintf(stderr, "usage: see the comment at the top of lmdb_log.c\n"); return 2; }
  const char *mode = argv[1], *dir = argv[2];
  if (strcmp(mode, "scan-changes") == 0) {
    MDB_env *env = open_env(dir, MDB_RDONLY);
    MDB_txn *txn; MDB_dbi by_seq, by_id; MDB_cursor *cur; MDB_val k, v, record;
    CHECK(mdb_txn_begin(env, NULL, MDB_RDONLY, &txn));
    CHECK(mdb_dbi_open(txn, "docs.bySeq", 0, &by_seq));
    CHECK(mdb_dbi_open(txn, "docs.byId", 0, &by_id));
    CHECK(mdb_cursor_open(txn, by_seq, &cur));
    double t0 = now();
    uint64_t n = 0, sum = 0;
    while (mdb_cursor_get(cur, &k, &v, n == 0 ? MDB_FIRST : MDB_NEXT) == MDB_SUCCESS) {
      CHECK(mdb_get(txn, by_id, &v, &record));
      sum += ((unsigned char *)record.mv_data)[0] + ((unsigned char *)record.mv_data)[record.mv_size - 1];
      n++;
    }
    double dt = now() - t0;
    printf("scan-changes %llu %.6f %.0f\n", (unsigned long long)n, dt, n / dt);
    fprintf(stderr, "(checksum %llu)\n", (unsigned long long)sum);
    mdb_cursor_close(cur); mdb_txn_abort(txn); mdb_env_close(env);
    return 0;
  }
  if (strcmp(mode, "scan") == 0) {
    MDB_env *env = open_env(dir, MDB_RDONLY);
    MDB_txn *txn; MDB_dbi dbi; MDB_cursor *cur; MDB_val k, v;
    CHECK(mdb_txn_begin(env, NULL, MDB_RDONLY, &txn));
    CHECK(mdb_dbi_open(txn, argc > 3 ? argv[3] : "events", 0, &dbi));
    CHECK(mdb_cursor_open(txn, dbi, &cur));
    double t0 = now();
    uint64_t n = 0, sum = 0;
    while (mdb_cursor_get(cur, &k, &v, n == 0 ? MDB_FIRST : MDB_NEXT) == MDB_SUCCESS) {
      /* touch the value as a decoder would: read its first and last bytes */
      sum += ((unsigned char *)v.mv_data)[0] + ((unsigned char *)v.mv_data)[v.mv_size - 1];
      n++;
    }
    double dt = now() - t0;
    printf("scan %llu %.6f %.0f\n", (unsigned long long)n, dt, n / dt);
    fprintf(stderr, "(checksum %llu)\n", (unsigned long long)sum);
    mdb_cursor_close(cur); mdb_txn_abort(txn); mdb_env_close(env);
    return 0;
  }
  if (argc < 5) { fprintf(stderr, "usage: see the comment at the top of lmdb_log.c\n"); return 2; }
  uint64_t count = strtoull(argv[3], NULL, 10);
  size_t size = strtoul(argv[4], NULL, 10);
  int single = strcmp(mode, "append-single") == 0;
  int streams_mode = strcmp(mode, "append-streams") == 0;
  uint64_t batch = single ? 1 : (argc > 5 ? strtoull(argv[5], NULL, 10) : 1000);
  uint64_t nstreams = streams_mode && argc > 6 ? strtoull(argv[6], NULL, 10) : 0;
  const char *syncarg = streams_mode ? (argc > 7 ? argv[7] : "sync") : (argc > 6 ? argv[6] : "sync");
  int nosync = !single && strcmp(syncarg, "nosync") == 0;
  MDB_env *env = open_env(dir, nosync ? MDB_NOSYNC : 0);
  MDB_txn *txn; MDB_dbi dbi;
  CHECK(mdb_txn_begin(env, NULL, 0, &txn));
  CHECK(mdb_dbi_open(txn, "events", MDB_CREATE, &dbi));
  MDB_dbi heads_dbi = 0, index_dbi = 0;
  if (streams_mode) {
    CHECK(mdb_dbi_open(txn, "streams", MDB_CREATE, &heads_dbi));
    CHECK(mdb_dbi_open(txn, "streamIndex", MDB_CREATE, &index_dbi));
  }
  CHECK(mdb_txn_commit(txn));
  uint64_t *versions = calloc(nstreams ? nstreams : 1, sizeof(uint64_t));
  uint64_t *lasts = calloc(nstreams ? nstreams : 1, sizeof(uint64_t));
  unsigned char *touched = calloc(nstreams ? nstreams : 1, 1);
  unsigned char *record = malloc(size);
  for (size_t i = 0; i < size; i++) record[i] = (unsigned char)('a' + i % 26);
  unsigned char key[8];
  double t0 = now();
  for (uint64_t seq = 1; seq <= count;) {
    CHECK(mdb_txn_begin(env, NULL, 0, &txn));
    for (uint64_t i = 0; i < batch && seq <= count; i++, seq++) {
      key_of(seq, key);
      record[0] = (unsigned char)seq; /* records differ, as events do */
      MDB_val k = {8, key}, v = {size, record};
      CHECK(mdb_put(txn, dbi, &k, &v, MDB_APPEND));
      if (nstreams) {
        uint64_t s = (seq - 1) % nstreams;
        versions[s]++;
        lasts[s] = seq;
        touched[s] = 1;
        if (versions[s] % 64 == 0) {
          unsigned char ik[64];
          int n = snprintf((char *)ik + 1, sizeof ik - 9, "stream-%llu", (unsigned long long)s);
          ik[0] = (unsigned char)n;
          key_of(versions[s], ik + 1 + n);
          MDB_val ikv = {(size_t)(1 + n + 8), ik}, iv = {8, key};
          CHECK(mdb_put(txn, index_dbi, &ikv, &iv, 0));
        }
      }
    }
    for (uint64_t s = 0; s < nstreams; s++) {
      if (!touched[s]) continue;
      touched[s] = 0;
      unsigned char hk[64], hv[16];
      int n = snprintf((char *)hk + 1, sizeof hk - 1, "stream-%llu", (unsigned long long)s);
      hk[0] = (unsigned char)n;
      key_of(versions[s], hv);
      key_of(lasts[s], hv + 8);
      MDB_val hkv = {(size_t)(1 + n), hk}, hvv = {16, hv};
      CHECK(mdb_put(txn, heads_dbi, &hkv, &hvv, 0));
    }
    CHECK(mdb_txn_commit(txn));
  }
  double dt = now() - t0;
  printf("%s %llu %.6f %.0f\n", mode, (unsigned long long)count, dt, count / dt);
  mdb_env_close(env);
  free(record);
  return 0;
}
