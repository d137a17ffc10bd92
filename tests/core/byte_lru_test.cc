#include "core/byte_lru.h"

#include <string>

#include "gtest/gtest.h"

namespace oobleck {
namespace {

using Lru = ByteLru<std::string>;

TEST(ByteLruTest, FindsWhatWasInsertedAndCountsHitsAndMisses) {
  Lru lru(100);
  EXPECT_EQ(lru.Find("a"), nullptr);
  const std::string* inserted = lru.Insert("a", "alpha", 10, Lru::OnExisting::kReplace);
  ASSERT_NE(inserted, nullptr);
  EXPECT_EQ(*inserted, "alpha");
  ASSERT_NE(lru.Find("a"), nullptr);
  EXPECT_EQ(*lru.Find("a"), "alpha");
  const CacheStats stats = lru.stats();
  EXPECT_EQ(stats.hits, 2);
  EXPECT_EQ(stats.misses, 1);
  EXPECT_EQ(stats.entries, 1);
  EXPECT_EQ(stats.bytes, 10);
  EXPECT_EQ(stats.capacity_bytes, 100);
}

TEST(ByteLruTest, EvictsTheLeastRecentlyUsedUntilTheBytesFit) {
  Lru lru(30);
  lru.Insert("a", "1", 10, Lru::OnExisting::kReplace);
  lru.Insert("b", "2", 10, Lru::OnExisting::kReplace);
  lru.Insert("c", "3", 10, Lru::OnExisting::kReplace);
  ASSERT_NE(lru.Find("a"), nullptr);                    // b is now the least recent
  lru.Insert("d", "4", 15, Lru::OnExisting::kReplace);  // 45 bytes: b, then c go
  EXPECT_EQ(lru.Find("b"), nullptr);
  EXPECT_EQ(lru.Find("c"), nullptr);
  EXPECT_NE(lru.Find("a"), nullptr);
  EXPECT_NE(lru.Find("d"), nullptr);
  const CacheStats stats = lru.stats();
  EXPECT_EQ(stats.evictions, 2);
  EXPECT_EQ(stats.entries, 2);
  EXPECT_EQ(stats.bytes, 25);
}

TEST(ByteLruTest, AnEntryLargerThanTheCapacityIsNotCachedAndEvictsNothing) {
  Lru lru(30);
  lru.Insert("a", "1", 10, Lru::OnExisting::kReplace);
  EXPECT_EQ(lru.Insert("huge", "x", 31, Lru::OnExisting::kReplace), nullptr);
  EXPECT_EQ(lru.Insert("a", "too big", 31, Lru::OnExisting::kReplace), nullptr);
  ASSERT_NE(lru.Find("a"), nullptr);
  EXPECT_EQ(*lru.Find("a"), "1");  // the old value stays
  EXPECT_EQ(lru.Find("huge"), nullptr);
  EXPECT_EQ(lru.stats().evictions, 0);
  EXPECT_EQ(lru.stats().bytes, 10);
}

TEST(ByteLruTest, ReplaceOrKeepAnExistingKey) {
  Lru lru(100);
  lru.Insert("a", "first", 10, Lru::OnExisting::kReplace);
  const std::string* kept = lru.Insert("a", "second", 20, Lru::OnExisting::kKeep);
  ASSERT_NE(kept, nullptr);
  EXPECT_EQ(*kept, "first");
  EXPECT_EQ(lru.stats().bytes, 10);
  const std::string* replaced = lru.Insert("a", "third", 20, Lru::OnExisting::kReplace);
  ASSERT_NE(replaced, nullptr);
  EXPECT_EQ(*replaced, "third");
  EXPECT_EQ(lru.stats().bytes, 20);
  EXPECT_EQ(lru.stats().entries, 1);
  EXPECT_EQ(lru.stats().evictions, 0);
}

}  // namespace
}  // namespace oobleck
