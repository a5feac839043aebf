// CPU offload (issue #18 item 4) and the advice when nothing fits (item 6): host memory, PCIe
// traffic and CPU Adam time by hand (sim/offload.hpp), and the plan command's answer for 70B on one
// 8x H100 machine.
#include "cli_runner.hpp"
#include "fixtures.hpp"

#include "trainsim/model/accounting/flops.hpp"
#include "trainsim/model/accounting/layout.hpp"
#include "trainsim/model/accounting/memory_model.hpp"
#include "trainsim/sim/run/estimate.hpp"
#include "trainsim/sim/run/offload.hpp"
#include "trainsim/sim/search/fit_advice.hpp"
#include "trainsim/sim/search/plan_search.hpp"

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <string>

using namespace trainsim;

namespace {

// One node of 8 GPUs of the test profile, with a host side of round numbers: 400 GB/s of host
// memory bandwidth, CPU Adam at half of it, 2 TiB of host memory.
model::Plan offload_plan(model::Sharding sharding, model::Offload offload) {
    auto p = test::small_plan(1, 1, 8, 16);
    p.parallel.sharding = sharding;
    p.parallel.offload = offload;
    p.hardware.host_memory_bandwidth = model::Bandwidth(400e9);
    p.hardware.cpu_adam_efficiency = 0.5;
    p.hardware.default_host_memory = model::gib(2048);
    return p;
}

} // namespace

TEST_CASE("offloading the optimizer moves its state and an FP32 gradient copy to the host", "[offload]") {
    const auto gpu = offload_plan(model::Sharding::zero2, model::Offload::none);
    const auto off = offload_plan(model::Sharding::zero2, model::Offload::optimizer);
    REQUIRE(model::check_layout(off).empty());
    const auto a = model::peak_memory(gpu);
    const auto b = model::peak_memory(off);
    const double params = model::count_params(gpu.model).total;
    REQUIRE(a.local_params == Approx(params)); // tp 1, pp 1: every rank holds the whole model before sharding
    // ZeRO-2 keeps 12 B of Adam state per parameter of the rank's 1/8 shard on the GPU; offloaded: none.
    CHECK(model::to_gib(a.optimizer) == Approx(model::to_gib(model::Bytes(12.0 * params / 8))));
    CHECK(b.optimizer.value() == 0);
    CHECK(b.weights.value() == a.weights.value());
    CHECK(b.gradients.value() == a.gradients.value());
    // The node's 8 GPUs put their shards on the host: (12 + 4) B x params / 8 x 8 = 16 B per parameter.
    CHECK(model::host_offload_bytes_per_node(off).value() == Approx(16.0 * params));
    CHECK(model::fits_in_memory(off, b));
    // Parameters too (ZeRO-Infinity): the GPU keeps only the gathered layers, the host 2 B more.
    const auto inf = offload_plan(model::Sharding::zero3, model::Offload::params);
    REQUIRE(model::check_layout(inf).empty());
    const auto z3 = model::peak_memory(offload_plan(model::Sharding::zero3, model::Offload::none));
    const auto c = model::peak_memory(inf);
    CHECK(c.weights.value() == Approx(z3.weights.value() - 2.0 * params / 8));
    CHECK(c.gradients.value() == Approx(z3.gradients.value() - 2.0 * params / 8));
    CHECK(model::host_offload_bytes_per_node(inf).value() == Approx(18.0 * params));
    // A host too small for it: the plan does not fit.
    auto small_host = off;
    small_host.cluster.host_memory = model::Bytes(10.0 * params);
    CHECK_FALSE(model::fits_in_memory(small_host, b));
}

