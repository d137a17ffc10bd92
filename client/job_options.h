// The job and hardware fields that the command line (CliOptions) and a homogeneous
// templates request (HomogeneousOptions) share, so that each is declared once.
#ifndef OOBLECK_CLIENT_JOB_OPTIONS_H_
#define OOBLECK_CLIENT_JOB_OPTIONS_H_

#include <string>

namespace oobleck::client {

struct JobOptions {
  std::string model;
  std::string gpu_type;  // "" = the model's only GPU type (templates)
  int microbatch_size = 0;
  int gpus_per_node = 1;
  std::string cost_model;
  int microbatches = 0;
  double intra_node_bytes_per_s = 0;
  double inter_node_bytes_per_s = 0;
  double optimizer_state_multiplier = 0;
};

}  // namespace oobleck::client

#endif  // OOBLECK_CLIENT_JOB_OPTIONS_H_
