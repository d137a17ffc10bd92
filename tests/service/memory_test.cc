// The server's allocator settings (server/memory.h): the arena cap respects the
// environment, and the background trimmer trims when, and only when, the heap holds free
// memory past its threshold.
#include "server/memory.h"

#include <dlfcn.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "absl/time/time.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/asan.h"
#include "tests/service/call_budget.h"

namespace oobleck::server {
namespace {

using ::testing::HasSubstr;

// AddressSanitizer replaces malloc (the sanitizer CI build): mallopt then fails, which
// CapMallocArenas reports, and glibc's mallinfo2 sees no heap, so nothing is trimmed.
constexpr bool kGlibcMalloc = !kAddressSanitizer;

// The sanitized build's allowances follow the runtime actually linked in: clang's
// sanitizer build defines no __SANITIZE_ADDRESS__ (it once got the release build's 100 ms).
TEST(SanitizerBuildTest, AllowancesFollowTheAsanRuntime) {
  const bool asan_runtime = dlsym(RTLD_DEFAULT, "__asan_init") != nullptr;
  EXPECT_EQ(kDeadlineSlack, std::chrono::milliseconds(asan_runtime ? 600 : 100));
  EXPECT_EQ(kGlibcMalloc, !asan_runtime);
}

// Sets MALLOC_ARENA_MAX for one test and restores what was there.
class ScopedArenaEnv {
 public:
  explicit ScopedArenaEnv(const char* value) {
    if (const char* old = std::getenv("MALLOC_ARENA_MAX"); old != nullptr) old_ = old;
    had_ = std::getenv("MALLOC_ARENA_MAX") != nullptr;
    if (value == nullptr) {
      unsetenv("MALLOC_ARENA_MAX");
    } else {
      setenv("MALLOC_ARENA_MAX", value, 1);
    }
  }
  ~ScopedArenaEnv() {
    if (had_) {
      setenv("MALLOC_ARENA_MAX", old_.c_str(), 1);
    } else {
      unsetenv("MALLOC_ARENA_MAX");
    }
  }

 private:
  bool had_ = false;
  std::string old_;
};

TEST(CapMallocArenasTest, TheEnvironmentWinsOverTheFlag) {
  ScopedArenaEnv env("3");
  EXPECT_THAT(CapMallocArenas(2), HasSubstr("MALLOC_ARENA_MAX=3 from the environment"));
}

TEST(CapMallocArenasTest, ZeroLeavesGlibcsDefaultElseCaps) {
  ScopedArenaEnv env(nullptr);
  EXPECT_THAT(CapMallocArenas(0), HasSubstr("glibc's default"));
  EXPECT_THAT(CapMallocArenas(2),
              HasSubstr(kGlibcMalloc ? "at most 2" : "mallopt(M_ARENA_MAX, 2) failed"));
}

// Allocates `count` blocks of `bytes` and a guard block after them, then frees the blocks:
// their memory stays in the arena as free chunks (the guard keeps it from the heap's top,
// which free() would return by itself). Returns the guard, to free later.
char* LeaveFreeMemoryInTheHeap(int count, size_t bytes) {
  std::vector<char*> blocks;
  blocks.reserve(count);
  for (int i = 0; i < count; ++i) {
    char* block = static_cast<char*>(std::malloc(bytes));
    std::memset(block, i, bytes);
    // Keeps the compiler from eliding the malloc/free pair.
    asm volatile("" : : "r"(block) : "memory");
    blocks.push_back(block);
  }
  char* guard = static_cast<char*>(std::malloc(bytes));
  asm volatile("" : : "r"(guard) : "memory");
  for (char* block : blocks) std::free(block);
  return guard;
}

TEST(MallocTrimmerTest, TrimsWhenTheHeapHoldsFreeMemory) {
  if (!kGlibcMalloc) GTEST_SKIP() << "AddressSanitizer's allocator is not glibc's malloc";
  char* guard = LeaveFreeMemoryInTheHeap(/*count=*/16384, /*bytes=*/1024);
  ASSERT_GE(ReadHeapFigures().free_bytes, 8 << 20);
  MallocTrimmer trimmer(absl::Milliseconds(5), /*min_free_bytes=*/8 << 20);
  for (int i = 0; i < 1000 && trimmer.trims() == 0; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  EXPECT_GE(trimmer.trims(), 1);
  EXPECT_GE(trimmer.trimmed_free_bytes(), 8 << 20);
  std::free(guard);
}

TEST(MallocTrimmerTest, NeverTrimsBelowTheThreshold) {
  MallocTrimmer trimmer(absl::Milliseconds(2), /*min_free_bytes=*/int64_t{1} << 50);
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  EXPECT_EQ(trimmer.trims(), 0);
}

}  // namespace
}  // namespace oobleck::server
