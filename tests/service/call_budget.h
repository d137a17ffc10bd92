// What the service tests check of a call that runs into its deadline: it is answered within
// the deadline plus kDeadlineSlack, and the work it started stops using CPU with it.
#ifndef OOBLECK_TESTS_SERVICE_CALL_BUDGET_H_
#define OOBLECK_TESTS_SERVICE_CALL_BUDGET_H_

#include <sys/resource.h>

#include <chrono>
#include <thread>

#include "gtest/gtest.h"
#include "tests/asan.h"

namespace oobleck::server {

// Sanitized code runs several times slower; the poll interval is the same, the work
// between two polls is not.
inline constexpr auto kDeadlineSlack = std::chrono::milliseconds(kAddressSanitizer ? 600 : 100);

// CPU time of the whole process (every thread) so far.
inline double ProcessCpuMs() {
  struct rusage usage {};
  getrusage(RUSAGE_SELF, &usage);
  return (usage.ru_utime.tv_sec + usage.ru_stime.tv_sec) * 1e3 +
         (usage.ru_utime.tv_usec + usage.ru_stime.tv_usec) / 1e3;
}

// After a call was answered: kDeadlineSlack later, the process uses (almost) no CPU.
inline void ExpectCpuStops() {
  std::this_thread::sleep_for(kDeadlineSlack);
  const double before = ProcessCpuMs();
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  EXPECT_LT(ProcessCpuMs() - before, 60) << "work of the call outlived it";
}

}  // namespace oobleck::server

#endif  // OOBLECK_TESTS_SERVICE_CALL_BUDGET_H_
