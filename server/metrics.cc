#include "server/metrics.h"

#include <exception>
#include <map>
#include <mutex>
#include <set>
#include <sstream>
#include <utility>

#include "absl/strings/str_cat.h"
#include "prometheus/collectable.h"
#include "prometheus/counter.h"
#include "prometheus/exposer.h"
#include "prometheus/family.h"
#include "prometheus/histogram.h"
#include "prometheus/metric_family.h"
#include "prometheus/registry.h"
#include "prometheus/text_serializer.h"
#include "spdlog/spdlog.h"

namespace ptxbench::server {
namespace {

// RPC and lease latencies span a 1 ms unary call to a multi-second stream setup under load;
// these buckets resolve the 50 ms p99 target of docs/results/*-scheduler-bench.json.
const prometheus::Histogram::BucketBoundaries& LatencyBuckets() {
  static const auto* buckets = new prometheus::Histogram::BucketBoundaries{
      0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10};
  return *buckets;
}

constexpr int kExposerThreads = 8;
constexpr int kExposerRequestTimeoutMs = 5000;

// Free text in labels (model names come from callers): at most this many distinct model labels
// per tenant, then "other"; each label value at most kMaxLabelBytes of [A-Za-z0-9._:/@+-],
// anything else '_'. Prometheus keeps one series per label combination forever, so an
// unbounded label is unbounded memory on both sides (issue 12, "Low").
constexpr size_t kMaxModelLabelsPerTenant = 16;
constexpr size_t kMaxLabelBytes = 64;
constexpr char kOtherLabel[] = "other";

std::string NormalizedLabel(const std::string& value) {
  std::string out = value.substr(0, kMaxLabelBytes);
  for (char& c : out) {
    const bool plain = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                       c == '.' || c == '_' || c == ':' || c == '/' || c == '@' || c == '+' ||
                       c == '-';
    if (!plain) c = '_';
  }
  return out.empty() ? std::string("none") : out;
}

// The worker states the store knows; each is always exported so that a dashboard sees 0
// rather than a missing series.
constexpr v1::WorkerState kWorkerStates[] = {v1::WORKER_STATE_ACTIVE, v1::WORKER_STATE_DRAINING,
                                             v1::WORKER_STATE_UNHEALTHY, v1::WORKER_STATE_OFFLINE};

prometheus::ClientMetric GaugeSample(std::vector<prometheus::ClientMetric::Label> labels,
                                     double value) {
  prometheus::ClientMetric sample;
  sample.label = std::move(labels);
  sample.gauge.value = value;
  return sample;
}

prometheus::MetricFamily GaugeFamily(std::string name, std::string help) {
  prometheus::MetricFamily family;
  family.name = std::move(name);
  family.help = std::move(help);
  family.type = prometheus::MetricType::Gauge;
  return family;
}

}  // namespace

// Reads the queue and the workers from the store at scrape time.
class Metrics::ScrapeCollectable : public prometheus::Collectable {
 public:
  explicit ScrapeCollectable(Sources sources) : sources_(std::move(sources)) {}

  std::vector<prometheus::MetricFamily> Collect() const override {
    auto depth =
        GaugeFamily("ptxbench_queue_depth", "Jobs waiting in the queue, by arch and kind.");
    auto leased =
        GaugeFamily("ptxbench_queue_leased", "Jobs leased to a worker, by arch and kind.");
    auto oldest = GaugeFamily("ptxbench_queue_oldest_job_age_seconds",
                              "Age of the oldest queued job, by arch and kind.");
    auto workers = GaugeFamily("ptxbench_workers", "Registered workers, by state.");
    auto up = GaugeFamily("ptxbench_store_up",
                          "1 when the last scrape could read the store, 0 otherwise.");
    bool store_ok = true;
    if (sources_.queue_depths) {
      auto rows = sources_.queue_depths();
      if (rows.ok()) {
        for (const auto& row : *rows) {
          std::vector<prometheus::ClientMetric::Label> labels{
              {"arch", wire::ArchName(row.arch)}, {"kind", wire::JobKindName(row.kind)}};
          depth.metric.push_back(GaugeSample(labels, static_cast<double>(row.queued)));
          leased.metric.push_back(GaugeSample(labels, static_cast<double>(row.leased)));
          oldest.metric.push_back(GaugeSample(labels, row.oldest_age_seconds));
        }
      } else {
        store_ok = false;
        spdlog::warn("metrics: reading queue depths failed: {}", rows.status().ToString());
      }
    }
    if (sources_.workers) {
      auto rows = sources_.workers();
      if (rows.ok()) {
        std::map<std::string, int> by_state;
        for (v1::WorkerState state : kWorkerStates) by_state[wire::WorkerStateName(state)] = 0;
        for (const auto& row : *rows) ++by_state[wire::WorkerStateName(row.state)];
        for (const auto& [state, count] : by_state) {
          workers.metric.push_back(GaugeSample({{"state", state}}, count));
        }
      } else {
        store_ok = false;
        spdlog::warn("metrics: reading workers failed: {}", rows.status().ToString());
      }
    }
    up.metric.push_back(GaugeSample({}, store_ok ? 1 : 0));
    return {std::move(depth), std::move(leased), std::move(oldest), std::move(workers),
            std::move(up)};
  }

