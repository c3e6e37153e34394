/* SQLite FTS5 beside wikilog's search (issue 56, scripts/compare-search): the pages that
 * `QueryCompare --only search-growth --tsv PATH` wrote, loaded into a fresh database in batches,
 * then the queries it ran (`--queries-out PATH`), timed the same way.
 *
 *   cc -O2 -o fts5_pages fts5_pages.c -lsqlite3
 *   fts5_pages TSV QUERIES DB BATCH [--contentless] [--txn N]
 *
 * TSV: "id\twiki\ttext" lines, batches in order; the title is the id after its first ':' (what
 * wikilog indexes beside the text: `TextSearchSchema.wikiPages`). The table is
 *   fts5(wiki UNINDEXED, title, body, tokenize='unicode61 remove_diacritics 2')
 * in WAL mode, synchronous=NORMAL; --contentless makes it `content=''` with `wiki` indexed (a
 * contentless table gives back no column, so the wikis are restricted by a column filter, as
 * such an index would have to be). Each batch is one transaction (or transactions of --txn
 * rows) followed by a wal_checkpoint(TRUNCATE), all timed: after it the pages are in the
 * database file, as they are in LMDB's after wikilog's commits.
 *
 * QUERIES: a first line "wikis\tw5,w42,w77" (the few wikis a member searches), then
 * "class\tquery" lines in wikilog's syntax, which is FTS5's for these queries (words, `abc*`,
 * `"a b"`). The first 5 of each class warm up; the others are timed, over every page ("all")
 * and over the few wikis ("few").
 *
 * Lines (NAME is fts5 or fts5-contentless):
 *   NAME-growth-batch k pages seconds pages_per_second
 *   NAME-rss k current_kb X peak_kb Y
 *   NAME-size k db_bytes X db_disk Y wal_bytes Z
 *   NAME-CLASS-SCOPE-ranking-ms median m p90 p max x   top 25 by bm25 and the count of matches
 *   NAME-CLASS-SCOPE-top25-ms ...                       the top 25 alone
 *   NAME-CLASS-SCOPE-snippets-ms ...                    top 25 with snippet() and the count
 *   NAME-CLASS-SCOPE-matches median m max x
 *   NAME-match CLASS SCOPE q total                      per query, for the agreement check
 */
#define _GNU_SOURCE
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec + ts.tv_nsec / 1e9;
}

static sqlite3 *db;

static void check(int rc, const char *what) {
  if (rc != SQLITE_OK && rc != SQLITE_DONE && rc != SQLITE_ROW) {
    fprintf(stderr, "fts5_pages: %s: %s\n", what, sqlite3_errmsg(db));
    exit(1);
  }
}

static void exec(const char *sql) {
  char *err = NULL;
  if (sqlite3_exec(db, sql, NULL, NULL, &err) != SQLITE_OK) {
    fprintf(stderr, "fts5_pages: %s: %s\n", sql, err);
    exit(1);
  }
}

static void resident(long *current, long *peak) {
  FILE *f = fopen("/proc/self/status", "r");
  char line[256];
  *current = *peak = 0;
  if (!f) return;
  while (fgets(line, sizeof line, f)) {
    if (!strncmp(line, "VmRSS:", 6)) *current = atol(line + 6);
    if (!strncmp(line, "VmHWM:", 6)) *peak = atol(line + 6);
  }
  fclose(f);
}

static void sizes(const char *path, long long *bytes, long long *disk) {
  struct stat st;
  *bytes = *disk = 0;
  if (stat(path, &st) == 0) {
    *bytes = st.st_size;
    *disk = (long long)st.st_blocks * 512;
  }
}

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}
static int cmp_long(const void *a, const void *b) {
  long x = *(const long *)a, y = *(const long *)b;
  return x < y ? -1 : x > y;
}

/* The same quantiles as QueryCompare's reportTimes. */
static void report_times(const char *name, double *s, int n) {
  if (n == 0) return;
  qsort(s, n, sizeof *s, cmp_double);
  int m = n * 0.5, p = n * 0.9;
  if (m >= n) m = n - 1;
  if (p >= n) p = n - 1;
  printf("%s-ms median %.3f p90 %.3f max %.3f\n", name, s[m] * 1000, s[p] * 1000, s[n - 1] * 1000);
}

/* Runs stmt with `match` bound to ?1, stepping through its rows (reading each column); the
 * first column of the last row. */
static long run(sqlite3_stmt *stmt, const char *match) {
  long last = 0;
  check(sqlite3_bind_text(stmt, 1, match, -1, SQLITE_TRANSIENT), "bind");
  int rc;
  while ((rc = sqlite3_step(stmt)) == SQLITE_ROW) {
    int columns = sqlite3_column_count(stmt);
    for (int c = 1; c < columns; c++) (void)sqlite3_column_text(stmt, c);
    last = sqlite3_column_int64(stmt, 0);
  }
  check(rc, "step");
  sqlite3_reset(stmt);
  return last;
}

