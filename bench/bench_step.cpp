// Simulation speed of one training step (Google Benchmark). Target of the core issue:
// Llama-2-70B on 1024 H100 (tp8 pp8 dp16, 64 micro-batches) in under 200 ms on one core.
#include "bench_support.hpp"
#include "trainsim/model/input/loader.hpp"
#include "trainsim/model/workload/workload.hpp"
#include "trainsim/sim/cost/compute_cost.hpp"
#include "trainsim/sim/engine/heap_policy.hpp"
#include "trainsim/sim/network/network.hpp"
#include "trainsim/sim/run/estimate.hpp"
#include "trainsim/sim/step/executor.hpp"

#include <benchmark/benchmark.h>

#include <cstdlib>

namespace {

using trainsim::bench::load_bench_plan;

// Whole plan evaluation: build the workload, cost it, run the engine.
void BM_Llama70B_1024xH100_Step(benchmark::State& state) {
    const auto plan = load_bench_plan("llama2-70b-1024xh100.yaml");
    for (auto _ : state) {
        auto e = trainsim::sim::estimate_plan(plan);
        benchmark::DoNotOptimize(e.step_time_s);
    }
}
BENCHMARK(BM_Llama70B_1024xH100_Step)->Unit(benchmark::kMillisecond);

// The workload builder alone.
void BM_Llama70B_1024xH100_BuildWorkload(benchmark::State& state) {
    const auto plan = load_bench_plan("llama2-70b-1024xh100.yaml");
    for (auto _ : state) {
        auto g = trainsim::model::build_workload(plan);
        benchmark::DoNotOptimize(g.op_count());
    }
}
BENCHMARK(BM_Llama70B_1024xH100_BuildWorkload)->Unit(benchmark::kMillisecond);

} // namespace

// BENCHMARK_MAIN, with the simulator's heap policy set first as trainsim's own main does.
int main(int argc, char** argv) {
    trainsim::sim::keep_freed_memory();
    benchmark::Initialize(&argc, argv);
    if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
    benchmark::RunSpecifiedBenchmarks();
    benchmark::Shutdown();
    return 0;
}
