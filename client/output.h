// What oobleck-plan prints: readable tables, or proto3 JSON for scripts.
#ifndef OOBLECK_CLIENT_OUTPUT_H_
#define OOBLECK_CLIENT_OUTPUT_H_

#include <string>
#include <vector>

#include "google/protobuf/message.h"
#include "oobleck/planner/v1/planner.pb.h"

namespace oobleck::client {

namespace pb = ::oobleck::planner::v1;

// proto3 JSON with the .proto field names and every scalar field printed (so a script
// sees "feasible": false rather than a missing key).
std::string ToJson(const google::protobuf::Message& message);

// Left-aligned columns separated by two spaces (the last column unpadded).
std::string RenderTable(const std::vector<std::vector<std::string>>& rows);

// "[0,12)@n0:v100/2g": layers [0, 12) on pipeline node 0 (type v100), 2 GPUs.
std::string FormatStage(const pb::Stage& stage);

// One row per mix: label (with "*" when a derived profile was used), nodes, GPUs,
// iteration time, cache hit, stages or the infeasibility reason; then footnotes.
std::string FormatTemplates(const pb::PlanTemplatesResponse& response);

std::string FormatProfileLoaded(const pb::LoadProfileResponse& response);
std::string FormatProfiles(const pb::ListProfilesResponse& response);
std::string FormatStats(const pb::GetStatsResponse& response);

}  // namespace oobleck::client

#endif  // OOBLECK_CLIENT_OUTPUT_H_
