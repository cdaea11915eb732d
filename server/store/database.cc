#include "server/store/database.h"

#include <libpq-fe.h>

#include <memory>
#include <pqxx/pqxx>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "server/store/conninfo.h"
#include "server/store/pg_error.h"

namespace ptxbench::store {
namespace {

using internal::ClassifyCurrentException;

struct ConninfoDeleter {
  void operator()(PQconninfoOption* options) const { PQconninfoFree(options); }
};
using ConninfoPtr = std::unique_ptr<PQconninfoOption, ConninfoDeleter>;

absl::StatusOr<ConninfoPtr> ParseConninfo(const std::string& url) {
  char* error = nullptr;
  ConninfoPtr options(PQconninfoParse(url.c_str(), &error));
  if (options == nullptr) {
    std::string message = error != nullptr ? error : "out of memory";
    PQfreemem(error);
    while (!message.empty() && message.back() == '\n') message.pop_back();
    return absl::InvalidArgumentError(
        absl::StrCat("database URL is not a valid libpq connection string: ", message));
  }
  return options;
}

// Quotes a value for a keyword/value connection string (libpq "Connection Strings": single
// quotes, with \ and ' escaped by a backslash).
std::string QuoteConninfoValue(const std::string& value) {
  std::string quoted = "'";
  for (char c : value) {
    if (c == '\'' || c == '\\') quoted += '\\';
    quoted += c;
  }
  quoted += '\'';
  return quoted;
}

absl::Status CheckDatabaseName(const std::string& name) {
  if (name.empty() || name.size() > 63) {
    return absl::InvalidArgumentError(absl::StrCat(
        "database name '", name, "' must have 1 to 63 characters (PostgreSQL's NAMEDATALEN)"));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::string> internal::RewriteConninfo(
    const std::string& url, const std::vector<ConninfoParameter>& parameters) {
  auto options = ParseConninfo(url);
  if (!options.ok()) return options.status();
  std::vector<bool> applied(parameters.size(), false);
  std::string result;
  auto append = [&result](const std::string& keyword, const std::string& value) {
    if (!result.empty()) result += ' ';
    absl::StrAppend(&result, keyword, "=", QuoteConninfoValue(value));
  };
  for (PQconninfoOption* option = options->get(); option->keyword != nullptr; ++option) {
    const std::string keyword = option->keyword;
    const bool present = option->val != nullptr;
    std::string value = present ? option->val : "";
    bool set = present;
    for (size_t i = 0; i < parameters.size(); ++i) {
      if (parameters[i].keyword != keyword) continue;
      applied[i] = true;
      if (!present || !parameters[i].only_if_unset) {
        value = parameters[i].value;
        set = true;
      }
    }
    if (set) append(keyword, value);
  }
  for (size_t i = 0; i < parameters.size(); ++i) {
    if (applied[i]) continue;
    return absl::InvalidArgumentError(
        absl::StrCat("libpq has no connection parameter '", parameters[i].keyword, "'"));
  }
  return result;
}

absl::StatusOr<std::string> WithDatabaseName(const std::string& url, const std::string& database) {
  return internal::RewriteConninfo(url, {{"dbname", database, false}});
}

std::string DescribeDatabaseUrl(const std::string& url) {
  auto options = ParseConninfo(url);
  if (!options.ok()) return "<unparsable database URL>";
  std::string user, host, hostaddr, port, dbname;
  for (PQconninfoOption* option = options->get(); option->keyword != nullptr; ++option) {
    if (option->val == nullptr) continue;
    std::string keyword = option->keyword;
    if (keyword == "user") user = option->val;
    if (keyword == "host") host = option->val;
    if (keyword == "hostaddr") hostaddr = option->val;
    if (keyword == "port") port = option->val;
    if (keyword == "dbname") dbname = option->val;
  }
  if (host.empty()) host = hostaddr.empty() ? "localhost" : hostaddr;
  return absl::StrCat(user.empty() ? "" : user + "@", host, port.empty() ? "" : ":" + port, "/",
                      dbname.empty() ? user : dbname);
}

absl::Status CreateDatabase(const std::string& server_url, const std::string& name) {
  if (absl::Status status = CheckDatabaseName(name); !status.ok()) return status;
  const std::string context =
      absl::StrCat("creating database '", name, "' on ", DescribeDatabaseUrl(server_url));
  try {
    pqxx::connection connection(server_url);
    // CREATE DATABASE cannot run inside a transaction block.
    pqxx::nontransaction tx(connection);
    tx.exec0("CREATE DATABASE " + tx.quote_name(name));
    return absl::OkStatus();
  } catch (...) {
    return ClassifyCurrentException(context).status;
  }
}

absl::StatusOr<bool> EnsureDatabase(const std::string& server_url, const std::string& name) {
  if (absl::Status status = CheckDatabaseName(name); !status.ok()) return status;
  try {
    pqxx::connection connection(server_url);
    pqxx::nontransaction tx(connection);
    if (!tx.exec_params("SELECT 1 FROM pg_database WHERE datname = $1", name).empty()) {
      return false;
    }
  } catch (...) {
    return ClassifyCurrentException(absl::StrCat("looking up database '", name, "' on ",
                                                 DescribeDatabaseUrl(server_url)))
        .status;
  }
  absl::Status created = CreateDatabase(server_url, name);
  // Someone else created it in between: it exists, which is what was asked.
  if (absl::IsAlreadyExists(created)) return false;
  if (!created.ok()) return created;
  return true;
}

absl::Status DropDatabase(const std::string& server_url, const std::string& name) {
  if (absl::Status status = CheckDatabaseName(name); !status.ok()) return status;
  try {
    pqxx::connection connection(server_url);
    pqxx::nontransaction tx(connection);
    tx.exec0("DROP DATABASE IF EXISTS " + tx.quote_name(name) + " WITH (FORCE)");
    return absl::OkStatus();
  } catch (...) {
    return ClassifyCurrentException(
               absl::StrCat("dropping database '", name, "' on ", DescribeDatabaseUrl(server_url)))
        .status;
  }
}

absl::StatusOr<SqlResult> RunSql(const std::string& url, const std::string& sql) {
  try {
    pqxx::connection connection(url);
    pqxx::work tx(connection);
    pqxx::result result = tx.exec(sql);
    tx.commit();
    SqlResult out;
    out.affected_rows = result.affected_rows();
    for (pqxx::row::size_type i = 0; i < result.columns(); ++i) {
      out.columns.emplace_back(result.column_name(i));
    }
    for (const pqxx::row& row : result) {
      std::vector<std::optional<std::string>>& values = out.rows.emplace_back();
      for (const pqxx::field& field : row) {
        if (field.is_null()) {
          values.emplace_back(std::nullopt);
        } else {
          values.emplace_back(field.c_str());
        }
      }
    }
    return out;
  } catch (...) {
    return ClassifyCurrentException(absl::StrCat("running SQL on ", DescribeDatabaseUrl(url)))
        .status;
  }
}

}  // namespace ptxbench::store
