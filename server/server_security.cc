#include "server/server_security.h"

#include <cstdint>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "core/file_reader.h"
#include "core/status_macros.h"

namespace oobleck::server {
namespace {

// Key and certificate files are a few KiB; anything this large is the wrong file.
constexpr int64_t kMaxSecurityFileBytes = int64_t{1} << 20;
constexpr absl::string_view kBearerPrefix = "Bearer ";
// Probes (kubelet, load balancers) cannot present a token.
constexpr absl::string_view kHealthServicePrefix = "/grpc.health.v1.Health/";

absl::StatusOr<std::string> ReadSecurityFile(const std::string& path, absl::string_view flag) {
  absl::StatusOr<std::string> text = ReadRegularFile(path, path, kMaxSecurityFileBytes);
  if (!text.ok()) {
    return absl::Status(text.status().code(),
                        absl::StrCat("--", flag, ": ", text.status().message()));
  }
  if (text->empty()) {
    return absl::InvalidArgumentError(absl::StrCat("--", flag, ": ", path, " is empty"));
  }
  return text;
}

}  // namespace

absl::StatusOr<std::string> ParseAuthToken(absl::string_view file_text) {
  const absl::string_view token = absl::StripAsciiWhitespace(file_text);
  if (token.empty()) return absl::InvalidArgumentError("the token file holds no token");
  for (size_t i = 0; i < token.size(); ++i) {
    const unsigned char c = static_cast<unsigned char>(token[i]);
    // Visible ASCII is what an HTTP/2 header value carries without escaping.
    if (c < 0x21 || c > 0x7e) {
      return absl::InvalidArgumentError(
          absl::StrCat("the token must be visible ASCII without spaces (byte ", static_cast<int>(c),
                       " at offset ", i, ")"));
    }
  }
  return std::string(token);
}

absl::StatusOr<ServerSecurity> ReadServerSecurity(const std::string& tls_cert_file,
                                                  const std::string& tls_key_file,
                                                  const std::string& auth_token_file) {
  ServerSecurity security;
  if (tls_cert_file.empty() != tls_key_file.empty()) {
    return absl::InvalidArgumentError("--tls_cert and --tls_key must be given together");
  }
  if (!auth_token_file.empty() && tls_cert_file.empty()) {
    return absl::InvalidArgumentError(
        "--auth_token_file needs --tls_cert and --tls_key: a bearer token must not travel in "
        "plaintext");
  }
  if (!tls_cert_file.empty()) {
    ASSIGN_OR_RETURN(std::string cert, ReadSecurityFile(tls_cert_file, "tls_cert"));
    ASSIGN_OR_RETURN(std::string key, ReadSecurityFile(tls_key_file, "tls_key"));
    // gRPC reports a bad PEM only as a failed bind; name the likely mistake early.
    if (!absl::StrContains(cert, "-----BEGIN CERTIFICATE-----")) {
      return absl::InvalidArgumentError(
          absl::StrCat("--tls_cert: ", tls_cert_file, " holds no PEM certificate"));
    }
    if (!absl::StrContains(key, "PRIVATE KEY-----")) {
      return absl::InvalidArgumentError(
          absl::StrCat("--tls_key: ", tls_key_file, " holds no PEM private key"));
    }
    security.tls_cert_chain_pem = std::move(cert);
    security.tls_private_key_pem = std::move(key);
  }
  if (!auth_token_file.empty()) {
    ASSIGN_OR_RETURN(std::string text, ReadSecurityFile(auth_token_file, "auth_token_file"));
    absl::StatusOr<std::string> token = ParseAuthToken(text);
    if (!token.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat("--auth_token_file: ", auth_token_file, ": ", token.status().message()));
    }
    security.auth_token = *std::move(token);
  }
  return security;
}

bool ConstantTimeEquals(absl::string_view a, absl::string_view b) {
  // Every byte of b is visited whatever a holds, and differences are OR-ed together rather
  // than returned at the first one, so the time does not reveal a matching prefix.
  unsigned diff = a.size() == b.size() ? 0 : 1;
  for (size_t i = 0; i < b.size(); ++i) {
    const unsigned char x = i < a.size() ? static_cast<unsigned char>(a[i]) : 0;
    diff |= x ^ static_cast<unsigned char>(b[i]);
  }
  return diff == 0;
}

std::shared_ptr<grpc::ServerCredentials> MakeServerCredentials(const ServerSecurity& security) {
  if (security.tls_cert_chain_pem.empty()) return grpc::InsecureServerCredentials();
  grpc::SslServerCredentialsOptions options;
  options.pem_key_cert_pairs.push_back({security.tls_private_key_pem, security.tls_cert_chain_pem});
  std::shared_ptr<grpc::ServerCredentials> credentials = grpc::SslServerCredentials(options);
  if (!security.auth_token.empty()) {
    credentials->SetAuthMetadataProcessor(
        std::make_shared<BearerTokenAuthenticator>(security.auth_token));
  }
  return credentials;
}

grpc::Status BearerTokenAuthenticator::Process(const InputMetadata& auth_metadata,
                                               grpc::AuthContext* /*context*/,
                                               OutputMetadata* consumed_auth_metadata,
                                               OutputMetadata* /*response_metadata*/) {
  auto path = auth_metadata.find(":path");
  if (path != auth_metadata.end() &&
      absl::StartsWith(absl::string_view(path->second.data(), path->second.size()),
                       kHealthServicePrefix)) {
    return grpc::Status::OK;
  }
  bool presented = false;
  bool valid = false;
  auto [begin, end] = auth_metadata.equal_range("authorization");
  for (auto it = begin; it != end; ++it) {
    presented = true;
    const absl::string_view value(it->second.data(), it->second.size());
    if (value.size() > kBearerPrefix.size() &&
        absl::EqualsIgnoreCase(value.substr(0, kBearerPrefix.size()), kBearerPrefix)) {
      valid = ConstantTimeEquals(value.substr(kBearerPrefix.size()), token_) || valid;
    }
  }
  if (!valid) {
    return grpc::Status(grpc::StatusCode::UNAUTHENTICATED,
                        presented ? "the authorization bearer token is not valid"
                                  : "missing \"authorization: Bearer <token>\" metadata; this "
                                    "server requires the token of --auth_token_file");
  }
  // The handlers have no use for the secret; keep it out of their metadata.
  consumed_auth_metadata->insert(
      {"authorization", std::string(begin->second.data(), begin->second.size())});
  return grpc::Status::OK;
}

}  // namespace oobleck::server
