#include "server/api/page_token.h"

#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/rand.h>

#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/escaping.h"

namespace ptxbench::api {
namespace {

constexpr char kKeyLabel[] = "ptxbench page tokens v1";
constexpr unsigned char kVersion = 1;
constexpr int kNonceBytes = 12;
constexpr int kTagBytes = 16;
// The store's tokens are decimal sequence numbers; anything much longer was not issued.
constexpr size_t kMaxTokenBytes = 256;

using CipherContext = std::unique_ptr<EVP_CIPHER_CTX, decltype(&EVP_CIPHER_CTX_free)>;

absl::Status NotIssued() {
  return absl::InvalidArgumentError(
      "page_token: not a token this deployment issued to this tenant; list again without one");
}

}  // namespace

PageTokens::PageTokens(const std::string& secret) {
  unsigned int length = 0;
  HMAC(EVP_sha256(), secret.data(), static_cast<int>(secret.size()),
       reinterpret_cast<const unsigned char*>(kKeyLabel), sizeof(kKeyLabel) - 1, key_.data(),
       &length);
}

std::string PageTokens::Seal(const std::string& tenant, const std::string& store_token) const {
  if (store_token.empty()) return "";
  std::string sealed(1 + kNonceBytes + store_token.size() + kTagBytes, '\0');
  auto* out = reinterpret_cast<unsigned char*>(sealed.data());
  out[0] = kVersion;
  unsigned char* nonce = out + 1;
  unsigned char* cipher = nonce + kNonceBytes;
  unsigned char* tag = cipher + store_token.size();
  CipherContext ctx(EVP_CIPHER_CTX_new(), &EVP_CIPHER_CTX_free);
  int length = 0;
  if (RAND_bytes(nonce, kNonceBytes) != 1 || ctx == nullptr ||
      EVP_EncryptInit_ex(ctx.get(), EVP_aes_256_gcm(), nullptr, key_.data(), nonce) != 1 ||
      EVP_EncryptUpdate(ctx.get(), nullptr, &length,
                        reinterpret_cast<const unsigned char*>(tenant.data()),
                        static_cast<int>(tenant.size())) != 1 ||
      EVP_EncryptUpdate(ctx.get(), cipher, &length,
                        reinterpret_cast<const unsigned char*>(store_token.data()),
                        static_cast<int>(store_token.size())) != 1 ||
      EVP_EncryptFinal_ex(ctx.get(), cipher + length, &length) != 1 ||
      EVP_CIPHER_CTX_ctrl(ctx.get(), EVP_CTRL_GCM_GET_TAG, kTagBytes, tag) != 1) {
    return "";  // No next page rather than a token that leaks or cannot be opened.
  }
  std::string encoded;
  absl::WebSafeBase64Escape(sealed, &encoded);
  return encoded;
}

absl::StatusOr<std::string> PageTokens::Open(const std::string& tenant,
                                             const std::string& token) const {
  if (token.empty()) return std::string();
  std::string sealed;
  if (token.size() > kMaxTokenBytes || !absl::WebSafeBase64Unescape(token, &sealed) ||
      sealed.size() <= 1 + kNonceBytes + kTagBytes ||
      static_cast<unsigned char>(sealed[0]) != kVersion) {
    return NotIssued();
  }
  const auto* in = reinterpret_cast<const unsigned char*>(sealed.data());
  const unsigned char* nonce = in + 1;
  const unsigned char* cipher = nonce + kNonceBytes;
  const int cipher_bytes = static_cast<int>(sealed.size()) - 1 - kNonceBytes - kTagBytes;
  unsigned char tag[kTagBytes];
  std::copy(cipher + cipher_bytes, cipher + cipher_bytes + kTagBytes, tag);
  std::string plain(static_cast<size_t>(cipher_bytes), '\0');
  CipherContext ctx(EVP_CIPHER_CTX_new(), &EVP_CIPHER_CTX_free);
  int length = 0;
  if (ctx == nullptr ||
      EVP_DecryptInit_ex(ctx.get(), EVP_aes_256_gcm(), nullptr, key_.data(), nonce) != 1 ||
      EVP_DecryptUpdate(ctx.get(), nullptr, &length,
                        reinterpret_cast<const unsigned char*>(tenant.data()),
                        static_cast<int>(tenant.size())) != 1 ||
      EVP_DecryptUpdate(ctx.get(), reinterpret_cast<unsigned char*>(plain.data()), &length, cipher,
                        cipher_bytes) != 1 ||
      EVP_CIPHER_CTX_ctrl(ctx.get(), EVP_CTRL_GCM_SET_TAG, kTagBytes, tag) != 1 ||
      EVP_DecryptFinal_ex(ctx.get(), reinterpret_cast<unsigned char*>(plain.data()) + length,
                          &length) != 1) {
    return NotIssued();
  }
  return plain;
}

}  // namespace ptxbench::api
