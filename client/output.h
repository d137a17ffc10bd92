// What oobleck-plan prints: readable tables, or proto3 JSON for scripts.
#ifndef OOBLECK_CLIENT_OUTPUT_H_
#define OOBLECK_CLIENT_OUTPUT_H_

#include <map>
#include <set>
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

// "[0,12)@n0:v100/2g": layers [0, 12) on pipeline node 0 (type v100), 2 GPUs;
// "[0,12)@n0:gh200/tp4": on 4 GPUs running tensor-parallel (Stage.tensor_parallel).
std::string FormatStage(const pb::Stage& stage);

// "1.23 GB", "45.6 MB", "789 B" (decimal units, as network transfers are counted).
std::string FormatBytes(double bytes);

// GPU type of a node type: its gpu_type, or its name when that is empty (the model's
// only GPU type).
std::string GpuTypeOf(const pb::NodeType& type);

// Node type name -> GpuTypeOf, for every node type of a request's cluster.
std::map<std::string, std::string> GpuTypesOf(const pb::Cluster& cluster);

// The node types of `tmpl` whose GPU type's profile was derived, not measured;
// `gpu_type_of` maps node type names to GPU types (a name it lacks is its own GPU type,
// as in cluster files).
std::set<std::string> DerivedNodeTypes(const pb::PipelineTemplate& tmpl,
                                       const std::map<std::string, std::string>& gpu_type_of);

// `mix_label` ("2xv100+2xrtx3090+2xrtx4090") with "*" right after each node type in
// `derived_node_types`: "2xv100*+2xrtx3090*+2xrtx4090".
std::string MarkDerivedTypes(const std::string& mix_label,
                             const std::set<std::string>& derived_node_types);

// One row per mix: label (each derived node type marked "*"), nodes, GPUs, iteration
// time, cache hit, stages or the infeasibility reason; then footnotes. `gpu_type_of` as
// for DerivedNodeTypes.
std::string FormatTemplates(const pb::PlanTemplatesResponse& response,
                            const std::map<std::string, std::string>& gpu_type_of = {});

std::string FormatProfileLoaded(const pb::LoadProfileResponse& response);
std::string FormatProfiles(const pb::ListProfilesResponse& response);
std::string FormatStats(const pb::GetStatsResponse& response);

}  // namespace oobleck::client

#endif  // OOBLECK_CLIENT_OUTPUT_H_
