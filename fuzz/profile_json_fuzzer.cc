// core::ParseOobleckProfile on arbitrary text: the three files of Oobleck's profile layout
// (mb<m>.json, allreduce_in_node.json, allreduce_across_nodes.json), separated by NUL
// bytes in the input. A profile that parses and validates must also survive the server's
// stored-profile format unchanged.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>
#include <vector>

#include "core/profile.h"
#include "server/profile_store.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view input(reinterpret_cast<const char*>(data), size);
  std::vector<std::string_view> parts;
  for (int i = 0; i < 2; ++i) {
    const size_t nul = input.find('\0');
    if (nul == std::string_view::npos) break;
    parts.push_back(input.substr(0, nul));
    input.remove_prefix(nul + 1);
  }
  parts.push_back(input);
  while (parts.size() < 3) parts.push_back("[]");

  auto layers = oobleck::ParseOobleckProfile(parts[0], parts[1], parts[2], "fuzz");
  if (!layers.ok()) return 0;
  oobleck::ModelProfile profile;
  profile.key = {"model", "gpu", 1};
  profile.layers = *std::move(layers);
  if (!oobleck::ValidateProfile(profile).ok()) return 0;
  (void)profile.AllreduceInNodeGpus();
  auto stored =
      oobleck::server::ParseStoredProfile(oobleck::server::SerializeStoredProfile(profile));
  if (!stored.ok() || stored->Fingerprint() != profile.Fingerprint()) std::abort();
  (void)oobleck::DeriveProfile(profile, "derived", 1.5).Fingerprint();
  return 0;
}
