#!/usr/bin/env python3
"""Prints bench/README.md's fleet-scale table: plan_bench's BM_PlanFleet (cold and warm) and
BM_ReplanFleet (warm, one failure) for every nodes x types, each size in its own process so
that peak RSS is that size's. Times are wall clock; "CPU" is the benchmark thread's CPU
time, which a loaded machine inflates less. With a second argument, also writes the figures
as whitespace-separated columns for bench/plot_fleet.gp.
Usage: bench/fleet_table.py [build/bin/plan_bench [bench/fleet_table.dat]]"""
import json
import subprocess
import sys

BENCH = sys.argv[1] if len(sys.argv) > 1 else "build/bin/plan_bench"
DATA = sys.argv[2] if len(sys.argv) > 2 else None
NODES = [16, 64, 256, 1024, 4096]
TYPES = [2, 4, 6, 8]


COLD_NODES = [16, 4096]  # the cold call is the template search, about the same at any size


def run(nodes, types):
    cold = "[01]" if nodes in COLD_NODES else "0"
    pattern = (f"^BM_(PlanFleet/nodes:{nodes}/types:{types}/cold:{cold}|"
               f"ReplanFleet/nodes:{nodes}/types:{types}/failures:1)/")
    out = subprocess.run([BENCH, f"--benchmark_filter={pattern}", "--benchmark_format=json",
                          "--benchmark_min_time=0.2"], check=True, capture_output=True, text=True)
    return {b["name"]: b for b in json.loads(out.stdout)["benchmarks"]}


def main():
    print("| nodes | types | mixes | Plan cold (ms) | Plan warm (ms) | warm CPU (ms) | gap "
          "| Replan p50 (ms) | Replan p99 (ms) | Replan CPU (ms) | peak RSS (MiB) |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    data = open(DATA, "w") if DATA else None
    if data:
        data.write("# nodes types mixes cold_ms warm_ms warm_cpu_ms gap replan_p50_ms "
                   "replan_p99_ms replan_cpu_ms peak_rss_mib (cold: -1 when not run)\n")
    for nodes in NODES:
        for types in TYPES:
            r = run(nodes, types)
            cold = r.get(f"BM_PlanFleet/nodes:{nodes}/types:{types}/cold:1/real_time", {})
            warm = r.get(f"BM_PlanFleet/nodes:{nodes}/types:{types}/cold:0/real_time", {})
            replan = r.get(f"BM_ReplanFleet/nodes:{nodes}/types:{types}/failures:1/real_time", {})
            rss = max(b.get("peak_rss_MiB", 0) for b in r.values()) if r else 0
            cold_ms = f"{cold['real_time']:.0f}" if cold else "-"
            print(f"| {nodes} | {types} | {warm.get('mixes', 0):.0f} | {cold_ms} "
                  f"| {warm.get('real_time', float('nan')):.1f} "
                  f"| {warm.get('cpu_time', float('nan')):.1f} | {warm.get('gap', float('nan')):g} "
                  f"| {replan.get('p50_ms', float('nan')):.1f} "
                  f"| {replan.get('p99_ms', float('nan')):.1f} "
                  f"| {replan.get('cpu_time', float('nan')):.1f} | {rss:.0f} |", flush=True)
            if data:
                data.write(" ".join(str(x) for x in [
                    nodes, types, int(warm.get("mixes", 0)),
                    round(cold["real_time"], 1) if cold else -1,
                    round(warm.get("real_time", -1), 2), round(warm.get("cpu_time", -1), 2),
                    warm.get("gap", -1), round(replan.get("p50_ms", -1), 2),
                    round(replan.get("p99_ms", -1), 2), round(replan.get("cpu_time", -1), 2),
                    round(rss)]) + "\n")
                data.flush()


if __name__ == "__main__":
    main()