TEST_CASE("the offload step: PCIe transfers and CPU Adam by hand", "[offload]") {
    const auto plan = offload_plan(model::Sharding::zero2, model::Offload::optimizer);
    const auto e = sim::estimate_plan(plan);
    REQUIRE(e.fits);
    REQUIRE(e.step);
    REQUIRE(e.offload);
    const auto& o = *e.offload;
    const double params = model::count_params(plan.model).total;
    const double s = params / 8;          // each GPU's optimizer shard
    const double pcie = 64e9 * 0.8;       // the profile's PCIe per direction x its efficiency
    const double adam = 400e9 * 0.5 / 30; // parameters per second: 30 B of host traffic each
    CHECK(o.shard_params == Approx(s));
    CHECK(o.grad_to_host_s == Approx(2 * s / pcie));
    CHECK(o.params_to_gpu_s == Approx(2 * s / pcie));
    CHECK(o.cpu_adam_s == Approx(8 * s / adam)); // the node's CPUs update all 8 shards
    CHECK(o.pcie_bytes == Approx(4 * s));
    const auto& b = e.step->breakdown;
    CHECK(o.grad_exposed_s == Approx(std::max(0.0, 2 * s / pcie - b.backward.seconds())));
    CHECK(o.gpu_optimizer_s == Approx(b.optimizer.seconds()));
    CHECK(o.gpu_optimizer_s > 0);
    CHECK(o.added_s == Approx(o.grad_exposed_s + o.cpu_adam_s + o.params_to_gpu_s - o.gpu_optimizer_s));
    CHECK(e.step_time_s == Approx(e.step->step_time.seconds() + o.added_s));
    // Parameters offloaded: each of forward and backward fetches the shard again (no recompute).
    auto inf = offload_plan(model::Sharding::zero3, model::Offload::params);
    const auto f = sim::estimate_plan(inf);
    REQUIRE(f.offload);
    CHECK(f.offload->param_fetch_s == Approx(2 * 2 * s / pcie));
    CHECK(f.offload->pcie_bytes == Approx(4 * s + 2 * 2 * s));
}

TEST_CASE("the offload step's lower bound holds and pruning with it keeps the exhaustive search's plans",
          "[offload][plan-search]") {
    const auto base = offload_plan(model::Sharding::zero2, model::Offload::optimizer);
    CHECK(sim::offload_serial_s(base) ==
          Approx(sim::estimate_plan(base).offload->cpu_adam_s + sim::estimate_plan(base).offload->params_to_gpu_s));
    sim::SearchOptions o;
    o.space.offloads = {model::Offload::optimizer, model::Offload::params};
    o.space.shardings = {model::Sharding::zero1, model::Sharding::zero2, model::Sharding::zero3,
                         model::Sharding::fsdp, model::Sharding::dist_opt};
    o.space.max_cp = 1;
    o.space.max_micro_batch = 4;
    o.threads = 2;
    o.top = 1000;
    o.prune = false;
    const auto full = sim::search_plans(base, o);
    REQUIRE(full.plans.size() > 10);
    bool params = false;
    for (const auto& r : full.plans) {
        INFO(r.plan.name);
        REQUIRE(r.plan.parallel.offload != model::Offload::none);
        params = params || r.plan.parallel.offload == model::Offload::params;
        const double bound = sim::step_time_lower_bound_s(r.plan);
        CHECK(bound == sim::step_time_lower_bound_direct_s(r.plan)); // the extrapolation is exact here too
        CHECK(bound <= r.estimate.step_time_s);
        CHECK(bound > 0.5 * r.estimate.step_time_s); // a bound that means something
    }
    CHECK(params);
    o.prune = true;
    o.top = 3;
    const auto pruned = sim::search_plans(base, o);
    CHECK(pruned.stats.pruned_bound > 0);
    CHECK(pruned.stats.simulated < full.stats.simulated);
    REQUIRE(pruned.plans.size() == 3);
    for (std::size_t i = 0; i < pruned.plans.size(); ++i) {
        CHECK(pruned.plans[i].plan.name == full.plans[i].plan.name);
        CHECK(pruned.plans[i].estimate.step_time_s == full.plans[i].estimate.step_time_s);
    }
}

TEST_CASE("offload layouts are checked", "[offload][layout]") {
    auto none = offload_plan(model::Sharding::none, model::Offload::optimizer);
    CHECK_FALSE(model::check_layout(none).empty());
    auto params_dist = offload_plan(model::Sharding::dist_opt, model::Offload::params);
    CHECK_FALSE(model::check_layout(params_dist).empty());
    auto no_host = offload_plan(model::Sharding::zero2, model::Offload::optimizer);
    no_host.hardware.host_memory_bandwidth = model::Bandwidth(0);
    CHECK_FALSE(model::check_layout(no_host).empty());
    auto no_memory = offload_plan(model::Sharding::zero2, model::Offload::optimizer);
    no_memory.hardware.default_host_memory = model::Bytes(0);
    CHECK_FALSE(model::check_layout(no_memory).empty());
    no_memory.cluster.host_memory = model::gib(512); // the scenario says
    CHECK(model::check_layout(no_memory).empty());
}

