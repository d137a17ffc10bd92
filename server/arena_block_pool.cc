#include "server/arena_block_pool.h"

#include <algorithm>
#include <utility>

namespace oobleck::server {

ArenaBlockPool::Block ArenaBlockPool::Take() {
  absl::MutexLock lock(&mu_);
  if (kept_.empty()) return {};
  auto largest = std::max_element(kept_.begin(), kept_.end(),
                                  [](const Block& a, const Block& b) { return a.size < b.size; });
  Block block = std::move(*largest);
  kept_.erase(largest);
  return block;
}

void ArenaBlockPool::Return(Block block, uint64_t arena_bytes) {
  if (arena_bytes > block.size) {
    // An eighth more, so that a call a little larger than the last still fits. Zeroed (so
    // touched) here, after the call answered, so that its pages are resident for the next.
    const size_t size = static_cast<size_t>(arena_bytes + arena_bytes / 8);
    if (size > max_block_bytes_) return;
    block.bytes = std::make_unique<char[]>(size);
    block.size = size;
  }
  if (block.size == 0) return;  // (a kept block is never above max_block_bytes_)
  absl::MutexLock lock(&mu_);
  if (static_cast<int>(kept_.size()) < max_blocks_) kept_.push_back(std::move(block));
}

size_t ArenaBlockPool::kept_bytes() const {
  absl::MutexLock lock(&mu_);
  size_t bytes = 0;
  for (const Block& block : kept_) bytes += block.size;
  return bytes;
}

}  // namespace oobleck::server
