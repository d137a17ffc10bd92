// An in-process PlannerService answering on a real channel (127.0.0.1, a free port), shut
// down with the object: the server the service tests of one concern share as a fixture.
#ifndef OOBLECK_TESTS_SERVICE_SERVED_PLANNER_H_
#define OOBLECK_TESTS_SERVICE_SERVED_PLANNER_H_

#include <grpcpp/create_channel.h>
#include <grpcpp/grpcpp.h>
#include <grpcpp/security/credentials.h>

#include <chrono>
#include <cstddef>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "core/profile.h"
#include "core/profile_catalog.h"
#include "core/template_cache.h"
#include "oobleck/planner/v1/planner.grpc.pb.h"
#include "server/planner_server.h"
#include "server/planner_service.h"
#include "server/service_options.h"

namespace oobleck::server {

struct ServedPlanner {
  explicit ServedPlanner(size_t cache_bytes = 64 << 20) : cache(cache_bytes) {}
  ~ServedPlanner() {
    if (running.server != nullptr) {
      running.server->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(5));
    }
  }

  // Starts the service on 2 threads with `options` (which must outlive this object).
  absl::Status Start(const ServiceOptions& options = {}) {
    service = std::make_unique<PlannerService>(&catalog, &cache, /*threads=*/2, options);
    absl::StatusOr<RunningServer> started = StartPlannerServer("127.0.0.1:0", service.get());
    if (!started.ok()) return started.status();
    running = *std::move(started);
    stub = ::oobleck::planner::v1::Planner::NewStub(
        grpc::CreateChannel(running.address, grpc::InsecureChannelCredentials()));
    return absl::OkStatus();
  }

  // Loads the example GPT-2 XL profile (gpu_type rtx4090) from `directory` over the channel.
  grpc::Status LoadExampleProfile(const std::string& directory) {
    ::oobleck::planner::v1::LoadProfileRequest load;
    load.set_model("gpt2-xl");
    load.set_gpu_type("rtx4090");
    load.set_directory(directory);
    ::oobleck::planner::v1::LoadProfileResponse loaded;
    grpc::ClientContext context;
    return stub->LoadProfile(&context, load, &loaded);
  }

  ProfileCatalog catalog;
  TemplateCache cache;
  std::unique_ptr<PlannerService> service;
  RunningServer running;
  std::unique_ptr<::oobleck::planner::v1::Planner::Stub> stub;
};

}  // namespace oobleck::server

#endif  // OOBLECK_TESTS_SERVICE_SERVED_PLANNER_H_
