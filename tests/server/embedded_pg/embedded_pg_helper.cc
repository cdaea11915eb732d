// A stand-in for a ptxbench-server that owns an embedded cluster, for embedded_pg_test: starts
// EmbeddedPostgres on argv[1], writes one row, prints "READY <database_url>" and waits to be
// killed. The test SIGKILLs it to leave an orphaned postmaster behind, as a crash would.
#include <unistd.h>

#include <cstdio>
#include <string>

#include "absl/strings/str_cat.h"
#include "server/embedded_pg/embedded_postgres.h"
#include "server/store/database.h"

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s DATA_DIR\n", argv[0]);
    return 2;
  }
  ptxbench::embedded_pg::EmbeddedPostgres::Options options;
  options.data_dir = argv[1];
  auto postgres = ptxbench::embedded_pg::EmbeddedPostgres::Start(options);
  if (!postgres.ok()) {
    std::fprintf(stderr, "start: %s\n", postgres.status().ToString().c_str());
    return 1;
  }
  const std::string url = (*postgres)->database_url();
  auto written = ptxbench::store::RunSql(
      url, absl::StrCat("CREATE TABLE IF NOT EXISTS notes (text text NOT NULL);"
                        "INSERT INTO notes VALUES ('written by pid ",
                        getpid(), " before it was killed')"));
  if (!written.ok()) {
    std::fprintf(stderr, "write: %s\n", written.status().ToString().c_str());
    return 1;
  }
  std::printf("READY %s\n", url.c_str());
  std::fflush(stdout);
  while (true) pause();
}
