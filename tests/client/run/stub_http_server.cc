#include "tests/client/run/stub_http_server.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

namespace ptxbench::testing {

StubHttpServer::StubHttpServer(Handler handler) : handler_(std::move(handler)) {
  listen_fd_ = socket(AF_INET, SOCK_STREAM, 0);
  int one = 1;
  setsockopt(listen_fd_, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  address.sin_port = 0;
  if (bind(listen_fd_, reinterpret_cast<sockaddr*>(&address), sizeof(address)) != 0 ||
      listen(listen_fd_, 64) != 0) {
    std::abort();  // A test machine without loopback sockets cannot run these tests.
  }
  socklen_t length = sizeof(address);
  getsockname(listen_fd_, reinterpret_cast<sockaddr*>(&address), &length);
  port_ = ntohs(address.sin_port);
  acceptor_ = std::thread([this] { AcceptLoop(); });
}

StubHttpServer::~StubHttpServer() {
  stopping_ = true;
  stopped_.notify_all();
  shutdown(listen_fd_, SHUT_RDWR);
  acceptor_.join();
  close(listen_fd_);
  std::vector<std::thread> connections;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    connections.swap(connections_);
  }
  for (std::thread& thread : connections) thread.join();
}

std::vector<StubRequest> StubHttpServer::requests() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return requests_;
}

void StubHttpServer::set_handler(Handler handler) {
  std::lock_guard<std::mutex> lock(mutex_);
  handler_ = std::move(handler);
}

void StubHttpServer::AcceptLoop() {
  while (!stopping_) {
    pollfd p{listen_fd_, POLLIN, 0};
    if (poll(&p, 1, 100) <= 0) continue;
    const int fd = accept(listen_fd_, nullptr, nullptr);
    if (fd < 0) continue;
    std::lock_guard<std::mutex> lock(mutex_);
    connections_.emplace_back([this, fd] { Serve(fd); });
  }
}

void StubHttpServer::Serve(int fd) {
  std::string data;
  char buffer[65536];
  size_t header_end = std::string::npos;
  size_t content_length = 0;
  StubRequest request;
  for (;;) {
    pollfd p{fd, POLLIN, 0};
    if (stopping_ || poll(&p, 1, 5000) <= 0) {
      close(fd);
      return;
    }
    const ssize_t n = read(fd, buffer, sizeof(buffer));
    if (n <= 0) {
      close(fd);
      return;
    }
    data.append(buffer, static_cast<size_t>(n));
    if (header_end == std::string::npos) {
      header_end = data.find("\r\n\r\n");
      if (header_end == std::string::npos) continue;
      std::vector<std::string> lines = absl::StrSplit(data.substr(0, header_end), "\r\n");
      std::vector<std::string> first = absl::StrSplit(lines[0], ' ');
      request.method = first.size() > 0 ? first[0] : "";
      request.path = first.size() > 1 ? first[1] : "";
      for (size_t i = 1; i < lines.size(); ++i) {
        const size_t colon = lines[i].find(':');
        if (colon == std::string::npos) continue;
        std::string name = absl::AsciiStrToLower(lines[i].substr(0, colon));
        request.headers[name] = std::string(absl::StripAsciiWhitespace(lines[i].substr(colon + 1)));
      }
      if (request.headers.count("content-length")) {
        (void)absl::SimpleAtoi(request.headers["content-length"], &content_length);
      }
    }
    if (data.size() >= header_end + 4 + content_length) break;
  }
  request.body = data.substr(header_end + 4, content_length);
  Handler handler;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    requests_.push_back(request);
    handler = handler_;
  }
  StubResponse response = handler(request);
  if (response.delay_seconds > 0) {
    std::unique_lock<std::mutex> lock(mutex_);
    stopped_.wait_for(lock, std::chrono::duration<double>(response.delay_seconds),
                      [this] { return stopping_.load(); });
  }
  std::string out = absl::StrCat("HTTP/1.1 ", response.status,
                                 " Stub\r\nContent-Type: "
                                 "application/json\r\nContent-Length: ",
                                 response.body.size(), "\r\nConnection: close\r\n");
  for (const std::string& header : response.headers) absl::StrAppend(&out, header, "\r\n");
  absl::StrAppend(&out, "\r\n", response.body);
  size_t sent = 0;
  while (sent < out.size()) {
    const ssize_t n = write(fd, out.data() + sent, out.size() - sent);
    if (n <= 0) break;
    sent += static_cast<size_t>(n);
  }
  close(fd);
}

std::string OpenAiChatBody(const std::string& content, int64_t prompt_tokens,
                           int64_t completion_tokens, int64_t reasoning_tokens) {
  nlohmann::json body = {
      {"id", "chatcmpl-stub"},
      {"object", "chat.completion"},
      {"choices",
       {{{"index", 0},
         {"message", {{"role", "assistant"}, {"content", content}}},
         {"finish_reason", "stop"}}}},
      {"usage",
       {{"prompt_tokens", prompt_tokens},
        {"completion_tokens", completion_tokens},
        {"total_tokens", prompt_tokens + completion_tokens},
        {"completion_tokens_details", {{"reasoning_tokens", reasoning_tokens}}}}}};
  return body.dump();
}

std::string ChatCompletionBody(const nlohmann::json& message, const nlohmann::json& usage,
                               const std::string& finish_reason) {
  nlohmann::json body = {
      {"id", "chatcmpl-stub"},
      {"object", "chat.completion"},
      {"choices", {{{"index", 0}, {"message", message}, {"finish_reason", finish_reason}}}},
      {"usage", usage}};
  return body.dump();
}

std::string AnthropicMessageBody(const std::string& text, const std::string& thinking,
                                 int64_t input_tokens, int64_t output_tokens) {
  nlohmann::json content = nlohmann::json::array();
  if (!thinking.empty()) {
    content.push_back({{"type", "thinking"}, {"thinking", thinking}, {"signature", "stub"}});
  }
  content.push_back({{"type", "text"}, {"text", text}});
  nlohmann::json body = {
      {"id", "msg_stub"},
      {"type", "message"},
      {"role", "assistant"},
      {"content", content},
      {"stop_reason", "end_turn"},
      {"usage", {{"input_tokens", input_tokens}, {"output_tokens", output_tokens}}}};
  return body.dump();
}

int TurnOfRequest(const StubRequest& request) {
  auto body = nlohmann::json::parse(request.body, nullptr, false);
  int turn = 1;
  if (!body.is_object() || !body.contains("messages")) return turn;
  for (const auto& message : body["messages"]) {
    if (message.value("role", "") == "user" &&
        absl::StartsWith(message.value("content", ""), "Feedback on attempt")) {
      ++turn;
    }
  }
  return turn;
}

}  // namespace ptxbench::testing
