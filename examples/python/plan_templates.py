#!/usr/bin/python3
"""Asks oobleck-planner for pipeline templates and prints them, as Oobleck's master
daemon does at start: one optimal template per pipeline size from 1 to N nodes, so that
after a node failure every pipeline can be re-instantiated from a template at once.

Setup (Debian 12; everything from scripts/install-deps.sh):
  1. scripts/build.sh (builds the server)
  2. Start a server with the bundled GPT-2 XL profile:
       build/bin/oobleck-planner --profile_dir examples/profiles
  3. Run this client with Debian's interpreter (python3-grpcio is installed for
     /usr/bin/python3; another python3 on PATH may not see it):
       /usr/bin/python3 examples/python/plan_templates.py --nodes 4
       /usr/bin/python3 examples/python/plan_templates.py --nodes 4 \
           --cost-model oobleck-sosp23 --microbatches 0   # Oobleck's published figures

The API's stubs come from the oobleck_planner package (client/python; planner_package.py).
Against a server started with --tls_cert/--tls_key (and --auth_token_file), pass
--tls-ca CERT.pem (and --auth-token-file TOKEN_FILE).
"""

import argparse
import sys

import planner_package  # the oobleck_planner package: installed, else client/python/

GIB = 1 << 30


def parse_args():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--server", default="127.0.0.1:50051",
                        help="HOST:PORT, IP:PORT,IP:PORT,... of several replicas, or a gRPC "
                             "target such as dns:///NAME:PORT (oobleck_planner.channel)")
    parser.add_argument("--model", default="gpt2-xl")
    parser.add_argument("--gpu-type", default="", help="empty: the model's only GPU type")
    parser.add_argument("--nodes", type=int, default=4, help="plan pipelines of 1..N nodes")
    parser.add_argument("--gpus-per-node", type=int, default=1)
    parser.add_argument("--gpu-memory-gib", type=float, default=24)
    parser.add_argument("--cost-model", default="1f1b", choices=["1f1b", "oobleck-sosp23"])
    parser.add_argument("--microbatches", type=int, default=50,
                        help="micro-batches per pipeline and iteration (M); 0 = not given, "
                        "which oobleck-sosp23 allows (Oobleck's own formula has no M)")
    parser.add_argument("--timeout-s", type=float, default=60)
    parser.add_argument("--tls-ca", default="",
                        help="PEM certificate(s) to trust: connect over TLS")
    parser.add_argument("--auth-token-file", default="",
                        help="file holding the server's bearer token (needs --tls-ca)")
    return parser.parse_args()


def open_channel(grpc, oobleck_planner, args):
    """Plaintext by default; TLS with --tls-ca; plus a bearer token with --auth-token-file
    (gRPC sends call credentials over TLS only, as the server accepts them)."""
    try:
        credentials = oobleck_planner.channel.channel_credentials(grpc, args.tls_ca,
                                                                  args.auth_token_file)
    except (OSError, ValueError) as error:
        sys.exit(f"error: {error}")
    return oobleck_planner.open_channel(grpc, args.server, credentials)


def main():
    args = parse_args()
    grpc, oobleck_planner, pb, planner_pb2_grpc = planner_package.load()

    # A homogeneous cluster of N nodes; the server plans every pipeline size 1..N.
    node_type = pb.NodeType(name=args.gpu_type or "node", gpu_type=args.gpu_type,
                            gpus_per_node=args.gpus_per_node,
                            gpu_memory_bytes=args.gpu_memory_gib * GIB,
                            intra_node_bytes_per_s=25e9,  # PCIe 4.0
                            count=args.nodes)
    request = pb.PlanTemplatesRequest(
        model=args.model, cost_model=args.cost_model, microbatches=args.microbatches,
        min_nodes=1, max_nodes=args.nodes,
        cluster=pb.Cluster(node_types=[node_type], inter_node_bytes_per_s=12.5e9))

    with open_channel(grpc, oobleck_planner, args) as channel:
        planner = planner_pb2_grpc.PlannerStub(channel)
        try:
            response = planner.PlanTemplates(request, timeout=args.timeout_s)
        except grpc.RpcError as error:
            sys.exit(f"error: {error.code().name}: {error.details()}")

    print(f"{args.model}, cost model {response.cost_model}, "
          f"planned in {response.planning_time_ms:.1f} ms")
    for result in response.results:
        if not result.feasible:
            print(f"  {result.mix_label:>10}: infeasible: {result.infeasible_reason}")
            continue
        tmpl = result.template
        stages = " ".join(f"[{s.layer_begin},{s.layer_end})@n{s.node_index}/{s.gpus}g"
                          for s in tmpl.stages)
        print(f"  {result.mix_label:>10}: {tmpl.iteration_time_ms:10.2f} ms  {stages}")


if __name__ == "__main__":
    main()
