// A loopback TCP proxy for fault tests: clients connect to it, it connects each of them to the
// current upstream (a ptxbench-server that the test kills and restarts on another port), and
// when the upstream connection ends it ends the client's, as a server dying does. It can hold
// back the upstream's reply on the connection whose request carries a marker, so a test can
// kill the server after it committed a Submit but before the client heard the answer.
#ifndef PTXBENCH_TESTS_CLIENT_RUN_TCP_PROXY_H_
#define PTXBENCH_TESTS_CLIENT_RUN_TCP_PROXY_H_

#include <atomic>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace ptxbench::testing {

class TcpProxy {
 public:
  explicit TcpProxy(std::string upstream);  // Listens on 127.0.0.1, port chosen by the kernel.
  ~TcpProxy();
  TcpProxy(const TcpProxy&) = delete;
  TcpProxy& operator=(const TcpProxy&) = delete;

  std::string address() const { return "127.0.0.1:" + std::to_string(port_); }
  // New connections go here from now on ("127.0.0.1:PORT").
  void set_upstream(const std::string& upstream);
  // The first connection whose client bytes contain `marker` gets no more bytes from upstream
  // (they are dropped); later connections pass freely.
  void HoldRepliesAfter(const std::string& marker);
  bool holding() const { return held_.load(); }
  // Ends every open connection at once (a network cut).
  void CutAll();

 private:
  void AcceptLoop();
  void Pipe(int client, int upstream);

  int listen_fd_ = -1;
  int port_ = 0;
  std::atomic<bool> stopping_{false};
  std::atomic<bool> held_{false};
  mutable std::mutex mutex_;
  std::string upstream_;
  std::string marker_;
  bool marker_used_ = false;
  std::vector<int> open_fds_;
  std::thread acceptor_;
  std::vector<std::thread> pipes_;
};

}  // namespace ptxbench::testing

#endif  // PTXBENCH_TESTS_CLIENT_RUN_TCP_PROXY_H_
