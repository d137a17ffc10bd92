// Startup loading of a directory tree of profiles: ROOT/<model>/<gpu_type>/ each in
// Oobleck's layout with one or more mb<m>.json.
#ifndef OOBLECK_SERVER_PROFILE_TREE_H_
#define OOBLECK_SERVER_PROFILE_TREE_H_

#include <string>
#include <vector>

#include "core/profile_catalog.h"

namespace oobleck::server {

struct ProfileTreeReport {
  std::vector<std::string> loaded;  // "model/gpu_type/mb<m>" of every stored profile
  std::vector<std::string> errors;  // one per profile or directory that was skipped
};

// Loads every profile it can into `catalog` (without replacing) and reports the rest;
// a bad profile never stops the others from loading.
ProfileTreeReport LoadProfileTree(const std::string& root, ProfileCatalog* catalog);

}  // namespace oobleck::server

#endif  // OOBLECK_SERVER_PROFILE_TREE_H_
