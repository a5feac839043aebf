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

// Speed target of issue #43: one Llama-3.1-405B step on 16,384 H100 (tp4 pp8 vp8 cp4 dp128,
// 128 micro-batches per pipeline) in <= 20 ms.
void BM_Llama405B_16384xH100_Step(benchmark::State& state) {
    const auto plan = load_bench_plan("llama3.1-405b-16384xh100.yaml");
    for (auto _ : state) {
        auto e = trainsim::sim::estimate_plan(plan);
        benchmark::DoNotOptimize(e.step_time_s);
    }
}
BENCHMARK(BM_Llama405B_16384xH100_Step)->Unit(benchmark::kMillisecond);

// The same step on a network whose collectives are already solved, as the plan search runs its
// plans (one network per cluster shape, sim/search/plan_search.cpp): the workload, its costs and
// the engine, without the cluster's flow solves.
void BM_Llama405B_16384xH100_StepWarmNetwork(benchmark::State& state) {
    const auto plan = load_bench_plan("llama3.1-405b-16384xh100.yaml");
    const auto network = trainsim::sim::plan_network(plan);
    (void)trainsim::sim::estimate_plan(plan, trainsim::model::build_workload(plan), network);
    for (auto _ : state) {
        auto e = trainsim::sim::estimate_plan(plan, trainsim::model::build_workload(plan), network);
        benchmark::DoNotOptimize(e.step_time_s);
    }
}
BENCHMARK(BM_Llama405B_16384xH100_StepWarmNetwork)->Unit(benchmark::kMillisecond);

void BM_Llama405B_16384xH100_BuildWorkload(benchmark::State& state) {
    const auto plan = load_bench_plan("llama3.1-405b-16384xh100.yaml");
    for (auto _ : state) {
        auto g = trainsim::model::build_workload(plan);
        benchmark::DoNotOptimize(g.op_count());
    }
}
BENCHMARK(BM_Llama405B_16384xH100_BuildWorkload)->Unit(benchmark::kMillisecond);

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
