// ptxbench-worker: one daemon per GPU (or a compile-only daemon on a CPU machine).
#include "worker/daemon/worker_main.h"

int main(int argc, char** argv) {
  return ptxbench::worker::WorkerMain(std::vector<std::string>(argv + 1, argv + argc));
}
