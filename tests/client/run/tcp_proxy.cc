#include "tests/client/run/tcp_proxy.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <stdexcept>

namespace ptxbench::testing {
namespace {

int ConnectTo(const std::string& address) {
  const size_t colon = address.rfind(':');
  sockaddr_in target{};
  target.sin_family = AF_INET;
  target.sin_port = htons(static_cast<uint16_t>(std::stoi(address.substr(colon + 1))));
  inet_pton(AF_INET, address.substr(0, colon).c_str(), &target.sin_addr);
  const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  if (connect(fd, reinterpret_cast<sockaddr*>(&target), sizeof(target)) != 0) {
    close(fd);
    return -1;
  }
  return fd;
}

bool WriteAll(int fd, const char* data, size_t size) {
  while (size > 0) {
    const ssize_t n = send(fd, data, size, MSG_NOSIGNAL);
    if (n <= 0) return false;
    data += n;
    size -= static_cast<size_t>(n);
  }
  return true;
}

}  // namespace

TcpProxy::TcpProxy(std::string upstream) : upstream_(std::move(upstream)) {
  listen_fd_ = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  const int one = 1;
  setsockopt(listen_fd_, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (bind(listen_fd_, reinterpret_cast<sockaddr*>(&address), sizeof(address)) != 0 ||
      listen(listen_fd_, 64) != 0) {
    throw std::runtime_error("tcp proxy: cannot listen");
  }
  socklen_t length = sizeof(address);
  getsockname(listen_fd_, reinterpret_cast<sockaddr*>(&address), &length);
  port_ = ntohs(address.sin_port);
  acceptor_ = std::thread([this] { AcceptLoop(); });
}

TcpProxy::~TcpProxy() {
  stopping_ = true;
  shutdown(listen_fd_, SHUT_RDWR);
  close(listen_fd_);
  acceptor_.join();
  CutAll();
  for (std::thread& pipe : pipes_) pipe.join();
}

void TcpProxy::set_upstream(const std::string& upstream) {
  std::lock_guard<std::mutex> lock(mutex_);
  upstream_ = upstream;
}

void TcpProxy::HoldRepliesAfter(const std::string& marker) {
  std::lock_guard<std::mutex> lock(mutex_);
  marker_ = marker;
  marker_used_ = false;
}

void TcpProxy::CutAll() {
  std::lock_guard<std::mutex> lock(mutex_);
  for (int fd : open_fds_) shutdown(fd, SHUT_RDWR);
}

void TcpProxy::AcceptLoop() {
  while (!stopping_) {
    const int client = accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
    if (client < 0) {
      if (stopping_) return;
      continue;
    }
    std::string upstream;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      upstream = upstream_;
    }
    const int server = ConnectTo(upstream);
    if (server < 0) {  // Nothing listens upstream: refuse, as the dead server would.
      close(client);
      continue;
    }
    std::lock_guard<std::mutex> lock(mutex_);
    open_fds_.push_back(client);
    open_fds_.push_back(server);
    pipes_.emplace_back([this, client, server] { Pipe(client, server); });
  }
}

void TcpProxy::Pipe(int client, int upstream) {
  bool hold = false;
  std::string seen;  // Client bytes, kept only while a marker is looked for.
  char buffer[1 << 16];
  pollfd fds[2] = {{client, POLLIN, 0}, {upstream, POLLIN, 0}};
  while (!stopping_) {
    if (poll(fds, 2, 200) < 0) break;
    bool done = false;
    for (int i = 0; i < 2 && !done; ++i) {
      if ((fds[i].revents & (POLLIN | POLLHUP | POLLERR)) == 0) continue;
      const ssize_t n = recv(fds[i].fd, buffer, sizeof(buffer), 0);
      if (n <= 0) {
        done = true;
        break;
      }
      if (i == 0) {
        std::lock_guard<std::mutex> lock(mutex_);
        if (!hold && !marker_.empty() && !marker_used_) {
          seen.append(buffer, static_cast<size_t>(n));
          if (seen.find(marker_) != std::string::npos) {
            hold = true;
            marker_used_ = true;
            held_ = true;
          }
          if (seen.size() > (1 << 20)) seen.erase(0, seen.size() - marker_.size());
        }
      }
      if (i == 1 && hold) continue;  // The reply is lost on the way.
      if (!WriteAll(fds[1 - i].fd, buffer, static_cast<size_t>(n))) done = true;
    }
    if (done) break;
  }
  // One side ended: end the other too, as a server's death ends its clients' connections.
  shutdown(client, SHUT_RDWR);
  shutdown(upstream, SHUT_RDWR);
  std::lock_guard<std::mutex> lock(mutex_);
  open_fds_.erase(std::remove(open_fds_.begin(), open_fds_.end(), client), open_fds_.end());
  open_fds_.erase(std::remove(open_fds_.begin(), open_fds_.end(), upstream), open_fds_.end());
  close(client);
  close(upstream);
}

}  // namespace ptxbench::testing
