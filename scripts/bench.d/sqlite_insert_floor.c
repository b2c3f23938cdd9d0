/* The least CPU any hub spends storing the hub-ingest rows through SQLite on one core: the same
 * rows, schema, indexes, pragmas (the hub's: a rollback journal, journal_mode=TRUNCATE, and
 * synchronous=NORMAL, so every commit is synced as the hub's are; the default page cache) and one
 * transaction per second of data as the python3 baseline in
 * 60-hub-ingest, written by C with one prepared statement,
 * bound in place (SQLITE_STATIC), parsed before timing starts. No parsing, no aggregation,
 * no queue: only what storing the rows costs SQLite itself.
 *
 * usage: sqlite_insert_floor FRAMES.txt DB    (FRAMES.txt: "node at hexframe" per line, from
 * `piconet-store-tool export-frames`); prints rows/s. */
#include <sqlite3.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

struct row {
  char node[64];
  int64_t at, epoch, seq, sent;
  unsigned char *payload;
  int length;
};

static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec + t.tv_nsec / 1e9;
}

static int hexval(int c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

static uint64_t le(const unsigned char *p, int n) {
  uint64_t v = 0;
  for (int i = n - 1; i >= 0; i--) v = v << 8 | p[i];
  return v;
}

static void must(int rc, sqlite3 *db, const char *what) {
  if (rc != SQLITE_OK && rc != SQLITE_DONE && rc != SQLITE_ROW) {
    fprintf(stderr, "sqlite_insert_floor: %s: %s\n", what, sqlite3_errmsg(db));
    exit(1);
  }
}

int main(int argc, char **argv) {
  if (argc != 3) { fprintf(stderr, "usage: sqlite_insert_floor FRAMES.txt DB\n"); return 64; }
  FILE *f = fopen(argv[1], "r");
  if (!f) { perror(argv[1]); return 1; }
  size_t count = 0, capacity = 1024;
  struct row *rows = malloc(capacity * sizeof *rows);
  char node[64], hex[8192];
  long long at;
  while (fscanf(f, "%63s %lld %8191s", node, &at, hex) == 3) {
    size_t n = strlen(hex) / 2;
    if (n < 6 + 14) continue;  /* the python baseline would fail on these too: none are made */
    if (count == capacity) rows = realloc(rows, (capacity *= 2) * sizeof *rows);
    struct row *r = &rows[count++];
    unsigned char *frame = malloc(n);
    for (size_t i = 0; i < n; i++) frame[i] = (unsigned char)(hexval(hex[2 * i]) << 4 | hexval(hex[2 * i + 1]));
    strcpy(r->node, node);
    r->at = at;
    r->payload = frame + 6;  /* the frame header, as the baseline's frame[6:] */
    r->length = (int)n - 6;
    r->seq = (int64_t)(uint32_t)le(r->payload, 4);
    r->epoch = (int64_t)le(r->payload + 4, 2);
    r->sent = (int64_t)le(r->payload + 6, 8);
  }
  fclose(f);
  if (count == 0) { fprintf(stderr, "sqlite_insert_floor: no rows in %s\n", argv[1]); return 1; }

  sqlite3 *db;
  must(sqlite3_open(argv[2], &db), db, "open");
  must(sqlite3_exec(db, "PRAGMA journal_mode=TRUNCATE; PRAGMA synchronous=NORMAL; PRAGMA cache_size=-2000;"
                        "CREATE TABLE batch (id INTEGER PRIMARY KEY, node TEXT NOT NULL, received_at INTEGER NOT NULL,"
                        " epoch INTEGER NOT NULL, sequence INTEGER NOT NULL, node_time INTEGER NOT NULL, payload BLOB NOT NULL);"
                        "CREATE INDEX batch_node_time ON batch(node, received_at); CREATE INDEX batch_time ON batch(received_at);",
                    NULL, NULL, NULL), db, "schema");
  sqlite3_stmt *insert;
  must(sqlite3_prepare_v2(db, "INSERT INTO batch (node, received_at, epoch, sequence, node_time, payload) VALUES (?,?,?,?,?,?)",
                          -1, &insert, NULL), db, "prepare");
  double t0 = now();
  size_t i = 0;
  while (i < count) {
    int64_t first = rows[i].at;
    must(sqlite3_exec(db, "BEGIN", NULL, NULL, NULL), db, "begin");
    for (; i < count && rows[i].at - first < 1000000000; i++) {
      struct row *r = &rows[i];
      sqlite3_bind_text(insert, 1, r->node, -1, SQLITE_STATIC);
      sqlite3_bind_int64(insert, 2, r->at);
      sqlite3_bind_int64(insert, 3, r->epoch);
      sqlite3_bind_int64(insert, 4, r->seq);
      sqlite3_bind_int64(insert, 5, r->sent);
      sqlite3_bind_blob(insert, 6, r->payload, r->length, SQLITE_STATIC);
      must(sqlite3_step(insert), db, "insert");
      sqlite3_reset(insert);
    }
    must(sqlite3_exec(db, "COMMIT", NULL, NULL, NULL), db, "commit");
  }
  double t1 = now();
  sqlite3_finalize(insert);
  sqlite3_close(db);
  printf("%.0f\n", count / (t1 - t0));
  return 0;
}
