#include "client/channel_security.h"

#include <grpcpp/create_channel.h>
#include <grpcpp/support/channel_arguments.h>

#include <cstdint>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "client/planner_target.h"
#include "core/file_reader.h"
#include "core/status_macros.h"

namespace oobleck::client {
namespace {

// A CA bundle or token is a few KiB; anything this large is the wrong file.
constexpr int64_t kMaxSecurityFileBytes = int64_t{1} << 20;

absl::StatusOr<std::string> ReadSmallFile(const std::string& path, const std::string& flag) {
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

absl::StatusOr<std::shared_ptr<grpc::ChannelCredentials>> ChannelCredentialsFromFiles(
    const std::string& tls_ca_file, const std::string& auth_token_file) {
  if (tls_ca_file.empty()) {
    if (!auth_token_file.empty()) {
      return absl::InvalidArgumentError(
          "--auth-token-file needs --tls-ca: the token is only sent over TLS");
    }
    return grpc::InsecureChannelCredentials();
  }
  ASSIGN_OR_RETURN(std::string ca, ReadSmallFile(tls_ca_file, "tls-ca"));
  grpc::SslCredentialsOptions tls;
  tls.pem_root_certs = std::move(ca);
  std::shared_ptr<grpc::ChannelCredentials> credentials = grpc::SslCredentials(tls);
  if (auth_token_file.empty()) return credentials;

  ASSIGN_OR_RETURN(std::string text, ReadSmallFile(auth_token_file, "auth-token-file"));
  const std::string token(absl::StripAsciiWhitespace(text));
  if (token.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("--auth-token-file: ", auth_token_file, " holds no token"));
  }
  // Adds "authorization: Bearer <token>" to every call.
  return grpc::CompositeChannelCredentials(credentials, grpc::AccessTokenCredentials(token));
}

std::shared_ptr<grpc::Channel> CreatePlannerChannel(
    const std::string& address, const std::shared_ptr<grpc::ChannelCredentials>& credentials,
    const std::string& tls_server_name) {
  grpc::ChannelArguments arguments;
  if (!tls_server_name.empty()) arguments.SetSslTargetNameOverride(tls_server_name);
  arguments.SetServiceConfigJSON(PlannerServiceConfigJson());
  return grpc::CreateCustomChannel(address, credentials, arguments);
}

}  // namespace oobleck::client
