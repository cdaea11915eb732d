// A loopback HTTP/1.1 server on port 0 for tests: it stands in for the hosted model APIs
// (OpenAI-compatible chat completions, Anthropic's Messages API), which CI cannot reach. Each
// request goes to a handler the test writes (scripted replies, status codes, delays); every
// request is recorded. One thread per connection; the server answers and closes.
#ifndef PTXBENCH_TESTS_CLIENT_RUN_STUB_HTTP_SERVER_H_
#define PTXBENCH_TESTS_CLIENT_RUN_STUB_HTTP_SERVER_H_

#include <atomic>
#include <condition_variable>
#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "nlohmann/json.hpp"

namespace ptxbench::testing {

struct StubRequest {
  std::string method;
  std::string path;
  std::map<std::string, std::string> headers;  // Names in lower case.
  std::string body;
};

struct StubResponse {
  int status = 200;
  std::string body;
  std::vector<std::string> headers;  // "Name: value".
  double delay_seconds = 0;          // Before answering; cut short when the server stops.
};

class StubHttpServer {
 public:
  using Handler = std::function<StubResponse(const StubRequest&)>;
  explicit StubHttpServer(Handler handler);
  ~StubHttpServer();
  StubHttpServer(const StubHttpServer&) = delete;
  StubHttpServer& operator=(const StubHttpServer&) = delete;

  int port() const { return port_; }
  std::string url() const { return "http://127.0.0.1:" + std::to_string(port_); }
  std::vector<StubRequest> requests() const;
  void set_handler(Handler handler);

 private:
  void AcceptLoop();
  void Serve(int fd);

  int listen_fd_ = -1;
  int port_ = 0;
  std::atomic<bool> stopping_{false};
  mutable std::mutex mutex_;
  std::condition_variable stopped_;
  Handler handler_;
  std::vector<StubRequest> requests_;
  std::thread acceptor_;
  std::vector<std::thread> connections_;
};

// Response bodies shaped as the real APIs answer.
std::string OpenAiChatBody(const std::string& content, int64_t prompt_tokens,
                           int64_t completion_tokens, int64_t reasoning_tokens);
// An OpenAI-compatible chat completion with the given message object and usage object, as the
// servers that differ in where reasoning goes answer (vLLM, SGLang, DeepSeek).
std::string ChatCompletionBody(const nlohmann::json& message, const nlohmann::json& usage,
                               const std::string& finish_reason);
std::string AnthropicMessageBody(const std::string& text, const std::string& thinking,
                                 int64_t input_tokens, int64_t output_tokens);

// The turn a chat request is for, as `ptxbench run` numbers it under the full context policy:
// 1 + the number of feedback messages it carries.
int TurnOfRequest(const StubRequest& request);

}  // namespace ptxbench::testing

#endif  // PTXBENCH_TESTS_CLIENT_RUN_STUB_HTTP_SERVER_H_
