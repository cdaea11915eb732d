#include "common/sha256.h"

#include <catch2/catch.hpp>
#include <string>

namespace ptxbench {
namespace {

// FIPS 180-4 example messages (NIST CSRC "SHA256.pdf" examples) and padding-boundary lengths
// (55/56 bytes: the length field fits / does not fit in the last block; 63/64/65: block edges),
// whose digests were taken from Python's hashlib.
TEST_CASE("Sha256Hex matches the standard test vectors") {
  CHECK(Sha256Hex("") == "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  CHECK(Sha256Hex("abc") == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  CHECK(Sha256Hex("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq") ==
        "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
  CHECK(Sha256Hex(
            "abcdefghbcdefghicdefghijdefghijkefghijklfghijklmghijklmnhijklmnoijklmnopjklmnopqklmnop"
            "qrlmnopqrsmnopqrstnopqrstu") ==
        "cf5b16a778af8380036ce59e7b0492370b249b11e8f07a51afac45037afee9d1");
  CHECK(Sha256Hex(std::string(1000000, 'a')) ==
        "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
}

TEST_CASE("Sha256Hex handles every padding boundary") {
  CHECK(Sha256Hex(std::string(55, 'a')) ==
        "9f4390f8d30c2dd92ec9f095b65e2b9ae9b0a925a5258e241c9f1e910f734318");
  CHECK(Sha256Hex(std::string(56, 'a')) ==
        "b35439a4ac6f0948b6d6f9e3c6af0f5f590ce20f1bde7090ef7970686ec6738a");
  CHECK(Sha256Hex(std::string(63, 'a')) ==
        "7d3e74a05d7db15bce4ad9ec0658ea98e3f06eeecf16b4c6fff2da457ddc2f34");
  CHECK(Sha256Hex(std::string(64, 'a')) ==
        "ffe054fe7ae0cb6dc65c3af9b61d5209f439851db43d0ba5997337df154668eb");
  CHECK(Sha256Hex(std::string(65, 'a')) ==
        "635361c48bb9eab14198e76ea8ab7f1a41685d6ad62aa9146d301d4f17eb0ae0");
  CHECK(Sha256Hex(std::string(119, 'a')) ==
        "31eba51c313a5c08226adf18d4a359cfdfd8d2e816b13f4af952f7ea6584dcfb");
  CHECK(Sha256Hex(std::string(120, 'a')) ==
        "2f3d335432c70b580af0e8e1b3674a7c020d683aa5f73aaaedfdc55af904c21c");
}

TEST_CASE("Incremental updates in any chunking give the one-shot digest") {
  std::string message;
  for (int i = 0; i < 1000; ++i) message.push_back(static_cast<char>(i * 37 + 11));
  const std::string expected = Sha256Hex(message);
  for (size_t chunk : {1, 3, 63, 64, 65, 127, 999}) {
    Sha256 hasher;
    for (size_t at = 0; at < message.size(); at += chunk)
      hasher.Update(std::string_view(message).substr(at, chunk));
    INFO("chunk " << chunk);
    CHECK(DigestHex(hasher.Finish()) == expected);
  }
}

TEST_CASE("Bytes with the high bit set and NUL bytes are hashed as bytes") {
  // Digests per hashlib.
  CHECK(Sha256Hex(std::string("\x00\xff", 2)) ==
        "06eb7d6a69ee19e5fbdf749018d3d2abfa04bcbd1365db312eb86dc7169389b8");
  CHECK(Sha256Hex(std::string("\x00\xff", 2)) != Sha256Hex(std::string("\xff\x00", 2)));
  CHECK(Sha256Hex(std::string(1, '\0')) ==
        "6e340b9cffb37a989ca544e6bb780a2c78901d3fb33738768511a30617afa01d");
}

}  // namespace
}  // namespace ptxbench
