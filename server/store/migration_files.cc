#include "server/store/migration_files.h"

#include <filesystem>
#include <map>
#include <regex>
#include <string>
#include <system_error>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/files.h"

namespace ptxbench::store::internal {

absl::StatusOr<std::vector<MigrationFile>> ReadMigrationFiles(const std::string& dir) {
  std::error_code error;
  if (!std::filesystem::is_directory(dir, error)) {
    return absl::NotFoundError(absl::StrCat("migrations folder '", dir, "' does not exist"));
  }
  // NNNN_name.up.sql: four digits so that `ls` sorts them in the order they apply.
  static const std::regex kPattern("^([0-9]{4})_([a-z0-9_]+)\\.(up|down)\\.sql$");
  struct Pair {
    std::string name;
    std::filesystem::path up;
    std::filesystem::path down;
  };
  std::map<int, Pair> pairs;
  for (const auto& entry : std::filesystem::directory_iterator(dir, error)) {
    const std::string filename = entry.path().filename().string();
    if (!absl::EndsWith(filename, ".sql")) continue;
    std::smatch match;
    if (!std::regex_match(filename, match, kPattern)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "migration file '", filename, "' in ", dir,
          " does not match NNNN_name.up.sql or NNNN_name.down.sql (name: [a-z0-9_]+)"));
    }
    const int version = std::stoi(match[1].str());
    if (version == 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("migration file '", filename, "': version 0000 is reserved for 'none'"));
    }
    const std::string name = match[1].str() + "_" + match[2].str();
    Pair& pair = pairs[version];
    if (!pair.name.empty() && pair.name != name) {
      return absl::InvalidArgumentError(absl::StrCat("migrations '", pair.name, "' and '", name,
                                                     "' in ", dir, " share version ", version));
    }
    pair.name = name;
    (match[3].str() == "up" ? pair.up : pair.down) = entry.path();
  }
  if (error) {
    return absl::InternalError(absl::StrCat("listing ", dir, ": ", error.message()));
  }
  std::vector<MigrationFile> files;
  for (const auto& [version, pair] : pairs) {
    if (pair.up.empty() || pair.down.empty()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "migration ", pair.name, " in ", dir, " has no ", pair.up.empty() ? "up" : "down",
          " file: every migration needs both ", pair.name, ".up.sql and ", pair.name, ".down.sql"));
    }
    MigrationFile& file = files.emplace_back();
    file.version = version;
    file.name = pair.name;
    auto up = ReadFileToString(pair.up.string(), "migration");
    if (!up.ok()) return up.status();
    auto down = ReadFileToString(pair.down.string(), "migration");
    if (!down.ok()) return down.status();
    file.up_sql = *std::move(up);
    file.down_sql = *std::move(down);
  }
  return files;
}

}  // namespace ptxbench::store::internal
