// Channel credentials of oobleck-plan: plaintext by default; TLS trusting --tls_ca; and a
// bearer token from --auth_token_file sent as "authorization: Bearer <token>" (over TLS
// only, as the server accepts it only there).
#ifndef OOBLECK_CLIENT_CHANNEL_SECURITY_H_
#define OOBLECK_CLIENT_CHANNEL_SECURITY_H_

#include <grpcpp/channel.h>
#include <grpcpp/security/credentials.h>

#include <memory>
#include <string>

#include "absl/status/statusor.h"

namespace oobleck::client {

// Empty paths mean "not configured". INVALID_ARGUMENT for a token without --tls_ca or an
// empty token file; NOT_FOUND when a file cannot be read.
absl::StatusOr<std::shared_ptr<grpc::ChannelCredentials>> ChannelCredentialsFromFiles(
    const std::string& tls_ca_file, const std::string& auth_token_file);

// A channel to `address` with `credentials`; over TLS, `tls_server_name` (when not empty)
// is the name the server's certificate is checked against instead of the address's host.
std::shared_ptr<grpc::Channel> CreatePlannerChannel(
    const std::string& address, const std::shared_ptr<grpc::ChannelCredentials>& credentials,
    const std::string& tls_server_name);

}  // namespace oobleck::client

#endif  // OOBLECK_CLIENT_CHANNEL_SECURITY_H_
