// FNV-1a, 64 bits: the content hash behind profile fingerprints, the checksums of stored
// profiles and the etcd keys of shared templates. Not cryptographic: each use either
// compares the content as well or only guards against accidental damage.
#ifndef OOBLECK_CORE_FNV1A_H_
#define OOBLECK_CORE_FNV1A_H_

#include <cstddef>
#include <cstdint>
#include <string_view>

namespace oobleck {

inline constexpr uint64_t kFnv1a64Basis = 1469598103934665603ULL;
inline constexpr uint64_t kFnv1a64Prime = 1099511628211ULL;

// Folds `n` bytes at `data` into the running hash `h` (start from kFnv1a64Basis).
inline uint64_t Fnv1a64(const void* data, size_t n, uint64_t h = kFnv1a64Basis) {
  const auto* p = static_cast<const unsigned char*>(data);
  for (size_t i = 0; i < n; ++i) {
    h ^= p[i];
    h *= kFnv1a64Prime;
  }
  return h;
}

// FNV-1a's step on a whole 32-bit word instead of its bytes: for in-memory hashes only
// (never stored), where hashing ints byte by byte showed in profiles.
inline uint64_t Fnv1a64Word(uint32_t word, uint64_t h) { return (h ^ word) * kFnv1a64Prime; }

inline uint64_t Fnv1a64(std::string_view bytes, uint64_t h = kFnv1a64Basis) {
  return Fnv1a64(bytes.data(), bytes.size(), h);
}

}  // namespace oobleck

#endif  // OOBLECK_CORE_FNV1A_H_
