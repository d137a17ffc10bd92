// Hardening round 3, item 8: a directory under --load_root swapped for a symlink to an
// outside directory while LoadOobleckProfileDir runs must never make it read the outside
// files (the paths were checked, then opened again by name, so the swap could land in
// between). Now the directory is opened once, and the opened descriptors are checked.
#include "core/confined_root.h"

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <string>
#include <thread>

#include "core/profile.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace oobleck {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;

// Every file carries `mark`, so a load that read any one file of the outside directory
// shows it (the swap mostly lands between two reads: only one file comes from outside).
void WriteProfileDir(const fs::path& dir, double mark) {
  fs::create_directories(dir);
  std::ofstream(dir / "mb1.json") << "[{\"forward\": " << mark
                                  << ", \"backward\": 2, \"mem_required\": [3, 4]}]";
  std::ofstream(dir / "allreduce_in_node.json") << "[{\"1\": " << mark << "}]";
  std::ofstream(dir / "allreduce_across_nodes.json") << "[{\"1\": " << mark << "}]";
}

bool ReadOutside(const ModelProfile& p, double outside_mark) {
  const LayerProfile& l = p.layers[0];
  return l.forward_ms == outside_mark || l.allreduce_in_node_ms.at(1) == outside_mark ||
         l.allreduce_across_nodes_ms.at(1) == outside_mark;
}

class ConfinedRootTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string pattern = (fs::path(::testing::TempDir()) / "confined-XXXXXX").string();
    base_ = mkdtemp(pattern.data());
    root_dir_ = base_ / "root";
    WriteProfileDir(root_dir_ / "prof", kInsideForwardMs);
    WriteProfileDir(base_ / "outside" / "prof", kOutsideForwardMs);
    fs::create_directory_symlink(base_ / "outside" / "prof", root_dir_ / "link");
  }
  void TearDown() override { fs::remove_all(base_); }

  static constexpr double kInsideForwardMs = 1;
  static constexpr double kOutsideForwardMs = 999;
  fs::path base_;
  fs::path root_dir_;
};

TEST_F(ConfinedRootTest, SymlinkOutOfTheRootIsRefusedLikeAMissingPath) {
  absl::StatusOr<ConfinedRoot> root = ConfinedRoot::Open(root_dir_.string());
  ASSERT_TRUE(root.ok()) << root.status();
  auto inside = LoadOobleckProfileDir("prof", "m", "g", 1, &*root);
  ASSERT_TRUE(inside.ok()) << inside.status();
  EXPECT_EQ(inside->layers[0].forward_ms, kInsideForwardMs);
  auto outside = LoadOobleckProfileDir("link", "m", "g", 1, &*root);
  EXPECT_EQ(outside.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(outside.status().message(), HasSubstr("is not a readable path under the load root"));
  // A file in a directory inside the root that links out is refused the same way.
  fs::remove(root_dir_ / "prof" / "allreduce_in_node.json");
  fs::create_symlink(base_ / "outside" / "prof" / "allreduce_in_node.json",
                     root_dir_ / "prof" / "allreduce_in_node.json");
  auto linked_file = LoadOobleckProfileDir("prof", "m", "g", 1, &*root);
  EXPECT_EQ(linked_file.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(linked_file.status().message(),
              HasSubstr("allreduce_in_node.json is not a readable"));
}

TEST_F(ConfinedRootTest, DirectorySwappedForAnOutsideSymlinkDuringLoadsIsNeverRead) {
  absl::StatusOr<ConfinedRoot> root = ConfinedRoot::Open(root_dir_.string());
  ASSERT_TRUE(root.ok()) << root.status();
  const std::string prof = (root_dir_ / "prof").string();
  const std::string link = (root_dir_ / "link").string();
  std::atomic<bool> stop{false};
  std::atomic<int64_t> swaps{0};
  // "prof" is the real directory and the symlink out of the root in turn (atomic swaps).
  std::thread swapper([&] {
    while (!stop.load()) {
      if (renameat2(AT_FDCWD, prof.c_str(), AT_FDCWD, link.c_str(), RENAME_EXCHANGE) == 0) {
        swaps.fetch_add(1);
      }
    }
  });
  int loaded = 0, refused = 0, outside = 0;
  const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(3);
  for (int i = 0; i < 20000 && std::chrono::steady_clock::now() < end; ++i) {
    absl::StatusOr<ModelProfile> p = LoadOobleckProfileDir("prof", "m", "g", 1, &*root);
    if (!p.ok()) {
      ++refused;
      continue;
    }
    ++loaded;
    if (ReadOutside(*p, kOutsideForwardMs)) ++outside;
  }
  stop.store(true);
  swapper.join();
  std::cout << "loads: " << loaded << " refused: " << refused << " outside: " << outside
            << " swaps: " << swaps.load() << "\n";
  EXPECT_GT(swaps.load(), 100);
  EXPECT_GT(loaded, 0);
  EXPECT_EQ(outside, 0);
}

}  // namespace
}  // namespace oobleck
