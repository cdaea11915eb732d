// Prometheus metrics of ptxbench-server. Every family is defined once, here, so that a name,
// its help text and its label set cannot drift between call sites. Names are prefixed
// ptxbench_. Queue depth, oldest job age and workers by state are read from the store when
// /metrics is scraped (two queries per scrape), so they are never stale and cost nothing
// between scrapes.
#ifndef PTXBENCH_SERVER_METRICS_H_
#define PTXBENCH_SERVER_METRICS_H_

#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "server/store/store.h"

namespace prometheus {
class Exposer;
class Registry;
}  // namespace prometheus

namespace ptxbench::server {

class Metrics {
 public:
  // Where the scrape-time gauges come from; normally the Store.
  struct Sources {
    std::function<absl::StatusOr<std::vector<store::QueueDepthRow>>()> queue_depths;
    std::function<absl::StatusOr<std::vector<store::WorkerRow>>()> workers;
  };

  explicit Metrics(Sources sources);
  ~Metrics();
  Metrics(const Metrics&) = delete;
  Metrics& operator=(const Metrics&) = delete;

  // Serves /metrics on `listen` ("host:port"; port 0 picks a free one).
  absl::Status StartExposer(const std::string& listen);
  // The bound port of the exposer; 0 before StartExposer.
  int port() const { return port_; }
  // Stops serving /metrics (idempotent).
  void StopExposer();

  // The text exposition of every family, as a scrape would return it (for tests and logs).
  std::string Render() const;

  void RecordRpc(const std::string& method, const std::string& code, double seconds);
  // Labels are bounded: a tenant's first 16 distinct model names are their own label, later
  // ones count under "other"; label values are cut to 64 bytes of [A-Za-z0-9._:/@+-].
  void RecordSubmission(const std::string& tenant, const std::string& model,
                        const std::string& task, const std::string& arch);
  void RecordVerdict(const std::string& tenant, const std::string& model, const std::string& task,
                     const std::string& arch, const std::string& verdict_class);
  void RecordLeaseLatency(double seconds);
  // A GPU worker's report on a compile artifact (wire::ArtifactOutcomeName), and a worker
  // distrusted after a mismatch (docs/architecture.md, "Compile artifact reuse").
  void RecordArtifactReport(const std::string& outcome);
  void RecordWorkerDistrusted();

 private:
  class ScrapeCollectable;
  struct Families;

  std::string ModelLabel(const std::string& tenant, const std::string& model);

  std::shared_ptr<prometheus::Registry> registry_;
  std::shared_ptr<ScrapeCollectable> scrape_;
  std::unique_ptr<Families> families_;
  std::unique_ptr<prometheus::Exposer> exposer_;
  int port_ = 0;
  std::mutex labels_mu_;
  std::map<std::string, std::set<std::string>> model_labels_;  // By tenant.
};

}  // namespace ptxbench::server

#endif  // PTXBENCH_SERVER_METRICS_H_