static sqlite3_stmt *prepare(const char *sql) {
  sqlite3_stmt *stmt;
  check(sqlite3_prepare_v2(db, sql, -1, &stmt, NULL), sql);
  return stmt;
}

int main(int argc, char **argv) {
  if (argc < 5) {
    fprintf(stderr, "usage: fts5_pages TSV QUERIES DB BATCH [--contentless] [--txn N]\n");
    return 2;
  }
  const char *tsv = argv[1], *queries = argv[2], *path = argv[3];
  long batch = atol(argv[4]), txn = 0;
  int contentless = 0;
  for (int i = 5; i < argc; i++) {
    if (!strcmp(argv[i], "--contentless")) contentless = 1;
    if (!strcmp(argv[i], "--txn") && i + 1 < argc) txn = atol(argv[++i]);
  }
  if (txn <= 0 || txn > batch) txn = batch;
  const char *name = contentless ? "fts5-contentless" : "fts5";
  char wal[4096];
  snprintf(wal, sizeof wal, "%s-wal", path);
  remove(path);
  remove(wal);
  char shm[4096];
  snprintf(shm, sizeof shm, "%s-shm", path);
  remove(shm);
  check(sqlite3_open(path, &db), "open");
  exec("PRAGMA journal_mode=WAL");
  exec("PRAGMA synchronous=NORMAL");
  exec(contentless
           ? "CREATE VIRTUAL TABLE pages USING fts5(wiki, title, body, content='', "
             "tokenize='unicode61 remove_diacritics 2')"
           : "CREATE VIRTUAL TABLE pages USING fts5(wiki UNINDEXED, title, body, "
             "tokenize='unicode61 remove_diacritics 2')");

  /* --- Loading, batch by batch --- */
  FILE *in = fopen(tsv, "r");
  if (!in) {
    perror(tsv);
    return 1;
  }
  sqlite3_stmt *insert = prepare("INSERT INTO pages(rowid, wiki, title, body) VALUES (?, ?, ?, ?)");
  char *line = NULL;
  size_t cap = 0;
  ssize_t len;
  long rows = 0, inBatch = 0, inTxn = 0, k = 0;
  double seconds = 0;
  int more = 1;
  while (more) {
    len = getline(&line, &cap, in);
    more = len > 0;
    if (more) {
      if (line[len - 1] == '\n') line[--len] = 0;
      char *wiki = strchr(line, '\t');
      char *text = wiki ? strchr(wiki + 1, '\t') : NULL;
      if (!text) {
        fprintf(stderr, "fts5_pages: bad line %ld\n", rows + 1);
        return 1;
      }
      *wiki++ = 0;
      *text++ = 0;
      char *title = strchr(line, ':');
      title = title ? title + 1 : line;
      double t0 = now();
      if (inTxn == 0) exec("BEGIN");
      sqlite3_bind_int64(insert, 1, rows + 1);
      sqlite3_bind_text(insert, 2, wiki, -1, SQLITE_STATIC);
      sqlite3_bind_text(insert, 3, title, -1, SQLITE_STATIC);
      sqlite3_bind_text(insert, 4, text, -1, SQLITE_STATIC);
      check(sqlite3_step(insert), "insert");
      sqlite3_reset(insert);
      rows++;
      inBatch++;
      if (++inTxn == txn || inBatch == batch) {
        exec("COMMIT");
        inTxn = 0;
      }
      seconds += now() - t0;
    } else if (inTxn > 0) {
      double t0 = now();
      exec("COMMIT");
      inTxn = 0;
      seconds += now() - t0;
    }
    if (inBatch == batch || (!more && inBatch > 0)) {
      double t0 = now();
      exec("PRAGMA wal_checkpoint(TRUNCATE)");
      seconds += now() - t0;
      k++;
      printf("%s-growth-batch %ld %ld %.6f %.0f\n", name, k, inBatch, seconds, inBatch / seconds);
      long current, peak;
      resident(&current, &peak);
      printf("%s-rss %ld current_kb %ld peak_kb %ld\n", name, k, current, peak);
      long long bytes, disk, walBytes, walDisk;
      sizes(path, &bytes, &disk);
      sizes(wal, &walBytes, &walDisk);
      printf("%s-size %ld db_bytes %lld db_disk %lld wal_bytes %lld\n", name, k, bytes, disk,
             walBytes);
      fflush(stdout);
      inBatch = 0;
      seconds = 0;
    }
  }
  fclose(in);
  sqlite3_finalize(insert);

  /* --- Queries --- */
  FILE *qf = fopen(queries, "r");
  if (!qf) {
    perror(queries);
    return 1;
  }
  char few[1024] = "", fewMatch[1024] = "";
  int nq = 0, qcap = 0;
  char **qclass = NULL, **qtext = NULL;
  while ((len = getline(&line, &cap, qf)) > 0) {
    if (line[len - 1] == '\n') line[--len] = 0;
    char *tab = strchr(line, '\t');
    if (!tab) continue;
    *tab++ = 0;
    if (!strcmp(line, "wikis")) {
      /* "w5,w42,w77": 'w5','w42','w77' for the regular table's IN, w5 OR w42 OR w77 for the
       * contentless one's column filter. */
      char *save, *w;
      for (w = strtok_r(tab, ",", &save); w; w = strtok_r(NULL, ",", &save)) {
        snprintf(few + strlen(few), sizeof few - strlen(few), "%s'%s'", *few ? "," : "", w);
        snprintf(fewMatch + strlen(fewMatch), sizeof fewMatch - strlen(fewMatch), "%s%s",
                 *fewMatch ? " OR " : "", w);
      }
      continue;
    }
    if (nq == qcap) {
      qcap = qcap ? qcap * 2 : 256;
      qclass = realloc(qclass, qcap * sizeof *qclass);
      qtext = realloc(qtext, qcap * sizeof *qtext);
    }
    qclass[nq] = strdup(line);
    qtext[nq] = strdup(tab);
    nq++;
  }
  fclose(qf);
  free(line);

  char sql[4096];
  sqlite3_stmt *top[2], *count[2], *snip[2] = {NULL, NULL};
  for (int scope = 0; scope < 2; scope++) {
    const char *where = "";
    char restrict_[1100];
    if (scope == 1 && !contentless) {
      snprintf(restrict_, sizeof restrict_, " AND wiki IN (%s)", few);
      where = restrict_;
    }
    snprintf(sql, sizeof sql,
             "SELECT rowid FROM pages WHERE pages MATCH ?1%s ORDER BY bm25(pages) LIMIT 25", where);
    top[scope] = prepare(sql);
    snprintf(sql, sizeof sql, "SELECT count(*) FROM pages WHERE pages MATCH ?1%s", where);
    count[scope] = prepare(sql);
    if (!contentless) {
      snprintf(sql, sizeof sql,
               "SELECT rowid, title, snippet(pages, 2, '<b>', '</b>', '…', 24) FROM pages "
               "WHERE pages MATCH ?1%s ORDER BY bm25(pages) LIMIT 25",
               where);
      snip[scope] = prepare(sql);
    }
  }
  double *ranking = malloc(nq * sizeof(double)), *top25 = malloc(nq * sizeof(double));
  double *snippets = malloc(nq * sizeof(double));
  long *totals = malloc(nq * sizeof(long));
  char match[4096];
  for (int start = 0; start < nq;) {
    int end = start;
    while (end < nq && !strcmp(qclass[end], qclass[start])) end++;
    for (int scope = 0; scope < 2; scope++) {
      const char *scopeName = scope ? "few" : "all";
      int n = 0;
      for (int q = start; q < end; q++) {
        const char *m = qtext[q];
        if (scope == 1 && contentless) {
          snprintf(match, sizeof match, "{wiki} : (%s) AND {title body} : (%s)", fewMatch,
                   qtext[q]);
          m = match;
        }
        double t0 = now();
        run(top[scope], m);
        double t1 = now();
        long total = run(count[scope], m);
        double t2 = now();
        double ts = 0;
        if (snip[scope]) {
          double t3 = now();
          run(snip[scope], m);
          run(count[scope], m);
          ts = now() - t3;
        }
        if (q - start < 5) continue;
        top25[n] = t1 - t0;
        ranking[n] = t2 - t0;
        snippets[n] = ts;
        totals[n] = total;
        n++;
        printf("%s-match %s %s %d %ld\n", name, qclass[start], scopeName, q - start, total);
      }
      char label[256];
      snprintf(label, sizeof label, "%s-%s-%s-ranking", name, qclass[start], scopeName);
      report_times(label, ranking, n);
      snprintf(label, sizeof label, "%s-%s-%s-top25", name, qclass[start], scopeName);
      report_times(label, top25, n);
      if (snip[scope]) {
        snprintf(label, sizeof label, "%s-%s-%s-snippets", name, qclass[start], scopeName);
        report_times(label, snippets, n);
      }
      if (n > 0) {
        qsort(totals, n, sizeof *totals, cmp_long);
        printf("%s-%s-%s-matches median %ld max %ld\n", name, qclass[start], scopeName,
               totals[n / 2], totals[n - 1]);
      }
      fflush(stdout);
    }
    start = end;
  }
  long current, peak;
  resident(&current, &peak);
  printf("%s-rss-end current_kb %ld peak_kb %ld\n", name, current, peak);
  sqlite3_close(db);
  return 0;
}
