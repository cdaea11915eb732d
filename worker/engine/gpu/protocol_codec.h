// The JSON codec of the evaluator protocol (protocol_messages.h): one field list per message,
// walked in both directions.
//
// Every message lists its fields once, in a static member template
//
//   template <typename Self, typename Visitor>
//   static void Fields(Self& m, Visitor& v) { v("workload", m.workload); ... }
//
// and ToJson / FromJson below are the one to-JSON and the one from-JSON function of every
// message, both driven by that list: the writer and the reader cannot disagree, and renaming a
// field or a key is one edit that the compiler follows into the supervisor, the evaluator and the
// fake evaluator. FromJson is strict: a missing key, a value of the wrong type, an enum name not
// in its table, an unexpected key or the wrong command/event name is an InvalidArgument error
// that names the message and the key path ("trial event: outputs[1].bytes: expected an unsigned
// integer, got string"), never a silent default. Optional fields are std::optional: absent when
// empty.
//
// Value types: bool, integers (JSON numbers, range-checked), double (JSON has no NaN or Inf:
// nlohmann writes them as null, read back as NaN), std::string, protocol enums (by name, see
// NamedEnum), std::vector, std::map<std::string, T>, nested messages, nlohmann::json (documents
// passed through unread, such as the compiler's report) and types with their own codec
// (EncodeCustom / DecodeCustom found by argument-dependent lookup, e.g. gpu::CompareReport).
// 64-bit identifiers (seeds, hashes, CRCs) are listed as AsDecimal(m.seed): decimal text,
// because JSON readers other than ours lose precision past 2^53.
#ifndef PTXBENCH_WORKER_ENGINE_GPU_PROTOCOL_CODEC_H_
#define PTXBENCH_WORKER_ENGINE_GPU_PROTOCOL_CODEC_H_

#include <cmath>
#include <concepts>
#include <cstdint>
#include <limits>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <variant>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "nlohmann/json.hpp"

namespace ptxbench::gpu {

// A uint64_t (or std::optional<uint64_t>) field that travels as decimal text.
template <typename T>
struct DecimalText {
  T& value;
};
template <typename T>
DecimalText<T> AsDecimal(T& value) {
  return {value};
}

// An enum of the protocol: declares its wire names with a function found by argument-dependent
// lookup, `const auto& EnumNames(E)`, returning an array of {value, name} pairs.
template <typename E>
concept NamedEnum = std::is_enum_v<E> && requires(E e) {
  { EnumNames(e).begin()->second } -> std::convertible_to<std::string_view>;
};

template <NamedEnum E>
std::string_view NameOf(E value) {
  for (const auto& [candidate, name] : EnumNames(E{})) {
    if (candidate == value) return name;
  }
  return "?";
}

template <NamedEnum E>
std::optional<E> EnumFromName(std::string_view name) {
  for (const auto& [candidate, candidate_name] : EnumNames(E{})) {
    if (candidate_name == name) return candidate;
  }
  return std::nullopt;
}

namespace codec {

// Decodes the decimal text (or number) of a 64-bit identifier.
absl::StatusOr<uint64_t> ParseDecimalU64(const nlohmann::json& value);
// "<where>: <what>" as an InvalidArgument error; `where` is "trial event: outputs[1].bytes".
absl::Status Invalid(std::string_view where, std::string_view what);
// "expected <expected>, got <the JSON type of value>".
std::string Expected(std::string_view expected, const nlohmann::json& value);
std::string JoinPath(std::string_view path, std::string_view key);
std::string IndexPath(std::string_view path, size_t index);

template <NamedEnum E>
std::string EnumNameList() {
  std::string out;
  for (const auto& [value, name] : EnumNames(E{})) {
    if (!out.empty()) out += ", ";
    out += name;
  }
  return out;
}

// Visits nothing: only used to detect a Fields member.
struct FieldProbe {
  template <typename T>
  void operator()(std::string_view, T&&) {}
};

template <typename T>
concept Message = std::is_class_v<T> && requires(T& m, FieldProbe& probe) {
  T::Fields(m, probe);
};

template <typename T>
concept CustomCodec = requires(const T& value, const nlohmann::json& j, T* out) {
  { EncodeCustom(value) } -> std::same_as<nlohmann::json>;
  { DecodeCustom(j, out) } -> std::same_as<absl::Status>;
};

template <typename T>
struct IsVector : std::false_type {};
template <typename T>
struct IsVector<std::vector<T>> : std::true_type {};
template <typename T>
struct IsStringMap : std::false_type {};
template <typename T>
struct IsStringMap<std::map<std::string, T>> : std::true_type {};

// The envelope of commands and events: a message with `static constexpr auto kKind` is sent
// with {"<EnvelopeKey(kKind)>": "<NameOf(kKind)>"} beside its fields.
template <typename M>
concept Enveloped = Message<M> && requires {
  { EnvelopeKey(M::kKind) } -> std::convertible_to<std::string_view>;
};

template <typename T>
nlohmann::json EncodeValue(const T& value);

class Writer {
 public:
  explicit Writer(nlohmann::json* out) : out_(out) {}
  template <typename T>
  void operator()(std::string_view key, const T& value) {
    (*out_)[std::string(key)] = EncodeValue(value);
  }
  template <typename T>
  void operator()(std::string_view key, const std::optional<T>& value) {
    if (value.has_value()) (*this)(key, *value);
  }
  void operator()(std::string_view key, DecimalText<const uint64_t> value) {
    (*out_)[std::string(key)] = std::to_string(value.value);
  }
  void operator()(std::string_view key, DecimalText<const std::optional<uint64_t>> value) {
    if (value.value.has_value()) (*out_)[std::string(key)] = std::to_string(*value.value);
  }

