#include "client/channel_security.h"

#include <grpcpp/create_channel.h>
#include <grpcpp/support/channel_arguments.h>

#include <fstream>
#include <sstream>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "client/planner_target.h"

namespace oobleck::client {
namespace {

absl::StatusOr<std::string> ReadSmallFile(const std::string& path, const std::string& flag) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat("--", flag, ": cannot read ", path));
  std::ostringstream text;
  text << in.rdbuf();
  if (text.str().empty()) {
    return absl::InvalidArgumentError(absl::StrCat("--", flag, ": ", path, " is empty"));
  }
  return text.str();
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
  absl::StatusOr<std::string> ca = ReadSmallFile(tls_ca_file, "tls-ca");
  if (!ca.ok()) return ca.status();
  grpc::SslCredentialsOptions tls;
  tls.pem_root_certs = *std::move(ca);
  std::shared_ptr<grpc::ChannelCredentials> credentials = grpc::SslCredentials(tls);
  if (auth_token_file.empty()) return credentials;

  absl::StatusOr<std::string> text = ReadSmallFile(auth_token_file, "auth-token-file");
  if (!text.ok()) return text.status();
  const std::string token(absl::StripAsciiWhitespace(*text));
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
