// The --load_root of the in-process test servers: this repository, so that LoadProfile can
// name the example profiles (examples/) and nothing outside the checkout is read.
#ifndef OOBLECK_TESTS_SERVICE_TEST_LOAD_ROOT_H_
#define OOBLECK_TESTS_SERVICE_TEST_LOAD_ROOT_H_

#include <cstdlib>
#include <iostream>

#include "core/confined_root.h"
#include "server/service_options.h"

namespace oobleck::server {

inline const ConfinedRoot* TestLoadRoot() {
  static const ConfinedRoot* root = [] {
    absl::StatusOr<ConfinedRoot> opened = ConfinedRoot::Open(OOBLECK_SOURCE_DIR);
    if (!opened.ok()) {
      std::cerr << opened.status() << "\n";
      std::abort();
    }
    return new ConfinedRoot(*std::move(opened));
  }();
  return root;
}

// ServiceOptions with only the test load root set.
inline ServiceOptions WithTestLoadRoot(ServiceOptions options = {}) {
  options.load_root = TestLoadRoot();
  return options;
}

}  // namespace oobleck::server

#endif  // OOBLECK_TESTS_SERVICE_TEST_LOAD_ROOT_H_