 private:
  nlohmann::json* out_;
};

template <typename T>
nlohmann::json EncodeValue(const T& value) {
  if constexpr (Message<T>) {
    nlohmann::json out = nlohmann::json::object();
    Writer writer(&out);
    T::Fields(value, writer);
    return out;
  } else if constexpr (NamedEnum<T>) {
    return std::string(NameOf(value));
  } else if constexpr (IsVector<T>::value) {
    nlohmann::json out = nlohmann::json::array();
    for (const auto& item : value) out.push_back(EncodeValue(item));
    return out;
  } else if constexpr (IsStringMap<T>::value) {
    nlohmann::json out = nlohmann::json::object();
    for (const auto& [key, item] : value) out[key] = EncodeValue(item);
    return out;
  } else if constexpr (CustomCodec<T>) {
    return EncodeCustom(value);
  } else {
    static_assert(std::is_same_v<T, nlohmann::json> || std::is_same_v<T, std::string> ||
                      std::is_arithmetic_v<T>,
                  "no protocol codec for this type");
    return nlohmann::json(value);
  }
}

template <typename T>
absl::Status DecodeValue(const nlohmann::json& j, T* out, std::string_view where);

class Reader {
 public:
  Reader(const nlohmann::json& object, std::string_view where) : object_(object), where_(where) {}

  template <typename T>
  void operator()(std::string_view key, T& value) {
    if (!status_.ok()) return;
    visited_.insert(std::string(key));
    auto it = object_.find(std::string(key));
    if (it == object_.end()) {
      status_ = Invalid(where_, "missing key '" + std::string(key) + "'");
      return;
    }
    status_ = DecodeValue(*it, &value, JoinPath(where_, key));
  }
  template <typename T>
  void operator()(std::string_view key, std::optional<T>& value) {
    if (!status_.ok()) return;
    visited_.insert(std::string(key));
    auto it = object_.find(std::string(key));
    if (it == object_.end() || it->is_null()) {
      value.reset();
      return;
    }
    T decoded{};
    status_ = DecodeValue(*it, &decoded, JoinPath(where_, key));
    if (status_.ok()) value = std::move(decoded);
  }
  void operator()(std::string_view key, DecimalText<uint64_t> value) {
    std::optional<uint64_t> decoded;
    Decimal(key, &decoded, /*required=*/true);
    if (decoded.has_value()) value.value = *decoded;
  }
  void operator()(std::string_view key, DecimalText<std::optional<uint64_t>> value) {
    Decimal(key, &value.value, /*required=*/false);
  }
  // Every key of the object was a field (or the envelope's `envelope_key`).
  absl::Status Finish(std::string_view envelope_key);

