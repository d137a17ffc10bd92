// The server's PlanTemplates input path on arbitrary requests: size limits, validation and
// conversion to core's problem (server/templates_request.cc, server/job_request.cc), the cost
// model's own checks, and for small problems the search itself under a time budget. The input is a
// serialized PlanTemplatesRequest, or its text format (the seed corpus is written that way).
#include <google/protobuf/io/tokenizer.h>
#include <google/protobuf/text_format.h>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "core/cost_model.h"
#include "core/profile.h"
#include "core/profile_catalog.h"
#include "core/search.h"
#include "oobleck/planner/v1/planner.pb.h"
#include "server/request_limits.h"
#include "server/templates_request.h"

namespace {

namespace pb = ::oobleck::planner::v1;

// Text-format errors are expected on almost every input; keep the output readable.
class SilentErrors : public google::protobuf::io::ErrorCollector {
 public:
  void AddError(int, int, const std::string&) override {}
  void AddWarning(int, int, const std::string&) override {}
};

// The bundled GPT-2 XL profile as three keys, so that lookups by GPU type and micro-batch
// size, derivation and mismatches are all reachable.
const oobleck::ProfileCatalog& Catalog() {
  static const oobleck::ProfileCatalog* catalog = [] {
    auto* c = new oobleck::ProfileCatalog;
    const std::string dir = OOBLECK_SOURCE_DIR "/examples/profiles/gpt2-xl/rtx4090";
    for (const auto& [gpu, mb] : {std::pair{"rtx4090", 1}, {"a100", 1}, {"rtx4090", 2}}) {
      auto profile = oobleck::LoadOobleckProfileDir(dir, "gpt2-xl", gpu, 1);
      if (!profile.ok()) std::abort();
      profile->key.microbatch_size = mb;
      if (!c->Put(*std::move(profile), false).ok()) std::abort();
    }
    return c;
  }();
  return *catalog;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  pb::PlanTemplatesRequest request;
  if (!request.ParseFromArray(data, static_cast<int>(size))) {
    SilentErrors errors;
    google::protobuf::TextFormat::Parser parser;
    parser.RecordErrorsTo(&errors);
    request.Clear();
    if (!parser.ParseFromString(std::string(reinterpret_cast<const char*>(data), size), &request)) {
      return 0;
    }
  }
  if (!oobleck::server::CheckPlanTemplatesLimits(request).ok()) return 0;
  auto converted = oobleck::server::ToTemplateRequest(request, Catalog());
  if (!converted.ok()) return 0;
  if (converted->mixes.empty()) std::abort();  // a valid request plans something
  auto model = oobleck::CostModel::Create(std::move(converted->problem));
  if (!model.ok()) return 0;
  (void)model->problem().CacheKey();

  // Searching every request would make each run slow; small ones cover the cost model.
  if (converted->mixes.size() > 8) return 0;
  for (const auto& mix : converted->mixes) {
    if (oobleck::MixSize(mix) > 6) return 0;
  }
  const auto give_up = std::chrono::steady_clock::now() + std::chrono::milliseconds(500);
  oobleck::SearchOptions options;
  options.cancelled = [give_up] { return std::chrono::steady_clock::now() > give_up; };
  auto results = oobleck::SearchTemplates(*model, converted->mixes, options);
  if (results.ok() && results->size() != converted->mixes.size()) std::abort();
  return 0;
}
