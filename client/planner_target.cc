#include "client/planner_target.h"

#include <arpa/inet.h>

#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "client/service_config_json.h"  // generated from service_config.json

namespace oobleck::client {
namespace {

enum class Family { kIpv4, kIpv6, kOther };

// "1.2.3.4:5" -> kIpv4, "[::1]:5" -> kIpv6, anything else (or a bad port) -> kOther.
Family AddressFamily(absl::string_view part) {
  const size_t colon = part.rfind(':');
  int port = 0;
  if (colon == absl::string_view::npos || !absl::SimpleAtoi(part.substr(colon + 1), &port) ||
      port < 1 || port > 65535) {
    return Family::kOther;
  }
  std::string host(part.substr(0, colon));
  unsigned char buffer[16];
  if (inet_pton(AF_INET, host.c_str(), buffer) == 1) return Family::kIpv4;
  if (host.size() > 2 && host.front() == '[' && host.back() == ']') {
    host = host.substr(1, host.size() - 2);
    if (inet_pton(AF_INET6, host.c_str(), buffer) == 1) return Family::kIpv6;
  }
  return Family::kOther;
}

}  // namespace

absl::StatusOr<std::string> PlannerTarget(const std::string& server) {
  if (server.empty()) return absl::InvalidArgumentError("--server must not be empty");
  // Already a gRPC target: "dns:///planner:50051", "ipv4:a:1,b:2", "unix:/path", ...
  for (const char* scheme : {"dns:", "ipv4:", "ipv6:", "unix:", "unix-abstract:"}) {
    if (absl::StartsWith(server, scheme)) return server;
  }
  if (absl::StrContains(server, ":/") || !absl::StrContains(server, ',')) return server;
  std::vector<std::string> parts = absl::StrSplit(server, ',');
  const Family first = AddressFamily(parts[0]);
  for (const std::string& part : parts) {
    const Family family = AddressFamily(part);
    if (family == Family::kOther || family != first) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--server: \"", part, "\" in \"", server,
          "\" is not an IP:PORT of the same family as the first address; a list takes IP "
          "addresses only (for host names use one dns:///NAME:PORT target that resolves to "
          "every replica)"));
    }
  }
  return absl::StrCat(first == Family::kIpv4 ? "ipv4:" : "ipv6:", absl::StrJoin(parts, ","));
}

const char* PlannerServiceConfigJson() { return kPlannerServiceConfigJson; }

}  // namespace oobleck::client