 private:
  void Decimal(std::string_view key, std::optional<uint64_t>* value, bool required);

  const nlohmann::json& object_;
  std::string where_;
  std::set<std::string> visited_;
  absl::Status status_;
};

template <typename T>
absl::Status DecodeMessage(const nlohmann::json& j, T* out, std::string_view where,
                           std::string_view envelope_key) {
  if (!j.is_object()) return Invalid(where, Expected("an object", j));
  Reader reader(j, where);
  T::Fields(*out, reader);
  return reader.Finish(envelope_key);
}

template <typename T>
absl::Status DecodeValue(const nlohmann::json& j, T* out, std::string_view where) {
  if constexpr (Message<T>) {
    return DecodeMessage(j, out, where, "");
  } else if constexpr (NamedEnum<T>) {
    if (!j.is_string()) return Invalid(where, Expected("a name", j));
    std::optional<T> value = EnumFromName<T>(j.get_ref<const std::string&>());
    if (!value.has_value()) {
      return Invalid(where, "'" + j.get<std::string>() + "' is not one of " + EnumNameList<T>());
    }
    *out = *value;
    return absl::OkStatus();
  } else if constexpr (IsVector<T>::value) {
    if (!j.is_array()) return Invalid(where, Expected("an array", j));
    out->clear();
    out->reserve(j.size());
    for (size_t i = 0; i < j.size(); ++i) {
      typename T::value_type item{};
      if (absl::Status s = DecodeValue(j[i], &item, IndexPath(where, i)); !s.ok()) return s;
      out->push_back(std::move(item));
    }
    return absl::OkStatus();
  } else if constexpr (IsStringMap<T>::value) {
    if (!j.is_object()) return Invalid(where, Expected("an object", j));
    out->clear();
    for (auto it = j.begin(); it != j.end(); ++it) {
      typename T::mapped_type item{};
      if (absl::Status s = DecodeValue(it.value(), &item, JoinPath(where, it.key())); !s.ok()) {
        return s;
      }
      out->emplace(it.key(), std::move(item));
    }
    return absl::OkStatus();
  } else if constexpr (CustomCodec<T>) {
    absl::Status s = DecodeCustom(j, out);
    if (!s.ok()) return Invalid(where, std::string(s.message()));
    return s;
  } else if constexpr (std::is_same_v<T, nlohmann::json>) {
    *out = j;
    return absl::OkStatus();
  } else if constexpr (std::is_same_v<T, std::string>) {
    if (!j.is_string()) return Invalid(where, Expected("a string", j));
    *out = j.get<std::string>();
    return absl::OkStatus();
  } else if constexpr (std::is_same_v<T, bool>) {
    if (!j.is_boolean()) return Invalid(where, Expected("true or false", j));
    *out = j.get<bool>();
    return absl::OkStatus();
  } else if constexpr (std::is_integral_v<T>) {
    const bool fits =
        (j.is_number_unsigned() && std::in_range<T>(j.get<uint64_t>())) ||
        (j.is_number_integer() && !j.is_number_unsigned() && std::in_range<T>(j.get<int64_t>()));
    if (!fits) {
      if (j.is_number_integer()) return Invalid(where, "integer out of range: " + j.dump());
      return Invalid(where,
                     Expected(std::is_signed_v<T> ? "an integer" : "an unsigned integer", j));
    }
    *out = j.is_number_unsigned() ? static_cast<T>(j.get<uint64_t>())
                                  : static_cast<T>(j.get<int64_t>());
    return absl::OkStatus();
  } else {
    static_assert(std::is_floating_point_v<T>, "no protocol codec for this type");
    if (j.is_null()) {
      *out = std::numeric_limits<T>::quiet_NaN();
      return absl::OkStatus();
    }
    if (!j.is_number()) return Invalid(where, Expected("a number", j));
    *out = j.get<T>();
    return absl::OkStatus();
  }
}

// "trial event", "time command", or the message's kName ("candidate request").
template <Message M>
std::string MessageName() {
  if constexpr (Enveloped<M>) {
    return std::string(NameOf(M::kKind)) + " " + std::string(EnvelopeKind(M::kKind));
  } else if constexpr (requires { std::string_view(M::kName); }) {
    return std::string(M::kName);
  } else {
    return "message";
  }
}

}  // namespace codec

// The one to-JSON function of every message.
template <codec::Message M>
nlohmann::json ToJson(const M& message) {
  nlohmann::json out = codec::EncodeValue(message);
  if constexpr (codec::Enveloped<M>) {
    out[std::string(EnvelopeKey(M::kKind))] = std::string(NameOf(M::kKind));
  }
  return out;
}

// The one from-JSON function of every message: FromJson<TrialEvent>(j).
template <codec::Message M>
absl::StatusOr<M> FromJson(const nlohmann::json& j) {
  const std::string where = codec::MessageName<M>();
  std::string_view envelope_key;
  if constexpr (codec::Enveloped<M>) {
    envelope_key = EnvelopeKey(M::kKind);
    if (!j.is_object()) return codec::Invalid(where, codec::Expected("an object", j));
    auto kind = j.find(std::string(envelope_key));
    if (kind == j.end() || !kind->is_string() || *kind != NameOf(M::kKind)) {
      return codec::Invalid(where, "its '" + std::string(envelope_key) + "' is " +
                                       (kind == j.end() ? std::string("missing") : kind->dump()));
    }
  }
  M message{};
  if (absl::Status s = codec::DecodeMessage(j, &message, where, envelope_key); !s.ok()) return s;
  return message;
}

// Decodes whichever of `Ms` (commands, or events, each with its kKind) `j` names; any other
// name is an error that lists the accepted ones.
template <codec::Enveloped... Ms>
absl::StatusOr<std::variant<Ms...>> FromJsonOneOf(const nlohmann::json& j) {
  using Kind = std::common_type_t<decltype(Ms::kKind)...>;
  const std::string key(EnvelopeKey(Kind{}));
  if (!j.is_object() || !j.contains(key) || !j[key].is_string()) {
    return codec::Invalid(std::string(EnvelopeKind(Kind{})),
                          "not a message with a '" + key + "' name: " + j.dump().substr(0, 200));
  }
  const std::string name = j[key].get<std::string>();
  std::optional<absl::StatusOr<std::variant<Ms...>>> result;
  (
      [&] {
        if (result.has_value() || name != NameOf(Ms::kKind)) return;
        absl::StatusOr<Ms> decoded = FromJson<Ms>(j);
        if (decoded.ok()) {
          result.emplace(std::variant<Ms...>(std::in_place_type<Ms>, std::move(*decoded)));
        } else {
          result.emplace(decoded.status());
        }
      }(),
      ...);
  if (result.has_value()) return std::move(*result);
  std::string accepted;
  ((accepted += (accepted.empty() ? "" : ", ") + std::string(NameOf(Ms::kKind))), ...);
  return codec::Invalid(std::string(EnvelopeKind(Kind{})),
                        "'" + name + "' is not accepted here (expected " + accepted + ")");
}

}  // namespace ptxbench::gpu

#endif  // PTXBENCH_WORKER_ENGINE_GPU_PROTOCOL_CODEC_H_
