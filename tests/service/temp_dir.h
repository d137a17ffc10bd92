// A fresh directory for one test, removed with everything in it afterwards.
#ifndef OOBLECK_TESTS_SERVICE_TEMP_DIR_H_
#define OOBLECK_TESTS_SERVICE_TEMP_DIR_H_

#include <stdlib.h>

#include <filesystem>
#include <string>
#include <system_error>

#include "gtest/gtest.h"

namespace oobleck::server {

class TempDir {
 public:
  TempDir() {
    std::string pattern =
        (std::filesystem::path(::testing::TempDir()) / "oobleck-test-XXXXXX").string();
    path_ = mkdtemp(pattern.data());
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  ~TempDir() {
    std::error_code ignored;
    std::filesystem::remove_all(path_, ignored);
  }
  const std::filesystem::path& path() const { return path_; }

 private:
  std::filesystem::path path_;
};

}  // namespace oobleck::server

#endif  // OOBLECK_TESTS_SERVICE_TEMP_DIR_H_
