#include "tests/support/test_ca.h"

#include <catch2/catch.hpp>
#include <cstdlib>
#include <fstream>

namespace ptxbench::testing {
namespace {

void Run(const std::string& command) {
  INFO(command);
  REQUIRE(std::system((command + " >/dev/null 2>&1").c_str()) == 0);
}

}  // namespace

TestCa::TestCa() : dir_(std::make_unique<ScopedTempDir>("ptxbench-ca-")) {
  const std::string d = dir_->path();
  ca_cert_ = d + "/ca.pem";
  server_cert_ = d + "/server.pem";
  server_key_ = d + "/server-key.pem";
  const std::string ca_key = d + "/ca-key.pem";
  const std::string request = d + "/server.csr";
  const std::string extensions = d + "/server.ext";
  Run("openssl req -x509 -newkey rsa:2048 -nodes -days 1 -subj /CN=ptxbench-test-ca -keyout " +
      ca_key + " -out " + ca_cert_);
  Run("openssl req -newkey rsa:2048 -nodes -subj /CN=localhost -keyout " + server_key_ + " -out " +
      request);
  std::ofstream(extensions) << "subjectAltName=IP:127.0.0.1,DNS:localhost\n"
                               "basicConstraints=CA:FALSE\n"
                               "extendedKeyUsage=serverAuth\n";
  Run("openssl x509 -req -days 1 -in " + request + " -CA " + ca_cert_ + " -CAkey " + ca_key +
      " -CAcreateserial -extfile " + extensions + " -out " + server_cert_);
}

}  // namespace ptxbench::testing
