// A least-recently-used map from string keys to values, bounded by the bytes its entries are
// estimated to take (the caller gives each entry's estimate). One implementation for the
// template cache (core/template_planner.h) and the cost-model cache (core/model_cache.h).
// Not thread-safe: its owner holds a lock around every call.
#ifndef OOBLECK_CORE_BYTE_LRU_H_
#define OOBLECK_CORE_BYTE_LRU_H_

#include <cstdint>
#include <list>
#include <string>
#include <unordered_map>
#include <utility>

namespace oobleck {

struct CacheStats {
  int64_t hits = 0;
  int64_t misses = 0;
  int64_t entries = 0;
  int64_t bytes = 0;
  int64_t evictions = 0;
  int64_t capacity_bytes = 0;
};

template <typename Value>
class ByteLru {
 public:
  // What Insert does with a key already cached.
  enum class OnExisting { kReplace, kKeep };

  explicit ByteLru(int64_t capacity_bytes) { stats_.capacity_bytes = capacity_bytes; }

  // The value under `key`, now the most recent, or nullptr (a miss). Valid until the next
  // Insert.
  const Value* Find(const std::string& key) {
    auto it = index_.find(key);
    if (it == index_.end()) {
      ++stats_.misses;
      return nullptr;
    }
    ++stats_.hits;
    entries_.splice(entries_.begin(), entries_, it->second);
    return &it->second->value;
  }

  // Caches `value` under `key` as the most recent entry, evicting the least recent ones
  // until the bytes fit. An entry larger than the whole capacity is not cached (it would
  // evict everything): nullptr. With kKeep, a key already cached keeps its value, which is
  // returned. Otherwise the value now cached. Valid until the next Insert.
  const Value* Insert(const std::string& key, Value value, int64_t bytes, OnExisting on_existing) {
    if (auto it = index_.find(key); it != index_.end()) {
      if (on_existing == OnExisting::kKeep) return &it->second->value;
      if (bytes <= stats_.capacity_bytes) Erase(it);
    }
    if (bytes > stats_.capacity_bytes) return nullptr;
    entries_.push_front({key, std::move(value), bytes});
    index_[key] = entries_.begin();
    stats_.bytes += bytes;
    while (stats_.bytes > stats_.capacity_bytes && !entries_.empty()) {
      Erase(index_.find(entries_.back().key));
      ++stats_.evictions;
    }
    return &entries_.front().value;
  }

  CacheStats stats() const {
    CacheStats out = stats_;
    out.entries = static_cast<int64_t>(entries_.size());
    return out;
  }

 private:
  struct Entry {
    std::string key;
    Value value;
    int64_t bytes;
  };
  using Index = std::unordered_map<std::string, typename std::list<Entry>::iterator>;

  void Erase(typename Index::iterator it) {
    stats_.bytes -= it->second->bytes;
    entries_.erase(it->second);
    index_.erase(it);
  }

  std::list<Entry> entries_;  // front = most recent
  Index index_;
  CacheStats stats_;
};

}  // namespace oobleck

#endif  // OOBLECK_CORE_BYTE_LRU_H_
