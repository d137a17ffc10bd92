// Replan's arena memory (server/arena_block_pool.h): a block given back is the one the next
// call gets, it grows to what an arena needed, and the pool keeps no more than its bounds.
#include "server/arena_block_pool.h"

#include <google/protobuf/arena.h>

#include <string>
#include <utility>

#include "gtest/gtest.h"

namespace oobleck::server {
namespace {

TEST(ArenaBlockPoolTest, EmptyPoolGivesNoBlock) {
  ArenaBlockPool pool(2, 1 << 20);
  const ArenaBlockPool::Block block = pool.Take();
  EXPECT_EQ(block.bytes, nullptr);
  EXPECT_EQ(block.size, 0u);
}

TEST(ArenaBlockPoolTest, GrowsToWhatTheArenaAllocatedAndIsReused) {
  ArenaBlockPool pool(2, 1 << 20);
  pool.Return(pool.Take(), 100000);
  EXPECT_GE(pool.kept_bytes(), 100000u);
  ArenaBlockPool::Block block = pool.Take();
  ASSERT_NE(block.bytes, nullptr);
  EXPECT_GE(block.size, 100000u);
  EXPECT_EQ(pool.kept_bytes(), 0u);  // taken: no other call gets it
  const char* memory = block.bytes.get();
  const size_t size = block.size;
  pool.Return(std::move(block), size / 2);  // fitted: the same block comes back
  const ArenaBlockPool::Block again = pool.Take();
  EXPECT_EQ(again.bytes.get(), memory);
  EXPECT_EQ(again.size, size);
}

TEST(ArenaBlockPoolTest, KeepsAtMostMaxBlocksOfAtMostMaxBytes) {
  ArenaBlockPool pool(2, 1 << 20);
  pool.Return({}, 2 << 20);  // larger than a block may be: not kept
  EXPECT_EQ(pool.kept_bytes(), 0u);
  for (int i = 0; i < 3; ++i) pool.Return({}, 1000);
  EXPECT_GT(pool.kept_bytes(), 0u);
  EXPECT_LE(pool.kept_bytes(), 2 * (1000u + 1000u / 8));
  EXPECT_NE(pool.Take().bytes, nullptr);
  EXPECT_NE(pool.Take().bytes, nullptr);
  EXPECT_EQ(pool.Take().bytes, nullptr);
}

// The way ServeReplan uses a block: as an arena's initial block, which the arena fills
// first and never frees; a call that fits it allocates nothing more.
TEST(ArenaBlockPoolTest, ArenaThatFitsItsInitialBlockAllocatesNothingMore) {
  ArenaBlockPool pool(1, 16 << 20);
  auto fill = [](google::protobuf::Arena& arena) {
    for (int i = 0; i < 20000; ++i) {
      google::protobuf::Arena::Create<std::string>(&arena, "a string of the call");
    }
  };
  uint64_t first_bytes = 0;
  {
    google::protobuf::Arena arena;
    fill(arena);
    first_bytes = arena.SpaceAllocated();
  }
  pool.Return(pool.Take(), first_bytes);
  ArenaBlockPool::Block block = pool.Take();
  ASSERT_GE(block.size, first_bytes);
  uint64_t second_bytes = 0;
  {
    google::protobuf::ArenaOptions options;
    options.initial_block = block.bytes.get();
    options.initial_block_size = block.size;
    google::protobuf::Arena arena(options);
    fill(arena);
    second_bytes = arena.SpaceAllocated();
  }
  EXPECT_EQ(second_bytes, block.size);  // only the initial block
}

}  // namespace
}  // namespace oobleck::server
