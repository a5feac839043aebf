// Speed of the layout search (Google Benchmark). Targets of the plans-and-budgets issue on the
// 2-core development machine: Llama-2-70B on 64 H100 in under 10 s, on 1024 H100 in under 60 s.
#include "bench_support.hpp"
#include "trainsim/model/loader.hpp"
#include "trainsim/sim/plan_search.hpp"

#include <benchmark/benchmark.h>

#include <cstdlib>

namespace {

using trainsim::bench::load_bench_plan;

void search(benchmark::State& state, int gpus) {
    const auto plan = load_bench_plan("llama2-70b-1024xh100.yaml");
    trainsim::sim::SearchOptions o;
    o.space.gpu_counts = {gpus};
    trainsim::sim::SearchStats stats;
    for (auto _ : state) {
        const auto res = trainsim::sim::search_plans(plan, o);
        stats = res.stats;
        benchmark::DoNotOptimize(res.plans.size());
    }
    state.counters["enumerated"] = static_cast<double>(stats.enumerated);
    state.counters["fit"] = static_cast<double>(stats.enumerated - stats.invalid - stats.does_not_fit);
    state.counters["simulated"] = static_cast<double>(stats.simulated);
    state.counters["pruned_bound"] = static_cast<double>(stats.pruned_bound);
    state.counters["pruned_path"] = static_cast<double>(stats.pruned_critical_path);
}

void BM_PlanSearch_Llama70B_64xH100(benchmark::State& state) { search(state, 64); }
BENCHMARK(BM_PlanSearch_Llama70B_64xH100)->Unit(benchmark::kSecond)->Iterations(1)->UseRealTime();

void BM_PlanSearch_Llama70B_1024xH100(benchmark::State& state) { search(state, 1024); }
BENCHMARK(BM_PlanSearch_Llama70B_1024xH100)->Unit(benchmark::kSecond)->Iterations(1)->UseRealTime();

} // namespace
