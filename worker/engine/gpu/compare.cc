#include "worker/engine/gpu/compare.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "common/status.h"

namespace ptxbench::gpu {
namespace {

double HalfToDouble(uint16_t h) {
  int sign = (h >> 15) & 1, exponent = (h >> 10) & 0x1F, mantissa = h & 0x3FF;
  double v;
  if (exponent == 0) {
    v = std::ldexp(static_cast<double>(mantissa), -24);
  } else if (exponent == 0x1F) {
    v = mantissa ? std::numeric_limits<double>::quiet_NaN()
                 : std::numeric_limits<double>::infinity();
  } else {
    v = std::ldexp(static_cast<double>(mantissa | 0x400), exponent - 25);
  }
  return sign ? -v : v;
}

double E4M3ToDouble(uint8_t b) {
  int sign = (b >> 7) & 1, exponent = (b >> 3) & 0xF, mantissa = b & 0x7;
  double v;
  if (exponent == 0xF && mantissa == 0x7) {
    v = std::numeric_limits<double>::quiet_NaN();  // e4m3 has no Inf.
  } else if (exponent == 0) {
    v = std::ldexp(static_cast<double>(mantissa), -9);
  } else {
    v = std::ldexp(static_cast<double>(mantissa | 0x8), exponent - 10);
  }
  return sign ? -v : v;
}

uint32_t RawBits(const void* data, uint64_t index, int bytes) {
  const uint8_t* p = static_cast<const uint8_t*>(data) + index * bytes;
  uint32_t v = 0;
  std::memcpy(&v, p, bytes);
  return v;
}

struct Partial {
  uint64_t mismatched = 0, nonfinite = 0, unwritten = 0, reference_nonfinite = 0;
  double max_abs = 0, max_rel = 0, err_sq = 0, ref_sq = 0;
  std::vector<Mismatch> first;
  std::vector<BlockSums> blocks;  // The block rule's sums over this thread's range.
};

constexpr size_t kMaxReported = kMaxReportedMismatches;

}  // namespace

std::vector<int64_t> Coordinates(uint64_t index, const std::vector<int64_t>& shape) {
  std::vector<int64_t> c(shape.size(), 0);
  for (size_t d = shape.size(); d-- > 0;) {
    if (shape[d] <= 0) continue;
    c[d] = static_cast<int64_t>(index % static_cast<uint64_t>(shape[d]));
    index /= static_cast<uint64_t>(shape[d]);
  }
  return c;
}

int ElementBytes(ElementType type) {
  switch (type) {
    case ElementType::kBF16:
    case ElementType::kFP16:
      return 2;
    case ElementType::kFP32:
    case ElementType::kInt32:
      return 4;
    case ElementType::kFP8E4M3:
      return 1;
  }
  return 1;
}

double DecodeElement(const void* data, uint64_t index, ElementType type) {
  switch (type) {
    case ElementType::kBF16: {
      uint32_t bits = RawBits(data, index, 2) << 16;
      float f;
      std::memcpy(&f, &bits, 4);
      return f;
    }
    case ElementType::kFP16:
      return HalfToDouble(static_cast<uint16_t>(RawBits(data, index, 2)));
    case ElementType::kFP32: {
      uint32_t bits = RawBits(data, index, 4);
      float f;
      std::memcpy(&f, &bits, 4);
      return f;
    }
    case ElementType::kFP8E4M3:
      return E4M3ToDouble(static_cast<uint8_t>(RawBits(data, index, 1)));
    case ElementType::kInt32:
      return static_cast<double>(static_cast<int32_t>(RawBits(data, index, 4)));
  }
  return 0;
}

ToleranceRule RuleOf(const Tolerance& tolerance) {
  ToleranceRule rule;
  rule.all_close = tolerance.all_close;
  rule.atol = tolerance.atol;
  rule.rtol = tolerance.rtol;
  rule.matched_ratio = tolerance.matched_ratio;
  rule.max_relative_norm = tolerance.max_relative_norm;
  rule.block_rows = tolerance.block_rows;
  rule.max_block_relative_norm = tolerance.max_block_relative_norm;
  return rule;
}

uint64_t BlockElements(const ToleranceRule& rule, const std::vector<int64_t>& shape,
                       uint64_t count) {
  if (rule.block_rows <= 0 || count == 0) return 0;
  // Rows are the leading dims flattened: the last dim is one row's columns.
  const uint64_t columns = shape.empty() || shape.back() <= 0 ? count : shape.back();
  return std::min<uint64_t>(count, static_cast<uint64_t>(rule.block_rows) * columns);
}

nlohmann::json ToJson(const CompareReport& r) {
  nlohmann::json first = nlohmann::json::array();
  for (const Mismatch& m : r.first_mismatches) {
    first.push_back({{"index", m.index},
                     {"coordinates", m.coordinates},
                     {"got", std::isfinite(m.got) ? nlohmann::json(m.got)
                                                  : nlohmann::json(absl::StrFormat("%g", m.got))},
                     {"expected", m.expected},
                     {"kind", m.kind}});
  }
  nlohmann::json j{
      {"pass", r.pass},
      {"reason", r.reason},
      {"elements", r.elements},
      {"mismatched", r.mismatched},
      {"nonfinite", r.nonfinite},
      {"unwritten", r.unwritten},
      {"reference_nonfinite", r.reference_nonfinite},
      {"max_abs_error", r.max_abs_error},
      {"max_rel_error", r.max_rel_error},
      {"matched_ratio", r.matched_ratio},
      {"relative_norm", r.relative_norm},
      {"reference_norm", r.reference_norm},
      {"rules",
       {{"all_close", {{"checked", r.all_close_checked}, {"pass", r.all_close_pass}}},
        {"relative_norm", {{"checked", r.relative_norm_checked}, {"pass", r.relative_norm_pass}}},
        {"block_relative_norm", {{"checked", r.block_norm_checked}, {"pass", r.block_norm_pass}}}}},
      {"worst_block_relative_norm", r.worst_block_relative_norm},
      {"worst_block", r.worst_block},
      {"block_rows", r.block_rows},
      {"first_mismatches", first}};
  if (r.fp64_measured) {
    // Beside the other rules too, so a reader of "rules" alone sees every rule that judged.
    j["rules"]["fp64_reference"] = {{"checked", r.fp64_checked}, {"pass", r.fp64_pass}};
    j["fp64_reference"] = {{"checked", r.fp64_checked},
                           {"pass", r.fp64_pass},
                           {"relative_norm", r.fp64_relative_norm},
                           {"max_relative_norm", r.fp64_max_relative_norm},
                           {"library_relative_norm", r.library_fp64_relative_norm}};
  }
  return j;
}

namespace {

absl::Status Field(const nlohmann::json& j, const char* key, nlohmann::json::value_t kind) {
  if (!j.contains(key)) return absl::InvalidArgumentError(absl::StrCat("compare report: no ", key));
  const nlohmann::json& v = j[key];
  bool ok = kind == nlohmann::json::value_t::number_float ? v.is_number() : v.type() == kind;
  if (kind == nlohmann::json::value_t::number_unsigned) ok = v.is_number_integer();
  if (!ok) return absl::InvalidArgumentError(absl::StrCat("compare report: bad ", key));
  return absl::OkStatus();
}

// ToJson writes a non-finite value as text ("nan", "-inf"): strtod reads those back.
double NumberOrText(const nlohmann::json& v) {
  if (v.is_number()) return v.get<double>();
  if (v.is_string()) return std::strtod(v.get<std::string>().c_str(), nullptr);
  if (v.is_null()) return std::numeric_limits<double>::infinity();
  return std::numeric_limits<double>::quiet_NaN();
}

}  // namespace

absl::StatusOr<CompareReport> CompareReportFromJson(const nlohmann::json& j) {
  using T = nlohmann::json::value_t;
  if (!j.is_object()) return absl::InvalidArgumentError("compare report: not an object");
  CompareReport r;
  for (const char* key :
       {"elements", "mismatched", "nonfinite", "unwritten", "reference_nonfinite"}) {
    RETURN_IF_ERROR(Field(j, key, T::number_unsigned));
  }
  for (const char* key :
       {"max_abs_error", "max_rel_error", "matched_ratio", "relative_norm", "reference_norm"}) {
    // nlohmann writes an infinite double as null (relative_norm of a zero reference).
    if (j.contains(key) && (j[key].is_string() || j[key].is_null())) continue;
    RETURN_IF_ERROR(Field(j, key, T::number_float));
  }
  RETURN_IF_ERROR(Field(j, "pass", T::boolean));
  RETURN_IF_ERROR(Field(j, "reason", T::string));
  RETURN_IF_ERROR(Field(j, "first_mismatches", T::array));
  r.pass = j["pass"].get<bool>();
  r.reason = j["reason"].get<std::string>();
  r.elements = j["elements"].get<uint64_t>();
  r.mismatched = j["mismatched"].get<uint64_t>();
  r.nonfinite = j["nonfinite"].get<uint64_t>();
  r.unwritten = j["unwritten"].get<uint64_t>();
  r.reference_nonfinite = j["reference_nonfinite"].get<uint64_t>();
  r.max_abs_error = NumberOrText(j["max_abs_error"]);
  r.max_rel_error = NumberOrText(j["max_rel_error"]);
  r.matched_ratio = NumberOrText(j["matched_ratio"]);
  r.relative_norm = NumberOrText(j["relative_norm"]);
  r.reference_norm = NumberOrText(j["reference_norm"]);
  // Which rules judged the report; absent in reports of an older evaluator.
  if (auto rules = j.find("rules"); rules != j.end() && rules->is_object()) {
    auto read = [&](const char* rule, bool* checked, bool* pass) {
      auto it = rules->find(rule);
      if (it == rules->end() || !it->is_object()) return;
      *checked = it->value("checked", false);
      *pass = it->value("pass", false);
    };
    read("all_close", &r.all_close_checked, &r.all_close_pass);
    read("relative_norm", &r.relative_norm_checked, &r.relative_norm_pass);
    read("block_relative_norm", &r.block_norm_checked, &r.block_norm_pass);
  }
  // The block rule's figures; absent in reports of an older evaluator.
  if (auto worst = j.find("worst_block_relative_norm"); worst != j.end()) {
    r.worst_block_relative_norm = NumberOrText(*worst);
  }
  if (auto block = j.find("worst_block"); block != j.end() && block->is_number_integer()) {
    r.worst_block = block->get<int64_t>();
  }
  if (auto rows = j.find("block_rows"); rows != j.end() && rows->is_number_integer()) {
    r.block_rows = rows->get<int64_t>();
  }
  // The fp64 reference's figures; absent when not measured (and from an older evaluator).
  if (auto f = j.find("fp64_reference"); f != j.end() && f->is_object()) {
    r.fp64_measured = true;
    r.fp64_checked = f->value("checked", false);
    r.fp64_pass = f->value("pass", false);
    r.fp64_relative_norm = NumberOrText(f->value("relative_norm", nlohmann::json()));
    r.fp64_max_relative_norm = NumberOrText(f->value("max_relative_norm", nlohmann::json(0.0)));
    r.library_fp64_relative_norm =
        NumberOrText(f->value("library_relative_norm", nlohmann::json(-1.0)));
  }
  for (const nlohmann::json& m : j["first_mismatches"]) {
    if (!m.is_object() || !m.contains("index") || !m["index"].is_number_integer() ||
        !m.contains("coordinates") || !m["coordinates"].is_array() || !m.contains("kind") ||
        !m["kind"].is_string()) {
      return absl::InvalidArgumentError("compare report: bad first_mismatches entry");
    }
    Mismatch x;
    x.index = m["index"].get<uint64_t>();
    x.coordinates = m["coordinates"].get<std::vector<int64_t>>();
    x.got = NumberOrText(m.value("got", nlohmann::json()));
    x.expected = NumberOrText(m.value("expected", nlohmann::json()));
    x.kind = m["kind"].get<std::string>();
    r.first_mismatches.push_back(std::move(x));
  }
  return r;
}

CompareReport CompareOutputs(const void* got, const void* expected, uint64_t count,
                             ElementType type, const std::vector<int64_t>& shape,
                             const ToleranceRule& rule, uint32_t poison, int threads) {
  const int bytes = ElementBytes(type);
  const uint32_t poison_bits = bytes == 4 ? poison : (poison & ((1u << (8 * bytes)) - 1));
  if (threads <= 0) threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  threads = static_cast<int>(std::min<uint64_t>(threads, std::max<uint64_t>(1, count / 65536 + 1)));
  const uint64_t block_elements = BlockElements(rule, shape, count);
  const uint64_t block_count = block_elements ? (count + block_elements - 1) / block_elements : 0;
  std::vector<Partial> partials(threads);
  auto work = [&](int t) {
    Partial& p = partials[t];
    p.blocks.resize(block_count);
    uint64_t begin = count * t / threads, end = count * (t + 1) / threads;
    for (uint64_t i = begin; i < end; ++i) {
      double g = DecodeElement(got, i, type);
      double e = DecodeElement(expected, i, type);
      BlockSums* block = block_elements ? &p.blocks[i / block_elements] : nullptr;
      if (block != nullptr) ++block->elements;
      if (!std::isfinite(e)) {
        ++p.reference_nonfinite;
        continue;
      }
      p.ref_sq += e * e;
      if (block != nullptr) block->ref_sq += e * e;
      const char* kind = nullptr;
      if (!std::isfinite(g)) {
        ++p.nonfinite;
        bool unwritten = type != ElementType::kInt32 && RawBits(got, i, bytes) == poison_bits;
        if (unwritten) ++p.unwritten;
        kind = unwritten ? "unwritten" : (std::isnan(g) ? "nan" : "inf");
      } else {
        if (type == ElementType::kInt32 && RawBits(got, i, bytes) == poison_bits &&
            RawBits(expected, i, bytes) != poison_bits) {
          ++p.unwritten;
        }
        double d = std::abs(g - e);
        p.err_sq += d * d;
        if (block != nullptr) block->err_sq += d * d;
        p.max_abs = std::max(p.max_abs, d);
        if (e != 0) p.max_rel = std::max(p.max_rel, d / std::abs(e));
        if (d > rule.atol && d > rule.rtol * std::abs(e)) {
          ++p.mismatched;
          kind = "mismatch";
        }
      }
      if (kind != nullptr && p.first.size() < kMaxReported) {
        p.first.push_back(Mismatch{i, Coordinates(i, shape), g, e, kind});
      }
    }
  };
  std::vector<std::thread> pool;
  for (int t = 1; t < threads; ++t) pool.emplace_back(work, t);
  work(0);
  for (std::thread& th : pool) th.join();

  CompareReport r;
  r.elements = count;
  double err_sq = 0, ref_sq = 0;
  std::vector<BlockSums> blocks(block_count);
  for (Partial& p : partials) {
    for (uint64_t b = 0; b < block_count; ++b) {
      blocks[b].err_sq += p.blocks[b].err_sq;
      blocks[b].ref_sq += p.blocks[b].ref_sq;
      blocks[b].elements += p.blocks[b].elements;
    }
    r.mismatched += p.mismatched;
    r.nonfinite += p.nonfinite;
    r.unwritten += p.unwritten;
    r.reference_nonfinite += p.reference_nonfinite;
    r.max_abs_error = std::max(r.max_abs_error, p.max_abs);
    r.max_rel_error = std::max(r.max_rel_error, p.max_rel);
    err_sq += p.err_sq;
    ref_sq += p.ref_sq;
    for (Mismatch& m : p.first) {
      if (r.first_mismatches.size() < kMaxReported) r.first_mismatches.push_back(std::move(m));
    }
  }
  FinishCompareReport(rule, err_sq, ref_sq, &r, block_elements ? &blocks : nullptr);
  return r;
}

void FinishCompareReport(const ToleranceRule& rule, double err_sq, double ref_sq,
                         CompareReport* report, const std::vector<BlockSums>* blocks) {
  CompareReport& r = *report;
  const uint64_t count = r.elements;
  r.reason.clear();
  r.reference_norm = std::sqrt(ref_sq);
  r.relative_norm = ref_sq > 0 ? std::sqrt(err_sq / ref_sq) : (err_sq > 0 ? INFINITY : 0.0);
  uint64_t bad = r.mismatched + r.nonfinite;
  r.matched_ratio =
      count ? static_cast<double>(count - std::min(bad, count)) / static_cast<double>(count) : 1.0;

  if (count == 0) {
    r.reason = "empty output";
  } else if (r.reference_nonfinite > 0) {
    r.reason = absl::StrFormat("the reference holds %d non-finite values", r.reference_nonfinite);
  } else if (r.unwritten > 0) {
    r.reason = absl::StrFormat("%d of %d output elements were never written", r.unwritten, count);
  } else if (r.nonfinite > 0) {
    r.reason = absl::StrFormat("%d output elements are NaN or Inf", r.nonfinite);
  }
  // Both figures are computed and reported whichever rules apply; every rule that applies must
  // hold, and the reason names each one that failed.
  r.all_close_checked = rule.all_close;
  r.all_close_pass = r.matched_ratio >= rule.matched_ratio;
  r.relative_norm_checked = rule.max_relative_norm > 0;
  r.relative_norm_pass = r.relative_norm <= rule.max_relative_norm;
  r.block_norm_checked = rule.block_rows > 0 && count > 0;
  r.block_rows = rule.block_rows;
  r.worst_block_relative_norm = 0;
  r.worst_block = -1;
  if (r.block_norm_checked && blocks != nullptr && !blocks->empty()) {
    // The floor: kBlockNormFloor x the norm a block of this size would have at the output's RMS.
    const double mean_sq = ref_sq / static_cast<double>(count);
    for (size_t b = 0; b < blocks->size(); ++b) {
      const BlockSums& s = (*blocks)[b];
      const double floor = kBlockNormFloor * std::sqrt(mean_sq * static_cast<double>(s.elements));
      const double denominator = std::max(std::sqrt(s.ref_sq), floor);
      const double figure =
          denominator > 0 ? std::sqrt(s.err_sq) / denominator : (s.err_sq > 0 ? INFINITY : 0.0);
      if (r.worst_block < 0 || figure > r.worst_block_relative_norm) {
        r.worst_block_relative_norm = figure;
        r.worst_block = static_cast<int64_t>(b);
      }
    }
  }
  r.block_norm_pass = r.block_norm_checked && blocks != nullptr && !blocks->empty() &&
                      r.worst_block_relative_norm <= rule.max_block_relative_norm;
  if (r.reason.empty() && r.block_norm_checked && (blocks == nullptr || blocks->empty())) {
    r.reason = "the block rule is set but the comparison computed no block sums";
  }
  if (r.reason.empty()) {
    std::vector<std::string> failed;
    if (r.all_close_checked && !r.all_close_pass) {
      failed.push_back(absl::StrFormat(
          "%d of %d elements outside atol %.3g and rtol %.3g (matched ratio %.6f < %.6f)",
          r.mismatched, count, rule.atol, rule.rtol, r.matched_ratio, rule.matched_ratio));
    }
    if (r.relative_norm_checked && !r.relative_norm_pass) {
      failed.push_back(absl::StrFormat("relative norm %.3g exceeds %.3g", r.relative_norm,
                                       rule.max_relative_norm));
    }
    if (r.block_norm_checked && !r.block_norm_pass) {
      failed.push_back(absl::StrFormat("block %d (rows %d..%d) relative norm %.3g exceeds %.3g",
                                       r.worst_block, r.worst_block * rule.block_rows,
                                       (r.worst_block + 1) * rule.block_rows - 1,
                                       r.worst_block_relative_norm, rule.max_block_relative_norm));
    }
    r.reason = absl::StrJoin(failed, "; ");
  }
  r.pass = r.reason.empty();
}

Fp64Sums Fp64ErrorSums(const void* got, ElementType type, const double* reference, uint64_t count) {
  Fp64Sums sums;
  for (uint64_t i = 0; i < count; ++i) {
    const double e = reference[i];
    const double g = DecodeElement(got, i, type);
    if (!std::isfinite(e) || !std::isfinite(g)) continue;
    sums.err_sq += (g - e) * (g - e);
    sums.ref_sq += e * e;
  }
  return sums;
}

double Fp64RelativeNorm(const Fp64Sums& sums) {
  if (sums.ref_sq > 0) return std::sqrt(sums.err_sq / sums.ref_sq);
  return sums.err_sq > 0 ? INFINITY : 0.0;
}

void ApplyFp64Reference(const Fp64Sums& sums, double bound, double library_relative_norm,
                        CompareReport* report) {
  CompareReport& r = *report;
  r.fp64_measured = true;
  r.fp64_relative_norm = Fp64RelativeNorm(sums);
  r.library_fp64_relative_norm = library_relative_norm;
  r.fp64_checked = bound > 0;
  r.fp64_max_relative_norm = bound;
  // A zero fp64 reference is degenerate (no inputs give one here): it fails rather than passes.
  r.fp64_pass = !r.fp64_checked || (sums.ref_sq > 0 && r.fp64_relative_norm <= bound);
  if (r.fp64_pass) return;
  const std::string failure =
      sums.ref_sq > 0
          ? absl::StrFormat("relative norm %.3g against the fp64 reference exceeds %.3g",
                            r.fp64_relative_norm, bound)
          : std::string("the fp64 reference is zero");
  r.reason = r.reason.empty() ? failure : absl::StrCat(r.reason, "; ", failure);
  r.pass = false;
}

void SdpaBackwardFp64Host(const SdpaFp64Shape& shape, const std::vector<double>& q,
                          const std::vector<double>& k, const std::vector<double>& v,
                          const std::vector<double>& o, const std::vector<double>& d_o,
                          const std::vector<double>& lse, std::vector<double>* dq,
                          std::vector<double>* dk, std::vector<double>* dv) {
  const int64_t s = shape.s, d = shape.d;
  dq->assign(q.size(), 0.0);
  dk->assign(q.size(), 0.0);
  dv->assign(q.size(), 0.0);
  for (int64_t h = 0; h < shape.heads; ++h) {
    const int64_t base = h * s * d;
    for (int64_t i = 0; i < s; ++i) {
      const double* qi = &q[base + i * d];
      const double* doi = &d_o[base + i * d];
      double delta = 0;
      for (int64_t c = 0; c < d; ++c) delta += doi[c] * o[base + i * d + c];
      const int64_t keys = shape.causal ? i + 1 : s;
      for (int64_t j = 0; j < keys; ++j) {
        const double* kj = &k[base + j * d];
        const double* vj = &v[base + j * d];
        double score = 0, dp = 0;
        for (int64_t c = 0; c < d; ++c) {
          score += qi[c] * kj[c];
          dp += doi[c] * vj[c];
        }
        const double p = std::exp(shape.scale * score - lse[h * s + i]);
        const double ds = p * (dp - delta);
        for (int64_t c = 0; c < d; ++c) {
          (*dq)[base + i * d + c] += shape.scale * ds * kj[c];
          (*dk)[base + j * d + c] += shape.scale * ds * qi[c];
          (*dv)[base + j * d + c] += p * doi[c];
        }
      }
    }
  }
}

}  // namespace ptxbench::gpu
