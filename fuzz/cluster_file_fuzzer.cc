// core::ParseClusterFile (docs/CLUSTER_FILE.md format) on arbitrary text, and the
// accessors a client calls on what it returns.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "core/cluster_file.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view json(reinterpret_cast<const char*>(data), size);
  auto file = oobleck::ParseClusterFile(json, "/nonexistent-fuzz-base");
  if (!file.ok()) return 0;
  (void)file->NodeTypes();
  (void)file->NodeCounts();
  for (const auto& type : file->gpu_types) (void)file->FindGpuType(type.name);
  (void)file->FindGpuType("no-such-gpu");
  return 0;
}
