// The server's stored-profile files (--data_dir) on arbitrary bytes: a damaged file must be
// reported, never crash the server at start; a file that reads must read back the same.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "server/profile_store.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  auto profile = oobleck::server::ParseStoredProfile(text);
  if (!profile.ok()) return 0;
  (void)oobleck::server::StoredProfileFileName(profile->key);
  auto again =
      oobleck::server::ParseStoredProfile(oobleck::server::SerializeStoredProfile(*profile));
  if (!again.ok() || again->Fingerprint() != profile->Fingerprint() || again->key != profile->key) {
    std::abort();
  }
  return 0;
}