 private:
  Sources sources_;
};

struct Metrics::Families {
  prometheus::Family<prometheus::Histogram>* rpc_duration;
  prometheus::Family<prometheus::Counter>* submissions;
  prometheus::Family<prometheus::Counter>* verdicts;
  prometheus::Histogram* lease_latency;
  prometheus::Family<prometheus::Counter>* artifact_reports;
  prometheus::Counter* distrusted_workers;
};

Metrics::Metrics(Sources sources)
    : registry_(std::make_shared<prometheus::Registry>()),
      scrape_(std::make_shared<ScrapeCollectable>(std::move(sources))),
      families_(std::make_unique<Families>()) {
  families_->rpc_duration = &prometheus::BuildHistogram()
                                 .Name("ptxbench_rpc_duration_seconds")
                                 .Help("Server-side duration of gRPC calls, by method and code.")
                                 .Register(*registry_);
  families_->submissions = &prometheus::BuildCounter()
                                .Name("ptxbench_submissions_total")
                                .Help("Accepted submissions, by tenant, model, task and arch.")
                                .Register(*registry_);
  families_->verdicts =
      &prometheus::BuildCounter()
           .Name("ptxbench_verdicts_total")
           .Help("Final verdicts, by tenant, model, task, arch and verdict class.")
           .Register(*registry_);
  families_->lease_latency =
      &prometheus::BuildHistogram()
           .Name("ptxbench_lease_latency_seconds")
           .Help("Time to take one job from the queue for a worker with a free slot.")
           .Register(*registry_)
           .Add({}, LatencyBuckets());
  families_->artifact_reports =
      &prometheus::BuildCounter()
           .Name("ptxbench_compile_artifact_reports_total")
           .Help(
               "What GPU workers did with the compile artifacts their evaluate jobs carried, "
               "by outcome (used, verified_match, mismatch, refused, none).")
           .Register(*registry_);
  families_->distrusted_workers =
      &prometheus::BuildCounter()
           .Name("ptxbench_workers_distrusted_total")
           .Help(
               "Workers marked distrusted because a GPU worker's own compile did not match "
               "their compile artifact.")
           .Register(*registry_)
           .Add({});
}

Metrics::~Metrics() { StopExposer(); }

absl::Status Metrics::StartExposer(const std::string& listen) {
  if (exposer_) return absl::FailedPreconditionError("metrics exposer already started");
  try {
    // civetweb gives each connection a thread until it closes or times out: with one thread,
    // one idle TCP connection held /metrics for ~50 s (issue 12, "Low"). Several threads
    // keep a scrape answered beside a few idle connections, and request_timeout_ms drops an
    // idle one after 5 s (a scrape's request arrives in microseconds), so even a connection
    // per thread delays a scrape by at most that.
    exposer_ = std::make_unique<prometheus::Exposer>(std::vector<std::string>{
        "listening_ports", listen, "num_threads", std::to_string(kExposerThreads),
        "request_timeout_ms", std::to_string(kExposerRequestTimeoutMs), "keep_alive_timeout_ms",
        "500"});
  } catch (const std::exception& e) {
    return absl::UnavailableError(
        absl::StrCat("metrics_listen: cannot listen on ", listen, ": ", e.what()));
  }
  exposer_->RegisterCollectable(registry_);
  exposer_->RegisterCollectable(scrape_);
  auto ports = exposer_->GetListeningPorts();
  port_ = ports.empty() ? 0 : ports.front();
  return absl::OkStatus();
}

void Metrics::StopExposer() {
  exposer_.reset();
  port_ = 0;
}

std::string Metrics::Render() const {
  auto families = registry_->Collect();
  auto scraped = scrape_->Collect();
  families.insert(families.end(), scraped.begin(), scraped.end());
  std::ostringstream out;
  prometheus::TextSerializer().Serialize(out, families);
  return out.str();
}

void Metrics::RecordRpc(const std::string& method, const std::string& code, double seconds) {
  families_->rpc_duration->Add({{"method", method}, {"code", code}}, LatencyBuckets())
      .Observe(seconds);
}

std::string Metrics::ModelLabel(const std::string& tenant, const std::string& model) {
  const std::string label = NormalizedLabel(model);
  std::lock_guard<std::mutex> lock(labels_mu_);
  std::set<std::string>& known = model_labels_[tenant];
  if (known.count(label) > 0) return label;
  if (known.size() >= kMaxModelLabelsPerTenant) return kOtherLabel;
  known.insert(label);
  return label;
}

void Metrics::RecordSubmission(const std::string& tenant, const std::string& model,
                               const std::string& task, const std::string& arch) {
  families_->submissions
      ->Add({{"tenant", NormalizedLabel(tenant)},
             {"model", ModelLabel(tenant, model)},
             {"task", NormalizedLabel(task)},
             {"arch", NormalizedLabel(arch)}})
      .Increment();
}

void Metrics::RecordVerdict(const std::string& tenant, const std::string& model,
                            const std::string& task, const std::string& arch,
                            const std::string& verdict_class) {
  families_->verdicts
      ->Add({{"tenant", NormalizedLabel(tenant)},
             {"model", ModelLabel(tenant, model)},
             {"task", NormalizedLabel(task)},
             {"arch", NormalizedLabel(arch)},
             {"verdict_class", NormalizedLabel(verdict_class)}})
      .Increment();
}

void Metrics::RecordLeaseLatency(double seconds) { families_->lease_latency->Observe(seconds); }

void Metrics::RecordArtifactReport(const std::string& outcome) {
  families_->artifact_reports->Add({{"outcome", NormalizedLabel(outcome)}}).Increment();
}

void Metrics::RecordWorkerDistrusted() { families_->distrusted_workers->Increment(); }

}  // namespace ptxbench::server
