// A private certificate authority for TLS tests, made at test time with the openssl command
// line tool (no key is committed): a CA, and a server certificate it signed for 127.0.0.1 and
// localhost. Two CAs are independent, so one can stand for "a CA the server does not use".
#ifndef PTXBENCH_TESTS_SUPPORT_TEST_CA_H_
#define PTXBENCH_TESTS_SUPPORT_TEST_CA_H_

#include <memory>
#include <string>

#include "tests/support/temp_files.h"

namespace ptxbench::testing {

class TestCa {
 public:
  // Fails the current test when openssl cannot make the files.
  TestCa();

  const std::string& ca_cert() const { return ca_cert_; }          // PEM: what clients trust.
  const std::string& server_cert() const { return server_cert_; }  // PEM, signed by the CA.
  const std::string& server_key() const { return server_key_; }    // PEM.
  const std::string& dir() const { return dir_->path(); }

 private:
  std::unique_ptr<ScopedTempDir> dir_;
  std::string ca_cert_;
  std::string server_cert_;
  std::string server_key_;
};

}  // namespace ptxbench::testing

#endif  // PTXBENCH_TESTS_SUPPORT_TEST_CA_H_