TEST_CASE("when a plan does not fit, each knob is tried on it and the fewest GPUs that fit are found",
          "[offload][fit-advice]") {
    // 80 GiB GPUs and the 1.3B test model at a micro-batch of 64 sequences of 2048 without recompute
    // or sharding: ~34 B x 2048 tokens x 64 x 2048 wide per layer, 8 layers, plus the logits: far
    // over the HBM.
    auto p = offload_plan(model::Sharding::none, model::Offload::none);
    p.training.global_batch = 512;
    p.training.micro_batch = 64;
    REQUIRE(model::check_layout(p).empty());
    REQUIRE_FALSE(model::fits_in_memory(p, model::peak_memory(p)));
    const auto a = sim::fit_advice({p}, 0.05, false);
    CHECK(a.closest_memory_gib == Approx(model::to_gib(model::peak_memory(p).total())));
    CHECK(a.capacity_gib == Approx(80 * 0.95));
    bool any_fits = false;
    for (const auto& k : a.knobs) {
        CAPTURE(k.knob);
        if (!k.problem.empty()) continue;
        CHECK(k.memory_gib == Approx(model::to_gib(model::peak_memory(k.plan).total())));
        CHECK(k.fits == model::fits_in_memory(k.plan, model::peak_memory(k.plan), model::gib(80 * 0.95)));
        any_fits = any_fits || k.fits;
    }
    // Full recompute at micro-batch 1 keeps only each layer's input: it fits.
    CHECK(any_fits);
    const auto& full = a.knobs.front();
    CHECK(full.knob == "parallel.recompute: full");
    CHECK(full.memory_gib < a.closest_memory_gib);
}

TEST_CASE("fit advice never proposes a knob the layout already has", "[offload][fit-advice]") {
    // The layout nearest to fitting already runs full recompute at a micro-batch of 1, on a GPU
    // of 1 GiB so that even that does not fit. Proposing "recompute: full" or "micro_batch: 1" would be
    // advice to change nothing (issue #45).
    auto p = offload_plan(model::Sharding::none, model::Offload::none);
    p.parallel.recompute = model::Recompute::full;
    p.training.micro_batch = 1;
    p.hardware.hbm_capacity = model::gib(1);
    REQUIRE(model::check_layout(p).empty());
    REQUIRE_FALSE(model::fits_in_memory(p, model::peak_memory(p)));
    const auto a = sim::fit_advice({p}, 0.05, false);
    REQUIRE_FALSE(a.knobs.empty());
    for (const auto& k : a.knobs) {
        CAPTURE(k.knob);
        CHECK(k.knob != "parallel.recompute: full");
        CHECK(k.knob != "training.micro_batch: 1");
        // Every knob left changes some setting of the closest layout.
        const auto& x = k.plan.parallel;
        const auto& y = a.closest.parallel;
        CHECK((x.tp != y.tp || x.pp != y.pp || x.dp != y.dp || x.sharding != y.sharding || x.recompute != y.recompute ||
               x.recompute_layers != y.recompute_layers || x.offload != y.offload ||
               k.plan.training.micro_batch != a.closest.training.micro_batch));
    }
    CHECK(a.already_in_plan == std::vector<std::string>{"parallel.recompute: full", "training.micro_batch: 1"});
    const auto j = sim::fit_advice_json(a);
    CHECK(j["knobs_already_in_plan"].size() == 2);
    CHECK(j["knobs"].size() == a.knobs.size());
}

TEST_CASE("plan: 70B on one 8x H100 machine trains with CPU offload, and says what more GPUs would give",
          "[offload][cli][slow]") {
    const auto r =
        test::run_trainsim("plan --model llama2-70b --gpu h100-sxm --gpus 8 --tokens 1T --price 2.5 --top 3 -q --json");
    REQUIRE(r.rc == 0);
    const auto j = nlohmann::json::parse(r.out);
    CHECK(j["plans"].empty()); // no GPU-only layout of 8 GPUs fits
    REQUIRE(j.contains("offload_plans"));
    REQUIRE_FALSE(j["offload_plans"].empty());
    const auto& best = j["offload_plans"][0];
    CHECK(best["offload"] != "none");
    CHECK(best["fits"] == true);
    CHECK(best["days_to_train"].get<double>() > 0);
    CHECK(best["cost"].get<double>() > 0);
    CHECK(best["offload_time"]["cpu_adam_s"].get<double>() > 0);
    CHECK(best["host_memory_per_node_gib"].get<double>() <= best["host_capacity_gib"].get<double>());
    REQUIRE(j.contains("gpu_only_alternative"));
    const auto& more = j["gpu_only_alternative"];
    CHECK(more["num_gpus"].get<int>() >= 16);
    CHECK(more["offload"] == "none");
    CHECK(more["speedup_vs_best_offload_plan"].get<double>() ==
          Approx(best["days_to_train"].get<double>() / more["days_to_train"].get<double>()));
    CHECK(more["speedup_vs_best_offload_plan"].get<double>() > 1);
}
