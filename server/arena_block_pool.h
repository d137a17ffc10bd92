// Memory for the protobuf arenas of Replan calls, kept from one call for the next.
//
// A fleet's Replan parses and builds about 4 MiB of messages on one arena (4096 nodes, the
// plan, 2400 idle entries). Fresh arena blocks come from malloc, and glibc hands back the
// top of its heap when they are freed, so about one call in six touched a fresh MiB again:
// ~300 page faults, +1 ms of CPU inside the call's planning_time_ms, most of the server's
// p90-p99 spread at idle (bench/README.md, "Fleet Replan through the server"). A call
// takes a block here as its arena's initial block (ArenaOptions::initial_block: the arena
// never frees it) and gives it back afterwards, so the next call finds its pages resident.
#ifndef OOBLECK_SERVER_ARENA_BLOCK_POOL_H_
#define OOBLECK_SERVER_ARENA_BLOCK_POOL_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"

namespace oobleck::server {

class ArenaBlockPool {
 public:
  // An idle server keeps at most `max_blocks` blocks (calls that run at the same time each
  // hold one) of at most `max_block_bytes` each.
  ArenaBlockPool(int max_blocks, size_t max_block_bytes)
      : max_blocks_(max_blocks), max_block_bytes_(max_block_bytes) {}
  ArenaBlockPool(const ArenaBlockPool&) = delete;
  ArenaBlockPool& operator=(const ArenaBlockPool&) = delete;

  struct Block {
    std::unique_ptr<char[]> bytes;
    size_t size = 0;  // 0: no block (the arena allocates all of its memory itself)
  };
  // The largest kept block, or none when none is kept.
  Block Take();
  // `block` back after its arena is gone. `arena_bytes` is what the arena allocated in all
  // (Arena::SpaceAllocated()): when it outgrew the block, a block of that size (up to
  // max_block_bytes) replaces it, so the next call of the same size needs no other memory.
  void Return(Block block, uint64_t arena_bytes);

  // Bytes of the blocks kept now (for tests).
  size_t kept_bytes() const;

 private:
  const int max_blocks_;
  const size_t max_block_bytes_;
  mutable absl::Mutex mu_;
  std::vector<Block> kept_ ABSL_GUARDED_BY(mu_);
};

}  // namespace oobleck::server

#endif  // OOBLECK_SERVER_ARENA_BLOCK_POOL_H_
