// Turns command-line input (flags, profile directories, cluster files) into requests.
// No RPCs here, so everything is testable without a server.
#ifndef OOBLECK_CLIENT_REQUESTS_H_
#define OOBLECK_CLIENT_REQUESTS_H_

#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "client/job_options.h"
#include "core/cluster_file.h"
#include "google/protobuf/message.h"
#include "oobleck/planner/v1/planner.pb.h"

namespace oobleck::client {

namespace pb = ::oobleck::planner::v1;

// The whole file; NOT_FOUND naming the path when it cannot be opened.
absl::StatusOr<std::string> ReadTextFile(const std::filesystem::path& path);

struct NodeRange {
  int min_nodes = 0;
  int max_nodes = 0;
};

// "A-B" or "N" (1 <= A <= B).
absl::StatusOr<NodeRange> ParseNodeRange(const std::string& text);

// "skip" / "ring".
absl::StatusOr<pb::MissingAllreduce> ParseMissingAllreduce(const std::string& text);

// --stage-gpus: "any" / "divisors" / "equal-halves".
absl::StatusOr<pb::StageGpus> ParseStageGpus(const std::string& text);

// --allreduce-key: "gpus" / "gpus-minus-one".
absl::StatusOr<pb::AllreduceKey> ParseAllreduceKey(const std::string& text);

// Reads the proto3 JSON of `message` (fields a newer server added are ignored);
// INVALID_ARGUMENT naming `source` and the message type when it is not that.
absl::Status ParseAnswerJson(const std::string& json, const std::string& source,
                             google::protobuf::Message* message);

// The files of an Oobleck profile directory, read as text. microbatch_size 0 picks the
// only mb<m>.json; the size actually read is returned alongside.
struct ProfileDirFiles {
  int microbatch_size = 0;
  pb::OobleckProfileFiles files;
};
absl::StatusOr<ProfileDirFiles> ReadProfileDir(const std::string& dir, int microbatch_size);

struct HomogeneousOptions {
  JobOptions job;
  NodeRange nodes;
  double gpu_memory_bytes = 0;
  pb::MissingAllreduce missing_allreduce = pb::MISSING_ALLREDUCE_SKIP_SIZE;
};

// One node type (named after the GPU type, or "node") with max_nodes nodes.
pb::PlanTemplatesRequest BuildHomogeneousRequest(const HomogeneousOptions& options);

// Settings a cluster file provides that the command line may override.
struct ClusterOverrides {
  std::string cost_model;
  std::optional<int> microbatches;
  std::optional<double> optimizer_state_multiplier;
  std::optional<pb::MissingAllreduce> missing_allreduce;
  std::optional<NodeRange> nodes;  // unset: every mix of 1..all nodes
  bool all_nodes = false;          // plan only the mix of all nodes
  // relative_speed of profile_measured_on when gpu_types does not list it (0 = not given).
  double measured_relative_speed = 0;
};

// A profile the request depends on, to be uploaded before planning.
struct ProfileUpload {
  std::string dir;  // absolute
  std::string model;
  std::string gpu_type;
  int microbatch_size = 0;
};

struct ClusterRequest {
  pb::PlanTemplatesRequest request;
  std::vector<ProfileUpload> uploads;
};

// Node types from ClusterFile::NodeTypes(); a GPU type with relative_speed t (other than
// profile_measured_on itself) is derived from profile_measured_on with speed
// t / relative_speed(profile_measured_on). Errors name the file's key.
absl::StatusOr<ClusterRequest> BuildClusterRequest(const ClusterFile& file,
                                                   const ClusterOverrides& overrides);

// The job and hardware of a PlanTemplatesRequest as a PlanRequest (no nodes, no batch).
pb::PlanRequest PlanRequestOf(const pb::PlanTemplatesRequest& templates);

}  // namespace oobleck::client

#endif  // OOBLECK_CLIENT_REQUESTS_H_
