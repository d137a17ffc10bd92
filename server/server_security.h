// Transport security of the server: TLS (--tls_cert, --tls_key) and a bearer token
// (--auth_token_file) that every call except health checks must present.
//
// The token is only accepted over TLS: a token sent in plaintext can be read off the
// network, and gRPC clients themselves refuse to attach call credentials to an insecure
// channel.
#ifndef OOBLECK_SERVER_SERVER_SECURITY_H_
#define OOBLECK_SERVER_SERVER_SECURITY_H_

#include <grpcpp/security/auth_metadata_processor.h>
#include <grpcpp/security/server_credentials.h>

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace oobleck::server {

struct ServerSecurity {
  std::string tls_cert_chain_pem;   // empty: plaintext
  std::string tls_private_key_pem;  // set exactly when tls_cert_chain_pem is
  std::string auth_token;           // empty: no token required
};

// Reads the flag files. Empty paths mean "not configured". INVALID_ARGUMENT when only one
// of cert/key is given, when a token is given without TLS, or when a file is empty or the
// token has characters outside visible ASCII; NOT_FOUND when a file cannot be read.
absl::StatusOr<ServerSecurity> ReadServerSecurity(const std::string& tls_cert_file,
                                                  const std::string& tls_key_file,
                                                  const std::string& auth_token_file);

// The text of a token file: surrounding whitespace (a trailing newline) removed.
// INVALID_ARGUMENT when empty or when a character is not visible ASCII.
absl::StatusOr<std::string> ParseAuthToken(absl::string_view file_text);

// True when a == b; the time taken depends only on the lengths, not on where they differ.
bool ConstantTimeEquals(absl::string_view a, absl::string_view b);

// Listening credentials: TLS with a token check when configured, else insecure.
std::shared_ptr<grpc::ServerCredentials> MakeServerCredentials(const ServerSecurity& security);

// Accepts a call when it carries "authorization: Bearer <token>" or calls the health
// service (probes carry no token); UNAUTHENTICATED otherwise.
class BearerTokenAuthenticator final : public grpc::AuthMetadataProcessor {
 public:
  explicit BearerTokenAuthenticator(std::string token) : token_(std::move(token)) {}

  // The check is a string compare: no need for a separate thread.
  bool IsBlocking() const override { return false; }

  grpc::Status Process(const InputMetadata& auth_metadata, grpc::AuthContext* context,
                       OutputMetadata* consumed_auth_metadata,
                       OutputMetadata* response_metadata) override;

 private:
  const std::string token_;
};

}  // namespace oobleck::server

#endif  // OOBLECK_SERVER_SERVER_SECURITY_H_
