#include "server/store/pg_error.h"

#include <exception>
#include <pqxx/pqxx>
#include <string>

#include "absl/strings/cord.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/strip.h"

namespace ptxbench::store::internal {
namespace {

// libpq's messages end in newlines and put DETAIL/HINT on lines of their own; a Status
// message reads best on one line.
std::string OneLine(const char* what) {
  std::string text = absl::StrReplaceAll(what, {{"\n", " "}, {"\t", " "}});
  while (absl::StrContains(text, "  ")) text = absl::StrReplaceAll(text, {{"  ", " "}});
  return std::string(absl::StripAsciiWhitespace(text));
}

absl::Status OutcomeUnknown(const std::string& message) {
  absl::Status status = absl::UnknownError(message);
  status.SetPayload(kOutcomeUnknownPayload, absl::Cord("1"));
  return status;
}

PgFailure FromSqlState(const std::string& context, const std::string& sqlstate,
                       const std::string& message) {
  const std::string text = absl::StrCat(context, ": ", message);
  const std::string sqlclass = sqlstate.substr(0, 2);
  if (sqlstate == "23505") return {absl::AlreadyExistsError(text)};
  if (sqlstate == "23503") return {absl::NotFoundError(text)};
  if (sqlclass == "23" || sqlclass == "22") return {absl::InvalidArgumentError(text)};
  if (sqlstate == "40001" || sqlstate == "40P01") return {absl::AbortedError(text), true};
  if (sqlstate == "42501") return {absl::PermissionDeniedError(text)};
  if (sqlstate == "42P01" || sqlstate == "42703") {
    return {absl::FailedPreconditionError(
        absl::StrCat(text, " (is the schema migrated? run `ptxbench-server migrate`)"))};
  }
  if (sqlstate == "57014") return {absl::DeadlineExceededError(text)};
  if (sqlclass == "53") return {absl::ResourceExhaustedError(text)};
  if (sqlclass == "08" || sqlstate == "57P01" || sqlstate == "57P02" || sqlstate == "57P03") {
    return {absl::UnavailableError(text), false, true};
  }
  if (sqlclass == "55") return {absl::FailedPreconditionError(text)};
  return {absl::InternalError(sqlstate.empty() ? text
                                               : absl::StrCat(text, " (SQLSTATE ", sqlstate, ")"))};
}

}  // namespace

PgFailure ClassifyCurrentException(const std::string& context) {
  try {
    throw;
  } catch (const pqxx::broken_connection& e) {
    return {absl::UnavailableError(
                absl::StrCat(context, ": PostgreSQL connection failed: ", OneLine(e.what()))),
            false, true};
  } catch (const pqxx::in_doubt_error& e) {
    // The connection broke while COMMIT was in flight: the transaction may or may not have
    // been applied. Not retried here: the caller (or an operator) must look.
    return {OutcomeUnknown(absl::StrCat(
                context, ": connection lost during COMMIT, outcome unknown: ", OneLine(e.what()))),
            false, true};
  } catch (const pqxx::statement_completion_unknown& e) {
    return {
        OutcomeUnknown(absl::StrCat(context, ": statement outcome unknown: ", OneLine(e.what()))),
        false, true};
  } catch (const pqxx::serialization_failure& e) {
    return {absl::AbortedError(absl::StrCat(context, ": ", OneLine(e.what()))), true};
  } catch (const pqxx::deadlock_detected& e) {
    return {absl::AbortedError(absl::StrCat(context, ": ", OneLine(e.what()))), true};
  } catch (const pqxx::transaction_rollback& e) {
    return {absl::AbortedError(absl::StrCat(context, ": ", OneLine(e.what()))), true};
  } catch (const pqxx::unique_violation& e) {
    // libpqxx 6.4 does not always pass the SQLSTATE into the exceptions it derives from it,
    // so its exception type decides first and the SQLSTATE only for plain sql_error.
    return FromSqlState(context, "23505", OneLine(e.what()));
  } catch (const pqxx::foreign_key_violation& e) {
    return FromSqlState(context, "23503", OneLine(e.what()));
  } catch (const pqxx::integrity_constraint_violation& e) {
    return FromSqlState(context, "23000", OneLine(e.what()));
  } catch (const pqxx::data_exception& e) {
    return FromSqlState(context, "22000", OneLine(e.what()));
  } catch (const pqxx::insufficient_privilege& e) {
    return FromSqlState(context, "42501", OneLine(e.what()));
  } catch (const pqxx::undefined_table& e) {
    return FromSqlState(context, "42P01", OneLine(e.what()));
  } catch (const pqxx::undefined_column& e) {
    return FromSqlState(context, "42703", OneLine(e.what()));
  } catch (const pqxx::insufficient_resources& e) {
    return FromSqlState(context, "53000", OneLine(e.what()));
  } catch (const pqxx::sql_error& e) {
    return FromSqlState(context, e.sqlstate(), OneLine(e.what()));
  } catch (const pqxx::conversion_error& e) {
    return {absl::InternalError(
        absl::StrCat(context, ": unexpected value from PostgreSQL: ", OneLine(e.what())))};
  } catch (const std::exception& e) {
    return {absl::InternalError(absl::StrCat(context, ": ", OneLine(e.what())))};
  } catch (...) {
    return {absl::InternalError(absl::StrCat(context, ": unknown exception"))};
  }
}

}  // namespace ptxbench::store::internal
