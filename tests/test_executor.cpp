// The step executor: sequencing, symmetric-rank reduction, pipeline bubbles and stuck runs.
#include "fixtures.hpp"
#include "scratch_dir.hpp"
#include "trainsim/model/accounting/flops.hpp"
#include "trainsim/model/accounting/layout.hpp"
#include "trainsim/model/framework/framework_profile.hpp"
#include "trainsim/model/input/loader.hpp"
#include "trainsim/model/workload/workload.hpp"
#include "trainsim/sim/cost/compute_cost.hpp"
#include "trainsim/sim/network/network.hpp"
#include "trainsim/sim/run/estimate.hpp"
#include "trainsim/sim/step/executor.hpp"

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include <limits>
#include <map>

using namespace trainsim;
using model::Time;

namespace {
sim::StepResult run(const model::Plan& plan, bool all_ranks = false) {
    const auto g = model::build_workload(plan);
    const sim::ComputeCost cc(plan.hardware);
    const auto net = sim::plan_network(plan);
    sim::ExecOptions opt;
    opt.all_ranks = all_ranks;
    return sim::execute_step(plan, g, cc, net, opt);
}

// Sum of the compute-stream kernel costs of one stage's program.
Time compute_sum(const model::Plan& plan, const model::OpGraph& g, int stage) {
    const sim::ComputeCost cc(plan.hardware);
    Time t;
    for (const auto& op : g.stages[static_cast<std::size_t>(stage)].ops) {
        const auto& p = g.protos[op.proto];
        if (p.kind == model::OpKind::gemm || p.kind == model::OpKind::memory || p.kind == model::OpKind::attention_fwd ||
            p.kind == model::OpKind::attention_bwd)
            t += cc.cost(p);
    }
    return t;
}
// A pipeline of `pp` stages on one node whose communication is free and whose stages are equal
// (negligible embedding and head), for checking schedules against their closed forms.
model::Plan free_comm_pipeline(int pp, int global_batch) {
    auto plan = test::small_plan(1, pp, 1, global_batch, 1);
    plan.model.vocab = 128;
    plan.cluster.gpus_per_node = pp;
    plan.cluster.nodes = 1;
    plan.hardware.nvlink_bandwidth = model::Bandwidth(1e18);
    plan.hardware.intra_node_latency = Time();
    plan.hardware.kernel_overhead = Time::ps(1);
    plan.hardware.comm_compute_slowdown = 0;
    return plan;
}
} // namespace

TEST_CASE("a GEMM costs FLOPs over efficiency x peak plus the kernel overhead", "[compute]") {
    const auto hw = test::test_profile();
    const sim::ComputeCost cc(hw);
    // At the reference shape the profile efficiency applies as is: 2*8192^3 / (0.8 * 1000 TFLOP/s).
    const double expected = 2.0 * 8192.0 * 8192.0 * 8192.0 / (0.8 * 1e15) + 4e-6;
    CHECK(cc.gemm(model::Precision::bf16, 8192, 8192, 8192).seconds() == Approx(expected).epsilon(1e-9));
    // A skinny GEMM fills one partial wave of the 132 SMs. Best tiling: 64 x 128 tiles (2 x 8 = 16
    // tiles, x0.80 for the small tile) vs 8192^3 in 128 x 256 tiles (2048 tiles in 16 waves of 132).
    const double skinny = 0.8 * (16.0 / 132.0 * 0.80) / (2048.0 / (16.0 * 132.0));
    CHECK(cc.gemm_efficiency(model::Precision::bf16, 128, 1024, 8192) == Approx(skinny).epsilon(1e-9));
    CHECK(skinny < 0.1);
    // A memory-bound kernel: bytes / (0.8 * 3 TB/s) + overhead.
    CHECK(cc.memory(model::Bytes(2.4e9)).seconds() == Approx(1e-3 + 4e-6).epsilon(1e-9));
}

TEST_CASE("attention runs at the efficiency of its kernel: the fused one, or FlashAttention-2's", "[compute]") {
    auto hw = test::test_profile();
    hw.sustained_clock_ratio = 1.0;
    model::OpProto op;
    op.kind = model::OpKind::attention_fwd;
    op.seq_kv = 4096;
    op.flops = model::Flops(1e12);
    op.bytes = model::Bytes(0);
    // FLOPs / (BF16 peak x efficiency x s / (s + 320)) + the kernel overhead.
    auto expected = [](double eff) { return 1e12 / (1e15 * eff * 4096.0 / (4096.0 + 320.0)) + 4e-6; };
    const sim::ComputeCost fused(hw);
    CHECK(fused.cost(op).seconds() == Approx(expected(0.5)).epsilon(1e-9));
    // flash2 without a profile value: FlashAttention-2 is the GPU's fused kernel (Ampere).
    op.attention_impl = model::AttentionImpl::flash2;
    CHECK(fused.cost(op).seconds() == Approx(expected(0.5)).epsilon(1e-9));
    hw.flash2_attention_fwd_efficiency = 0.33;
    hw.flash2_attention_bwd_efficiency = 0.26;
    const sim::ComputeCost hopper(hw);
    CHECK(hopper.cost(op).seconds() == Approx(expected(0.33)).epsilon(1e-9));
    op.kind = model::OpKind::attention_bwd;
    CHECK(hopper.cost(op).seconds() == Approx(expected(0.26)).epsilon(1e-9));
}

TEST_CASE("one GPU: the step is exactly the sum of its kernels", "[executor]") {
    auto plan = test::small_plan(1, 1, 1, 4, 1);
    plan.cluster.nodes = 1;
    plan.cluster.gpus_per_node = 1;
    const auto g = model::build_workload(plan);
    const auto r = run(plan);
    // Nothing to wait for but the host: every idle gap of the GPU is the host issuing kernels.
    CHECK(r.step_time == compute_sum(plan, g, 0) + r.breakdown.host_bound);
    CHECK(r.breakdown.host_bound > Time());
    CHECK(r.breakdown.total() == r.step_time);
    CHECK(r.breakdown.bubble == Time());
    CHECK(r.breakdown.tp_exposed == Time());
}

TEST_CASE("symmetric ranks simulated once equal the full simulation", "[executor][symmetry]") {
    struct Case {
        int tp, pp, dp, vp, cp;
        model::Sharding sharding;
        model::Recompute recompute;
        bool tp_overlap;
    };
    const std::vector<Case> cases{
        {2, 2, 2, 1, 1, model::Sharding::dist_opt, model::Recompute::none, false},
        {2, 2, 1, 2, 1, model::Sharding::none, model::Recompute::selective, false},
        {1, 1, 4, 1, 1, model::Sharding::fsdp, model::Recompute::full, false},
        {2, 1, 2, 1, 2, model::Sharding::dist_opt, model::Recompute::none, true},
        {1, 2, 2, 1, 1, model::Sharding::zero1, model::Recompute::full, false},
        {1, 1, 8, 1, 1, model::Sharding::hsdp, model::Recompute::none, false},
        {2, 2, 2, 1, 1, model::Sharding::dist_opt, model::Recompute::none, false},  // with order pp-tp-cp-dp
    };
    for (const auto& c : cases) {
        auto plan = test::small_plan(c.tp, c.pp, c.dp, 16, 1);
        plan.parallel.vp = c.vp;
        plan.parallel.cp = c.cp;
        plan.parallel.sharding = c.sharding;
        plan.parallel.recompute = c.recompute;
        plan.parallel.tp_comm_overlap = c.tp_overlap;
        if (&c == &cases.back()) plan.parallel.order = model::RankOrder::pp_tp_cp_dp;
        const int gpus = c.tp * c.pp * c.dp * c.cp;
        plan.cluster.gpus_per_node = std::min(gpus, 4);  // several nodes so inter-node paths are used
        plan.cluster.nodes = gpus / plan.cluster.gpus_per_node;
        plan.cluster.nics_per_node = 4;
        CAPTURE(c.tp, c.pp, c.dp, c.vp, c.cp, model::to_string(c.sharding));
        const auto reduced = run(plan, false);
        const auto full = run(plan, true);
        CHECK(full.simulated_ranks == static_cast<std::size_t>(gpus));
        CHECK(reduced.simulated_ranks == static_cast<std::size_t>(c.pp));
        CHECK(full.step_time == reduced.step_time);
        CHECK(full.breakdown.total() == reduced.breakdown.total());
        CHECK(reduced.breakdown.total() == reduced.step_time);
    }
}

TEST_CASE("1F1B pipeline: step = (m + p - 1) x (t_f + t_b) with free communication", "[executor][pipeline]") {
    // Narayanan et al. SC'21 Sec. 2.2.1: bubble fraction (p-1)/m for equal stages.
    const auto plan = free_comm_pipeline(4, 8);
    const int m = plan.grad_accum(), p = 4;
    REQUIRE(m == 8);
    // Per micro-batch compute of the critical stage: its forward + backward kernel time / m.
    const auto r = run(plan);
    const double per_mb = (r.breakdown.compute().seconds()) / m;
    const double expected = (m + p - 1) * per_mb + r.breakdown.optimizer.seconds();
    CHECK(r.step_time.seconds() == Approx(expected).epsilon(0.02));
    CHECK(r.breakdown.bubble.seconds() == Approx((p - 1) * per_mb).epsilon(0.05));
}

TEST_CASE("a run that ends with work left names the stuck rank and op", "[executor]") {
    auto plan = test::small_plan(1, 2, 1, 2, 1);
    model::OpGraph g;
    g.pp = 2;
    g.protos.resize(2);
    g.protos[1].kind = model::OpKind::recv;
    g.protos[1].name = "recv_act";
    g.protos[1].bytes = model::Bytes(1e6);
    g.stages.resize(2);
    model::Op recv;
    recv.proto = 1;
    recv.stream = model::Stream::pp_recv_fwd;
    recv.peer_stage = 0;
    recv.tag = 5;
    g.stages[1].ops.push_back(recv);
    const sim::ComputeCost cc(plan.hardware);
    const auto net = sim::plan_network(plan);
    try {
        (void)sim::execute_step(plan, g, cc, net);
        FAIL("expected SimulationStuck");
    } catch (const sim::SimulationStuck& e) {
        const std::string msg = e.what();
        CHECK_THAT(msg, Catch::Contains("stage 1"));
        CHECK_THAT(msg, Catch::Contains("recv_act"));
        CHECK_THAT(msg, Catch::Contains("1 transfer(s) never matched"));
    }
}

TEST_CASE("block recompute of N of L layers costs N / L of full recompute", "[executor][recompute]") {
    // One GPU, no communication: the recompute category is exactly the recomputed layers' forward
    // kernels, the same kernels for every layer.
    auto plan = test::small_plan(1, 1, 1, 4, 1);
    const int L = plan.model.layers;
    plan.parallel.recompute = model::Recompute::full;
    const auto full = run(plan);
    REQUIRE(full.breakdown.recompute > Time());
    Time previous = full.step_time;
    for (int n = L - 1; n >= 1; --n) {
        plan.parallel.recompute_layers = n;
        const auto r = run(plan);
        INFO("recompute_layers " << n);
        CHECK(r.breakdown.recompute.seconds() == Approx(full.breakdown.recompute.seconds() * n / L).epsilon(1e-9));
        CHECK(r.breakdown.forward == full.breakdown.forward);
        CHECK(r.breakdown.backward == full.breakdown.backward);
        CHECK(r.step_time < previous);
        previous = r.step_time;
    }
    plan.parallel.recompute = model::Recompute::none;
    plan.parallel.recompute_layers = 0;
    CHECK(run(plan).step_time < previous);
}

TEST_CASE("sequence parallelism and tensor parallelism expose TP communication", "[executor]") {
    auto plan = test::small_plan(4, 1, 2, 16, 1);
    plan.cluster.gpus_per_node = 8;
    plan.cluster.nodes = 1;
    const auto r = run(plan);
    CHECK(r.breakdown.tp_exposed > Time());
    // With TP comm overlap the exposed TP time shrinks.
    plan.parallel.tp_comm_overlap = true;
    const auto o = run(plan);
    CHECK(o.breakdown.tp_exposed < r.breakdown.tp_exposed);
    CHECK(o.step_time < r.step_time);
}

TEST_CASE("TP comm overlap runs Transformer Engine's chunked GEMMs and exposes the last reduce-scatter chunk",
          "[executor][tp]") {
    auto plan = test::small_plan(4, 1, 2, 16, 1);
    plan.parallel.tp_comm_overlap = true;
    const auto g = model::build_workload(plan);
    const sim::ComputeCost cc(plan.hardware);
    auto proto = [&](const std::string& name) -> const model::OpProto& {
        for (const auto& p : g.protos)
            if (p.name == name) return p;
        FAIL("no proto " << name);
        return g.protos.front();
    };
    // Ring exchange (qkv_fprop, fc1_fprop, proj_dgrad, fc2_dgrad): one chunk of rows per TP rank;
    // pipelined GEMM + reduce-scatter (proj_fprop, fc2_fprop): num_splits = 4.
    for (const char* n : {"qkv", "fc1", "attn_out_dgrad", "fc2_dgrad"}) CHECK(proto(n).splits == 4);
    for (const char* n : {"attn_out", "fc2"}) CHECK(proto(n).splits == 4);
    for (const char* n : {"qkv_dgrad", "qkv_wgrad", "fc1_dgrad", "fc1_wgrad", "fc2_wgrad"}) CHECK(proto(n).splits == 1);
    // A split GEMM costs its chunks back to back.
    const auto& fc1 = proto("fc1");
    CHECK(cc.cost(fc1) == cc.gemm(fc1.precision, fc1.m / 4, fc1.n, fc1.k) * 4);
    CHECK(cc.cost(fc1) > cc.gemm(fc1.precision, fc1.m, fc1.n, fc1.k));
    // The reduce-scatter after the row-parallel GEMM: 3 chunks beside it, the last after it.
    const double full = 2.0 * plan.training.micro_batch * plan.training.seq_len * plan.model.hidden;
    CHECK(proto("mlp_sp_rs").bytes.value() == Approx(0.75 * full));
    CHECK(proto("mlp_sp_rs_tail").bytes.value() == Approx(0.25 * full));
    const auto& ops = g.stages[0].ops;
    const auto& deps = g.stages[0].deps;
    int tails = 0;
    for (std::size_t i = 0; i < ops.size(); ++i) {
        if (g.protos[ops[i].proto].name != "mlp_sp_rs_tail") continue;
        ++tails;
        REQUIRE(ops[i].dep_count == 1);
        CHECK(g.protos[ops[deps[ops[i].dep_begin]].proto].name == "fc2");
    }
    CHECK(tails == plan.grad_accum() * plan.model.layers); // every layer's forward, every micro-batch
}

TEST_CASE("an oversubscribed spine written in the scenario slows cross-leaf data parallelism", "[executor][network]") {
    // 64 nodes of 8 H100, 2 nodes per leaf: DP rings cross leaves; TP stays inside the node.
    const std::string base = R"(
model: llama2-7b
training: {tokens: 1T, seq_len: 4096, global_batch: 512, micro_batch: 1}
parallel: {tp: 8, sequence_parallel: true, sharding: none, overlap_grad_reduce: false}
cluster: {gpu: h100-sxm, nodes: 64, gpus_per_node: 8, nodes_per_leaf: 2)";
    model::LoadOptions opts;
    opts.data_dir = TRAINSIM_TEST_DATA_DIR;
    const auto flat = model::load_scenario_text(base + "}\n", "flat.yaml", opts).plans.front();
    const auto over = model::load_scenario_text(base + ", oversubscription: 4}\n", "over.yaml", opts).plans.front();
    CHECK(over.cluster.oversubscription == 4.0);
    const auto a = sim::estimate_plan(flat);
    const auto b = sim::estimate_plan(over);
    REQUIRE(a.step);
    REQUIRE(b.step);
    CHECK(b.step->breakdown.dp_exposed.seconds() > 1.5 * a.step->breakdown.dp_exposed.seconds());
    CHECK(b.step->breakdown.tp_exposed == a.step->breakdown.tp_exposed);
    // Below 1 is not a fat tree: a load error naming the key.
    CHECK_THROWS_AS(model::load_scenario_text(base + ", oversubscription: 0.5}\n", "bad.yaml", opts), model::ScenarioError);
}

TEST_CASE("the rank order decides which groups share a node", "[executor][network]") {
    // Megatron's tp-cp-dp-pp puts TP inside the node; cp-dp-tp-pp strides TP across nodes.
    const auto tp_default = model::rank_strides(model::Parallel{});
    CHECK(tp_default.tp == 1);
    model::Parallel p;
    p.tp = 8;
    p.cp = 2;
    p.dp = 4;
    p.pp = 2;
    p.order = model::RankOrder::cp_dp_tp_pp;
    const auto s = model::rank_strides(p);
    CHECK(s.cp == 1);
    CHECK(s.dp == 2);  // CP inside DP
    CHECK(s.tp == 8);  // after the CP x DP block of 2 x 4
    CHECK(s.pp == 64);
    p.order = model::RankOrder::tp_pp_cp_dp;
    const auto q = model::rank_strides(p);
    CHECK(q.tp == 1);
    CHECK(q.pp == 8);
    CHECK(q.cp == 16);
    CHECK(q.dp == 32);

    auto plan = test::small_plan(8, 1, 2, 16, 1);
    plan.cluster.gpus_per_node = 8;
    plan.cluster.nodes = 2;
    const auto inside = run(plan);
    plan.parallel.order = model::RankOrder::cp_dp_tp_pp;  // TP across the two nodes
    const auto across = run(plan);
    CHECK(across.breakdown.tp_exposed.seconds() > 1.5 * inside.breakdown.tp_exposed.seconds());
    CHECK(across.step_time > inside.step_time);
}

TEST_CASE("ZeRO-3 collectives through the list API pay one copy kernel per rank", "[executor][sharding]") {
    auto plan = test::small_plan(1, 1, 8, 8, 1);
    plan.parallel.sharding = model::Sharding::zero3;
    plan.parallel.fsdp_gathers_per_layer = 4;
    const auto flat = run(plan);
    plan.parallel.list_collectives = true;
    const auto g = model::build_workload(plan);
    const sim::ComputeCost cc(plan.hardware);
    int lists = 0;
    Time copies;  // every list collective's copies, as if none overlapped anything
    for (const auto& op : g.stages[0].ops) {
        const auto& p = g.protos[op.proto];
        if (p.name != "fsdp_ag" && p.name != "fsdp_rs") continue;
        ++lists;
        CHECK(p.copy_slices == 8);
        // Per rank a Python view (3.3 us) and a copy kernel (4 us in the test profile); the copies
        // move the buffer once: read + write at 0.8 x 3 TB/s.
        const double expected = 8 * (4e-6 + 3.3e-6) + 2.0 * p.bytes.value() / (0.8 * 3e12);
        CHECK(cc.slice_copies(p).seconds() == Approx(expected).epsilon(1e-6));  // whole picoseconds
        copies += cc.slice_copies(p);
    }
    CHECK(lists > 0);
    const auto listed = run(plan);
    CHECK(listed.step_time > flat.step_time);
    CHECK(listed.step_time <= flat.step_time + copies);
}

namespace {
// Bytes and count of one stage's collectives of a given name.
std::pair<double, int> collectives_named(const model::OpGraph& g, const std::string& name) {
    double bytes = 0;
    int n = 0;
    for (const auto& op : g.stages[0].ops)
        if (g.protos[op.proto].name == name) {
            bytes += g.protos[op.proto].bytes.value();
            ++n;
        }
    return {bytes, n};
}
model::Plan zero3_recompute_plan() {
    auto plan = test::small_plan(1, 1, 8, 16, 1); // 2 micro-batches
    plan.parallel.sharding = model::Sharding::zero3;
    plan.parallel.recompute = model::Recompute::full;
    plan.parallel.fsdp_gathers_per_layer = 4;
    return plan;
}
} // namespace

TEST_CASE("ZeRO-3 weights released after a layer's recompute are gathered again for its backward",
          "[executor][sharding][recompute]") {
    auto plan = zero3_recompute_plan();
    const auto kept = collectives_named(model::build_workload(plan), "fsdp_ag");
    const auto t_kept = run(plan).step_time;
    plan.parallel.fsdp_reuse_distance_params = 1; // every weight but FC2's is released
    const auto again = collectives_named(model::build_workload(plan), "fsdp_ag");
    const double regathered = model::regathered_after_recompute(plan.model, 1, 1);
    const int mbs = plan.grad_accum(), layers = plan.model.layers;
    REQUIRE(mbs == 2);
    // 2 B per parameter, every layer, every micro-batch; 3 of the 4 weight gathers repeated
    // (QKV + projection + FC1 are 33.6M of the layer's 50.3M weight parameters: 4 x 2/3 rounds to 3).
    CHECK(again.first - kept.first == Approx(2.0 * regathered * layers * mbs));
    CHECK(again.second - kept.second == 3 * layers * mbs);
    CHECK(run(plan).step_time > t_kept);
    // 0: every weight released, FC2's too: all 4 gathers repeated.
    plan.parallel.fsdp_reuse_distance_params = 0;
    const auto all = collectives_named(model::build_workload(plan), "fsdp_ag");
    CHECK(all.second - kept.second == 4 * layers * mbs);
    const auto w = model::layer_gemm_weights(plan.model);
    CHECK(all.first - kept.first == Approx(2.0 * (w[0] + w[1] + w[2] + w[3]) * layers * mbs));
    // Without recompute nothing is gathered twice.
    plan.parallel.recompute = model::Recompute::none;
    const auto no_rc = collectives_named(model::build_workload(plan), "fsdp_ag");
    plan.parallel.fsdp_reuse_distance_params = std::numeric_limits<double>::infinity();
    CHECK(collectives_named(model::build_workload(plan), "fsdp_ag") == no_rc);
}

TEST_CASE("ZeRO-3 module by module: each weight gathered before its GEMM, the next one beside it",
          "[executor][sharding]") {
    auto plan = zero3_recompute_plan();
    plan.parallel.recompute = model::Recompute::none;
    plan.parallel.fsdp_gathers_per_layer = 1;
    plan.cluster.gpus_per_node = 4; // two nodes: gathers slow enough to show
    plan.cluster.nodes = 2;
    plan.cluster.nics_per_node = 1;
    const auto layer_mode = collectives_named(model::build_workload(plan), "fsdp_ag");
    plan.parallel.fsdp_fetch = model::FsdpFetch::module;
    plan.parallel.fsdp_prefetch = false;
    const auto g = model::build_workload(plan);
    const auto modules = collectives_named(g, "fsdp_ag");
    const int mbs = plan.grad_accum(), layers = plan.model.layers;
    // 4 weights per layer in forward and in backward; the embedding and head as before. The bytes
    // are the layer's weights (its 2 norm vectors stay gathered).
    CHECK(modules.second - layer_mode.second == 2 * mbs * layers * 3);
    const double norms = 2.0 * 2.0 * plan.model.hidden * layers * mbs * 2; // 2 B, 2 vectors, 2 passes
    CHECK(modules.first == Approx(layer_mode.first - norms));
    // Every weight GEMM waits for a gather of its weight; without prefetch that gather waits for
    // the kernel before the GEMM.
    const auto& ops = g.stages[0].ops;
    const auto& deps = g.stages[0].deps;
    int gemms = 0;
    for (std::size_t i = 0; i < ops.size(); ++i) {
        const auto& name = g.protos[ops[i].proto].name;
        if (name != "qkv" && name != "attn_out" && name != "fc1" && name != "fc2" && name != "fc2_dgrad" &&
            name != "fc1_dgrad" && name != "attn_out_dgrad" && name != "qkv_dgrad")
            continue;
        ++gemms;
        bool waits = false;
        for (std::uint32_t d = 0; d < ops[i].dep_count; ++d)
            waits = waits || g.protos[ops[deps[ops[i].dep_begin + d]].proto].name == "fsdp_ag";
        CAPTURE(name, i);
        CHECK(waits);
    }
    CHECK(gemms == 8 * mbs * layers);
    const auto serial = run(plan).step_time;
    plan.parallel.fsdp_prefetch = true;
    CHECK(collectives_named(model::build_workload(plan), "fsdp_ag") == modules);
    CHECK(run(plan).step_time < serial);
    // Under recompute the backward fetches only what the recompute released: QKV, projection and
    // FC1 at a 1-parameter reuse distance, besides the recompute's 4.
    plan.parallel.recompute = model::Recompute::full;
    plan.parallel.fsdp_reuse_distance_params = 1;
    CHECK(collectives_named(model::build_workload(plan), "fsdp_ag").second - layer_mode.second ==
          mbs * layers * (4 + 4 + 3) - 2 * mbs * layers);
    // A layer's weights come in 4 gathers of their own in this mode; fsdp_gathers_per_layer is
    // for fsdp_fetch: layer.
    plan.parallel.fsdp_gathers_per_layer = 4;
    CHECK_FALSE(model::check_layout(plan).empty());
}

TEST_CASE("ZeRO-3 gradients reduced per tensor: more collectives, the same bytes", "[executor][sharding]") {
    auto plan = zero3_recompute_plan();
    const auto one = collectives_named(model::build_workload(plan), "fsdp_rs");
    plan.parallel.fsdp_reduce_scatters_per_layer = 12;
    const auto twelve = collectives_named(model::build_workload(plan), "fsdp_rs");
    const int mbs = plan.grad_accum(), layers = plan.model.layers;
    // Per micro-batch: one per layer + the embedding + the head, or 12 per layer.
    CHECK(one.second == mbs * (layers + 2));
    CHECK(twelve.second == mbs * (12 * layers + 2));
    CHECK(twelve.first == Approx(one.first));
}

TEST_CASE("ZeRO-3 gathers behind a device synchronize wait for the reduce-scatters issued before them",
          "[executor][sharding]") {
    auto plan = zero3_recompute_plan();
    plan.cluster.gpus_per_node = 4; // two nodes: collectives slow enough to matter
    plan.cluster.nodes = 2;
    plan.cluster.nics_per_node = 1;
    const auto free_running = run(plan).step_time;
    plan.parallel.fsdp_gather_sync = true;
    const auto g = model::build_workload(plan);
    const auto& ops = g.stages[0].ops;
    const auto& deps = g.stages[0].deps;
    std::uint32_t last_rs = 0;
    bool seen_rs = false;
    int gathers_after_rs = 0;
    for (std::uint32_t i = 0; i < ops.size(); ++i) {
        const auto& name = g.protos[ops[i].proto].name;
        if (name == "fsdp_rs") {
            last_rs = i;
            seen_rs = true;
        } else if (name == "fsdp_ag" && seen_rs) {
            ++gathers_after_rs;
            const auto b = deps.begin() + ops[i].dep_begin;
            CHECK(std::find(b, b + ops[i].dep_count, last_rs) != b + ops[i].dep_count);
        }
    }
    CHECK(gathers_after_rs > 0);
    CHECK(run(plan).step_time > free_running);
}

TEST_CASE("a ZeRO-3 prefetch bucket smaller than one gather still prefetches that gather", "[executor][sharding]") {
    // DeepSpeed's prefetcher adds parameters while the bucket is not yet full (2021:
    // get_params_to_prefetch; 0.6+: fetch_sub_module), so it always takes at least one.
    auto plan = test::small_plan(1, 1, 8, 8, 1);
    plan.parallel.sharding = model::Sharding::zero3;
    plan.parallel.fsdp_gathers_per_layer = 4;
    plan.cluster.gpus_per_node = 4;  // two nodes: gathers slow enough to show
    plan.cluster.nodes = 2;
    plan.cluster.nics_per_node = 1;
    const auto whole_layer = run(plan);
    plan.parallel.fsdp_prefetch_bucket_params = 1;
    const auto tiny_bucket = run(plan);
    plan.parallel.fsdp_prefetch_bucket_params = 0;
    plan.parallel.fsdp_prefetch = false;
    const auto none = run(plan);
    CHECK(tiny_bucket.step_time < none.step_time);
    CHECK(whole_layer.step_time < tiny_bucket.step_time);
}

TEST_CASE("interleaved 1F1B: the bubble shrinks to (p - 1) / v micro-batches with free communication",
          "[executor][pipeline]") {
    // Narayanan et al. SC'21 Sec. 2.2.2: with v model chunks per stage the bubble is
    // (p - 1) / v of a micro-batch's forward + backward time.
    for (int v : {2, 4}) {
        auto plan = free_comm_pipeline(4, 16);
        plan.model.layers = 16;
        plan.parallel.vp = v;
        const int m = plan.grad_accum(), p = 4;
        REQUIRE(m == 16);
        const auto r = run(plan);
        const double per_mb = r.breakdown.compute().seconds() / m;
        CAPTURE(v);
        // The first chunk also runs the embedding and the last the final norm, head and loss;
        // with one layer per chunk (v = 4) they lengthen the critical chunk by a few percent.
        CHECK(r.breakdown.bubble.seconds() >= (p - 1) * per_mb / v);
        CHECK(r.breakdown.bubble.seconds() == Approx((p - 1) * per_mb / v).epsilon(0.08));
    }
}

TEST_CASE("the scatter/gather all-gather after a pipeline receive is exposed pipeline time", "[executor][pipeline]") {
    // tp 8 inside each node, pp 2 across two nodes, no SP. With scatter/gather each rank sends
    // 1/8 of the activation over the network but waits for an NVLink all-gather of all of it
    // before computing: counted as exposed PP time, and the step's parts still add up.
    auto plan = test::small_plan(8, 2, 1, 8, 1);
    plan.parallel.sequence_parallel = false;
    const auto whole = run(plan);
    plan.parallel.pp_scatter_gather = true;
    const auto sg = run(plan);
    CHECK(sg.breakdown.total() == sg.step_time);
    CHECK(whole.breakdown.total() == whole.step_time);
    CHECK(sg.breakdown.tp_exposed == whole.breakdown.tp_exposed);
    CHECK(sg.breakdown.pp_exposed > Time());
}

TEST_CASE("blocking pipeline sends never make a step faster", "[executor][pipeline]") {
    // A blocking send waits for its transfer and for the peer to post the matching receive
    // (NCCL send/recv rendezvous), so it can only delay the sender's next kernel.
    auto plan = test::small_plan(1, 4, 1, 8, 1);
    plan.cluster.gpus_per_node = 1;  // every stage on its own node: sends cross the network
    plan.cluster.nodes = 4;
    plan.cluster.nics_per_node = 1;
    const auto overlapped = run(plan);
    plan.parallel.overlap_p2p = false;
    const auto blocking = run(plan);
    CHECK(blocking.step_time > overlapped.step_time);
    CHECK(blocking.breakdown.total() == blocking.step_time);
}

namespace {
// One stage of `n` memory-bound kernels of `bytes` each in program order on the compute stream;
// the op at `sync` (if any) is one the host waits for.
model::OpGraph kernel_chain(int n, double bytes, int sync = -1) {
    model::OpGraph g;
    g.protos.emplace_back(); // id 0: none
    model::OpProto k;
    k.kind = model::OpKind::memory;
    k.name = "k";
    k.bytes = model::Bytes(bytes);
    g.protos.push_back(k);
    k.host_sync = true;
    g.protos.push_back(k);
    model::StageProgram st;
    for (int i = 0; i < n; ++i) {
        model::Op op;
        op.proto = i == sync ? 2 : 1;
        st.ops.push_back(op);
    }
    g.stages.push_back(st);
    return g;
}
sim::StepResult run_graph(const model::Plan& plan, const model::OpGraph& g) {
    const sim::ComputeCost cc(plan.hardware);
    return sim::execute_step(plan, g, cc, sim::plan_network(plan));
}
model::Plan one_gpu_plan() {
    auto plan = test::small_plan(1, 1, 1, 4, 1);
    plan.cluster.nodes = 1;
    plan.cluster.gpus_per_node = 1;
    return plan;
}
} // namespace

TEST_CASE("the host issues kernels in order: short kernels wait for it, long ones hide it", "[executor][host]") {
    const auto plan = one_gpu_plan(); // Megatron-Core on Transformer Engine: 10 us per forward launch
    const auto hc = model::host_costs(plan.parallel.host_dispatch);
    REQUIRE(hc.forward_launch == Time::us(10.0));
    const sim::ComputeCost cc(plan.hardware);
    SECTION("kernels shorter than a launch: the GPU starves, the step is the host's") {
        const auto g = kernel_chain(100, 0.0); // each kernel is the 4 us kernel overhead alone
        const Time k = cc.cost(g.protos[1]);
        REQUIRE(k < hc.forward_launch);
        const auto r = run_graph(plan, g);
        // Kernel i starts when the host has issued it, (i + 1) launches in, and runs k.
        CHECK(r.step_time == hc.forward_launch * 100 + k);
        CHECK(r.breakdown.host_bound == r.step_time - k * 100);
        CHECK(r.host_busy == hc.forward_launch * 100);
    }
    SECTION("kernels longer than a launch: the host runs ahead and costs only the first launch") {
        const auto g = kernel_chain(100, 2.4e9); // 1 ms each on the test profile
        const Time k = cc.cost(g.protos[1]);
        const auto r = run_graph(plan, g);
        CHECK(r.step_time == hc.forward_launch + k * 100);
        CHECK(r.breakdown.host_bound == hc.forward_launch);
    }
    SECTION("a host sync (.item()) stops the host until its kernel is done") {
        const auto g = kernel_chain(100, 2.4e9, 49);
        const Time k = cc.cost(g.protos[1]);
        const auto r = run_graph(plan, g);
        // The 51st kernel is issued one launch after the 50th ends: the GPU idles for it.
        CHECK(r.step_time == hc.forward_launch * 2 + k * 100);
        CHECK(r.breakdown.host_bound == hc.forward_launch * 2);
    }
}

TEST_CASE("a slower host CPU issues the same launches in proportionally more time", "[executor][host]") {
    // node.host_cpu_speed: the host costs are the reference CPU's; a node whose CPU runs at 0.8
    // of it takes 1/0.8 as long per launch. With kernels shorter than a launch the step is the
    // host's: 100 launches / speed + the last kernel.
    auto plan = one_gpu_plan();
    const auto hc = model::host_costs(plan.parallel.host_dispatch);
    const sim::ComputeCost cc(plan.hardware);
    const auto g = kernel_chain(100, 0.0);
    const Time k = cc.cost(g.protos[1]);
    plan.hardware.host_cpu_speed = 0.8;
    const auto r = run_graph(plan, g);
    const Time launch = Time::from_seconds(hc.forward_launch.seconds() / 0.8);
    CHECK(r.host_busy == launch * 100);
    CHECK(r.step_time == launch * 100 + k);
}

namespace {
// Runs `g` with a trace and checks, for every op named `wait`, that the host issues the op after
// it only once the wait has run on the GPU. Returns how many waits were checked and the step time.
struct WaitsChecked {
    int checked = 0;
    Time step_time;
};
WaitsChecked check_issued_after_waits(const model::Plan& plan, const model::OpGraph& g, const std::string& wait) {
    const auto& ops = g.stages[0].ops;
    const sim::ComputeCost cc(plan.hardware);
    sim::ExecOptions opt;
    opt.record_trace = true;
    const auto r = sim::execute_step(plan, g, cc, sim::plan_network(plan), opt);
    std::vector<const sim::TraceEvent*> by_op(ops.size(), nullptr);
    for (const auto& e : r.trace)
        if (e.rank == 0) by_op[e.op] = &e;
    WaitsChecked out;
    out.step_time = r.step_time;
    for (std::size_t i = 0; i + 1 < ops.size(); ++i) {
        if (g.protos[ops[i].proto].name != wait) continue;
        REQUIRE(by_op[i] != nullptr);
        REQUIRE(by_op[i + 1] != nullptr);
        CHECK(by_op[i + 1]->host_start >= by_op[i]->end);
        ++out.checked;
    }
    return out;
}
} // namespace

TEST_CASE("a layer that waits for the GPU before its MLP: the MLP is issued after everything before it ran",
          "[executor][host]") {
    // Megatron-DeepSpeed's torch.tensor(0.0, device=...) scalars (Parallel::host_sync_layer):
    // one blocking op per layer forward and per recompute, between the post-attention LayerNorm
    // and fc1, two host launches; none in the backward pass.
    auto plan = test::small_plan(2, 1, 1, 4, 1);
    plan.parallel.host_dispatch = model::HostDispatch::legacy;
    plan.parallel.recompute = model::Recompute::full;
    plan.parallel.sequence_parallel = false;
    plan.parallel.host_sync_layer = true;
    const auto g = model::build_workload(plan);
    const auto& ops = g.stages[0].ops;
    const int passes = plan.grad_accum() * plan.model.layers * 2; // forward + recompute
    int syncs = 0;
    for (std::size_t i = 0; i + 1 < ops.size(); ++i) {
        const auto& p = g.protos[ops[i].proto];
        if (p.name != "layer_scalar_sync") continue;
        ++syncs;
        CHECK(p.host_sync);
        CHECK(p.launches == 2);
        CHECK(ops[i].stream == model::Stream::compute);
        CHECK(ops[i].category != model::Category::backward);
        CHECK(g.protos[ops[i - 1].proto].name == "residual_ln2");
        CHECK(g.protos[ops[i + 1].proto].name == "fc1");
    }
    CHECK(syncs == passes);
    // In the executor fc1 is issued by the host only once the sync op (and, stream-ordered, the
    // attention block and its TP all-reduce before it) has run on the GPU.
    const auto waited = check_issued_after_waits(plan, g, "layer_scalar_sync");
    CHECK(waited.checked == passes);
    // And the host's wait costs time: the same plan without it is faster.
    plan.parallel.host_sync_layer = false;
    CHECK(run(plan).step_time < waited.step_time);
}

TEST_CASE("bare tensor ops from a Python loop cost the measured bare-op time on every dispatch path",
          "[executor][host]") {
    // OpProto::plain_ops (an optimizer's per-tensor copies): HostCosts::plain_op per launch, the
    // host-bench median of a no-grad op (2.6 us) plus the CUDA launch (2.5 us), not the model
    // code's per-launch cost; divided by the node's CPU speed like every host cost.
    for (const auto d : {model::HostDispatch::legacy, model::HostDispatch::te}) {
        auto plan = one_gpu_plan();
        plan.parallel.host_dispatch = d;
        plan.hardware.host_cpu_speed = 0.8;
        const auto hc = model::host_costs(d);
        CHECK(hc.plain_op == Time::us(5.1));
        auto g = kernel_chain(10, 0.0);
        g.protos[1].plain_ops = true;
        g.protos[1].launches = 3;
        const auto r = run_graph(plan, g);
        CHECK(r.host_busy == Time::from_seconds(5.1e-6 / 0.8) * 30);
    }
}

TEST_CASE("DeepSpeed's FP16 optimizer without ZeRO works tensor by tensor: a host read per tensor, copies to "
          "FP32 and back",
          "[workload][host]") {
    auto plan = test::small_plan(1, 1, 2, 4, 1);
    plan.precision = model::Precision::fp16;
    plan.parallel.sharding = model::Sharding::none;
    plan.parallel.optimizer_per_tensor = true;
    const auto g = model::build_workload(plan);
    const auto params = model::count_params(plan.model);
    // tp 1, pp 1: the rank holds every layer, the embedding and the head (the workload's units;
    // the final norm's vector is not one of them).
    const double local = params.total - params.final_norm;
    const int layers = plan.model.layers;
    // Megatron-LM 2021's layer, the embedding, the head: its final norm and its output weight
    // unless tied to the embedding on the same stage.
    const int tensors = 12 * layers + 2 + 2 + (plan.model.tied_embeddings ? 0 : 1);
    int checks = 0, check_launches = 0;
    double check_bytes = 0;
    const model::OpProto* flat = nullptr;
    const model::OpProto* back = nullptr;
    for (const auto& op : g.stages[0].ops) {
        const auto& p = g.protos[op.proto];
        if (p.name == "overflow_check") {
            ++checks;
            check_launches += p.launches;
            check_bytes += p.bytes.value();
            CHECK(p.host_sync);
            CHECK(p.plain_ops);
            CHECK(op.category == model::Category::optimizer);
        }
        if (p.name == "grads_to_fp32_flat") flat = &p;
        if (p.name == "params_copy_back") back = &p;
    }
    CHECK(checks == layers + 2); // one wait per unit: every layer, the embedding, the head
    CHECK(check_launches == 3 * tensors);
    CHECK(check_bytes == Approx(10.0 * local).epsilon(1e-9));
    REQUIRE(flat != nullptr);
    REQUIRE(back != nullptr);
    CHECK(flat->launches == tensors + 1);
    CHECK(flat->bytes.value() == Approx(14.0 * local).epsilon(1e-9));
    CHECK(back->launches == tensors);
    CHECK(back->bytes.value() == Approx(6.0 * local).epsilon(1e-9));
    CHECK(back->plain_ops);
    // Only DeepSpeed's FP16_Optimizer: not in BF16, not under ZeRO.
    for (const auto& [prec, shard] : {std::pair{model::Precision::bf16, model::Sharding::none},
                                      std::pair{model::Precision::fp16, model::Sharding::zero1}}) {
        auto other = plan;
        other.precision = prec;
        other.parallel.sharding = shard;
        const auto go = model::build_workload(other);
        for (const auto& op : go.stages[0].ops) CHECK(go.protos[op.proto].name != "overflow_check");
    }
    // And it costs time: the same plan with the flat optimizer is faster.
    auto flat_plan = plan;
    flat_plan.parallel.optimizer_per_tensor = false;
    CHECK(run(flat_plan).step_time < run(plan).step_time);
}

TEST_CASE("gradient accumulation as a pass of its own: Megatron-LM 2021's DDP hook, autograd's adds, DeepSpeed's "
          "BF16_Optimizer",
          "[workload][grad-accumulation]") {
    // tp 1, pp 1, dp 1, 4 micro-batches: the rank holds every layer, the embedding and the head,
    // and no gradient reduction overlaps the backward.
    auto plan = test::small_plan(1, 1, 1, 4, 1);
    plan.parallel.sharding = model::Sharding::none;
    const int mbs = plan.grad_accum();
    REQUIRE(mbs == 4);
    const auto params = model::count_params(plan.model);
    const int layers = plan.model.layers;
    const double local = params.total - params.final_norm;  // the workload's units (see above)
    struct Found {
        int ops = 0;
        double bytes = 0;
        int launches = 0;
        bool plain = true;
        int per_mb[4] = {0, 0, 0, 0};
    };
    auto find = [](const model::OpGraph& g, const std::string& name) {
        Found f;
        for (const auto& op : g.stages[0].ops) {
            const auto& p = g.protos[op.proto];
            if (p.name != name) continue;
            ++f.ops;
            f.bytes += p.bytes.value();
            f.launches += p.launches;
            f.plain = f.plain && p.plain_ops;
            ++f.per_mb[op.microbatch];
            CHECK(op.category == model::Category::backward);
        }
        return f;
    };
    // Megatron-LM 2021 local DDP: main_grad.add_(grad) after every micro-batch, per unit: read the
    // 16-bit gradient, read and write the buffer (FP16 with --fp16: 2 + 2 + 2 B; FP32 with --bf16:
    // 2 + 4 + 4 B).
    plan.parallel.grad_accumulation = model::GradAccumulation::megatron_ddp;
    for (const auto& [prec, bytes] : {std::pair{model::Precision::fp16, 6.0}, std::pair{model::Precision::bf16, 10.0}}) {
        plan.precision = prec;
        const auto f = find(model::build_workload(plan), "grad_accum");
        CHECK(f.ops == (layers + 2) * mbs);
        CHECK(f.bytes == Approx(bytes * local * mbs).epsilon(1e-9));
        // One add per tensor launched (te dispatch); the legacy path counts them in its backward.
        CHECK(f.launches == (12 * layers + 2 + 2 + (plan.model.tied_embeddings ? 0 : 1)) * mbs);
        for (int mb = 0; mb < mbs; ++mb) CHECK(f.per_mb[mb] == layers + 2);
        auto legacy = plan;
        legacy.parallel.host_dispatch = model::HostDispatch::legacy;
        CHECK(find(model::build_workload(legacy), "grad_accum").launches == 0);
    }
    // PyTorch's AccumulateGrad: the first micro-batch takes the new gradient as .grad, the others
    // add it in (2 + 2 + 2 B); DeepSpeed's engine in FP16, with or without ZeRO-1, does that.
    for (const auto& [acc, shard] : {std::pair{model::GradAccumulation::autograd, model::Sharding::none},
                                     std::pair{model::GradAccumulation::deepspeed, model::Sharding::none},
                                     std::pair{model::GradAccumulation::deepspeed, model::Sharding::zero1}}) {
        plan.parallel.grad_accumulation = acc;
        plan.parallel.sharding = shard;
        plan.precision = model::Precision::fp16;
        const auto f = find(model::build_workload(plan), "grad_accum");
        CHECK(f.ops == (layers + 2) * (mbs - 1));
        CHECK(f.per_mb[0] == 0);
        CHECK(f.bytes == Approx(6.0 * local * (mbs - 1)).epsilon(1e-9));
        CHECK(find(model::build_workload(plan), "grad_accum_fp32").ops == 0);
    }
    // DeepSpeed's BF16_Optimizer (BF16, ZeRO 0 or 1): after each micro-batch's backward, one loop over
    // the rank's tensors, hp_grad.add_(lp.grad.to(float32)): 2 + 4 + 4 + 4 + 4 = 18 B per parameter,
    // two bare ops per tensor (12 per layer, 2 for the embedding, the head's 2 and its output weight
    // unless tied on this stage).
    plan.parallel.grad_accumulation = model::GradAccumulation::deepspeed;
    plan.precision = model::Precision::bf16;
    const int tensors = 12 * layers + 2 + 2 + (plan.model.tied_embeddings ? 0 : 1);
    for (const auto shard : {model::Sharding::none, model::Sharding::zero1}) {
        plan.parallel.sharding = shard;
        const auto g = model::build_workload(plan);
        const auto f = find(g, "grad_accum_fp32");
        CHECK(f.ops == mbs);
        CHECK(f.bytes == Approx(18.0 * local * mbs).epsilon(1e-9));
        CHECK(f.launches == 2 * tensors * mbs);
        CHECK(f.plain);
        for (int mb = 0; mb < mbs; ++mb) CHECK(f.per_mb[mb] == 1);
        CHECK(find(g, "grad_accum").ops == 0);
    }
    // Sharded gradients (ZeRO-2: reduce-scattered every micro-batch) and the fused path (Megatron-Core's
    // wgrad GEMM accumulating into main_grad) take no pass of their own.
    plan.parallel.sharding = model::Sharding::zero2;
    for (const auto prec : {model::Precision::bf16, model::Precision::fp16}) {
        plan.precision = prec;
        const auto g2 = model::build_workload(plan);
        CHECK(find(g2, "grad_accum_fp32").ops + find(g2, "grad_accum").ops == 0);
    }
    plan.precision = model::Precision::bf16;
    plan.parallel.sharding = model::Sharding::none;
    plan.parallel.grad_accumulation = model::GradAccumulation::fused;
    const auto fused = model::build_workload(plan);
    CHECK(find(fused, "grad_accum").ops + find(fused, "grad_accum_fp32").ops == 0);
    // The pass costs GPU time: each op reads and writes its bytes at the profile's HBM rate, so a
    // GPU-bound step is longer by at least the BF16_Optimizer loop's bytes at that rate.
    auto accumulating = plan;
    accumulating.parallel.grad_accumulation = model::GradAccumulation::deepspeed;
    const double hbm = plan.hardware.hbm_bandwidth.value() * plan.hardware.hbm_efficiency;
    CHECK(run(accumulating).step_time.seconds() - run(plan).step_time.seconds() >= 18.0 * local * mbs / hbm * 0.999);
    // The BF16_Optimizer is ZeRO-1 of its own with ZeRO stage 0 or 1: over 2 data-parallel ranks it
    // all-reduces its FP32 gradients (4 B per parameter), updates half the Adam state and gathers the
    // BF16 weights (2 B); it holds BF16 and FP32 gradients (2 + 4 B per parameter) and half the
    // optimizer state (12 / 2 B).
    auto dp2 = test::small_plan(1, 1, 2, 8, 1);
    dp2.precision = model::Precision::bf16;
    dp2.parallel.grad_accumulation = model::GradAccumulation::deepspeed;
    for (const auto shard : {model::Sharding::none, model::Sharding::zero1}) {
        dp2.parallel.sharding = shard;
        REQUIRE(model::deepspeed_bf16_optimizer(dp2));
        CHECK(model::grad_bytes_per_param(dp2) == 4.0);
        const auto mem = model::stage_memory(dp2, 0);
        CHECK(mem.gradients.value() == Approx(6.0 * mem.local_params).epsilon(1e-9));
        CHECK(mem.optimizer.value() == Approx(12.0 * mem.local_params / 2).epsilon(1e-9));
        const auto g = model::build_workload(dp2);
        double reduced = 0, gathered = 0, scattered = 0;
        for (const auto& op : g.stages[0].ops) {
            const auto& p = g.protos[op.proto];
            if (p.kind != model::OpKind::collective) continue;
            if (p.collective == model::CollectiveOp::all_reduce && p.group == model::Group::dp_cp) reduced += p.bytes.value();
            if (p.collective == model::CollectiveOp::all_gather && p.group == model::Group::dp_cp) gathered += p.bytes.value();
            if (p.collective == model::CollectiveOp::reduce_scatter) scattered += p.bytes.value();
        }
        CHECK(reduced == Approx(4.0 * local).epsilon(1e-9));
        CHECK(gathered == Approx(2.0 * local).epsilon(1e-9));
        CHECK(scattered == 0.0);
    }
    // Not in FP16 (FP16_Optimizer), nor under ZeRO-2, nor for another stack's BF16.
    dp2.parallel.sharding = model::Sharding::zero2;
    CHECK_FALSE(model::deepspeed_bf16_optimizer(dp2));
    dp2.parallel.sharding = model::Sharding::none;
    dp2.precision = model::Precision::fp16;
    CHECK_FALSE(model::deepspeed_bf16_optimizer(dp2));
    dp2.precision = model::Precision::bf16;
    dp2.parallel.grad_accumulation = model::GradAccumulation::fused;
    CHECK_FALSE(model::deepspeed_bf16_optimizer(dp2));
    // A head tied to the embedding on the same stage is one tensor: the BF16_Optimizer's loop visits it
    // once (the per-unit adds charge autograd's two: the engine's sum of its two gradients, then .grad).
    auto tied = plan;
    tied.model.tied_embeddings = true;
    tied.parallel.grad_accumulation = model::GradAccumulation::deepspeed;
    {
        const auto pt = model::count_params(tied.model);
        const double tied_local = layers * pt.per_layer + pt.embedding;
        const auto f = find(model::build_workload(tied), "grad_accum_fp32");
        CHECK(f.bytes == Approx(18.0 * tied_local * mbs).epsilon(1e-9));
        CHECK(f.launches == 2 * (12 * layers + 2 + 2) * mbs);
    }
    // With the gradient reduction overlapped, the last micro-batch's reductions wait for the
    // BF16_Optimizer's loop, which completes the gradients they reduce.
    auto overlapped = test::small_plan(1, 1, 2, 8, 1);
    overlapped.precision = model::Precision::bf16;
    overlapped.parallel.sharding = model::Sharding::none;
    overlapped.parallel.overlap_grad_reduce = true;
    overlapped.parallel.grad_accumulation = model::GradAccumulation::deepspeed;
    {
        const auto g = model::build_workload(overlapped);
        const auto& ops = g.stages[0].ops;
        const auto& deps = g.stages[0].deps;
        std::uint32_t last_pass = 0;
        int reductions = 0;
        for (std::uint32_t i = 0; i < ops.size(); ++i) {
            const auto& p = g.protos[ops[i].proto];
            if (p.name == "grad_accum_fp32") last_pass = i;
            if (p.name != "grad_ar") continue;
            ++reductions;
            bool waits = false;
            for (std::uint32_t d = 0; d < ops[i].dep_count; ++d) waits = waits || deps[ops[i].dep_begin + d] == last_pass;
            CHECK(waits);
        }
        CHECK(reductions > 0);
    }
    // Under a pipeline, interleaved or not, every stage and chunk skips autograd's add on its first
    // micro-batch and adds on the others.
    for (const int vp : {1, 2}) {
        auto piped = test::small_plan(1, 2, 1, 4, 1);
        piped.parallel.vp = vp;
        piped.precision = model::Precision::fp16;
        piped.parallel.sharding = model::Sharding::none;
        piped.parallel.grad_accumulation = model::GradAccumulation::autograd;
        const auto g = model::build_workload(piped);
        for (const auto& stage : g.stages) {
            std::map<std::pair<int, int>, int> adds;  // (chunk, micro-batch) -> ops
            for (const auto& op : stage.ops)
                if (g.protos[op.proto].name == "grad_accum") ++adds[{op.chunk, op.microbatch}];
            for (int c = 0; c < vp; ++c) {
                CHECK(adds[{c, 0}] == 0);
                for (int mb = 1; mb < piped.grad_accum(); ++mb) CHECK(adds[{c, mb}] > 0);
            }
        }
    }
    // Megatron-LM 2021 accumulates through its DDP hook, 2022 inside the GEMM, Megatron-DeepSpeed
    // through DeepSpeed's engine; Megatron-Core and FSDP stacks have no pass.
    CHECK(model::framework_profile("megatron-lm-2021").parallel.grad_accumulation == model::GradAccumulation::megatron_ddp);
    CHECK(model::framework_profile("megatron-lm-2022").parallel.grad_accumulation == model::GradAccumulation::fused);
    CHECK(model::framework_profile("megatron-deepspeed").parallel.grad_accumulation == model::GradAccumulation::deepspeed);
    for (const char* fw : {"megatron-core", "nemo", "llm-foundry", "torchtitan", "deepspeed"})
        CHECK(model::framework_profile(fw).parallel.grad_accumulation == model::GradAccumulation::fused);
}

TEST_CASE("the trainer's timers and its batch load make the host wait at each micro-batch's edges",
          "[executor][host]") {
    // Megatron-LM 2021-22's synchronizing timers around each micro-batch's forward and backward,
    // DeepSpeed's ThroughputTimer before each forward (Parallel::host_sync_microbatch), and
    // Megatron's get_batch / broadcast_data blocking copies (host_sync_batch), without a pipeline.
    auto plan = test::small_plan(2, 1, 1, 4, 1);
    plan.parallel.host_dispatch = model::HostDispatch::legacy;
    plan.parallel.sequence_parallel = false;
    plan.parallel.host_sync_batch = true;
    const int mbs = plan.grad_accum();
    REQUIRE(mbs == 4);
    auto names = [](const model::OpGraph& g) {
        std::vector<std::string> v;
        for (const auto& op : g.stages[0].ops) v.push_back(g.protos[op.proto].name);
        return v;
    };
    auto count = [](const std::vector<std::string>& v, const std::string& n) {
        return static_cast<int>(std::count(v.begin(), v.end(), n));
    };
    for (const auto mode : {model::MicrobatchSync::forward, model::MicrobatchSync::forward_backward}) {
        plan.parallel.host_sync_microbatch = mode;
        const auto g = model::build_workload(plan);
        const auto v = names(g);
        const int per_mb = mode == model::MicrobatchSync::forward ? 1 : 4;
        CHECK(count(v, "timer_sync") == per_mb * mbs);
        CHECK(count(v, "batch_load") == mbs);
        const auto& ops = g.stages[0].ops;
        for (std::size_t i = 0; i + 1 < ops.size(); ++i) {
            const auto& p = g.protos[ops[i].proto];
            if (p.name == "batch_load") {
                // After the forward's own timer start, before the embedding; ten launches, a wait.
                REQUIRE(i > 0);
                CHECK(v[i - 1] == "timer_sync");
                CHECK(v[i + 1] == "embedding");
                CHECK(p.launches == 10);
                CHECK(p.plain_ops);
                CHECK(p.host_sync);
                CHECK(p.bytes.value() == 2.0 * 8.0 * plan.training.micro_batch * plan.training.seq_len);
            }
            if (p.name == "timer_sync") {
                CHECK(p.host_sync);
                CHECK(p.launches == 0);
                CHECK(ops[i].stream == model::Stream::compute);
            }
        }
        // A synchronize has no kernel: no GPU time and no host launch.
        const sim::ComputeCost cc(plan.hardware);
        const auto sync = std::find(v.begin(), v.end(), "timer_sync") - v.begin();
        CHECK(cc.cost(g.protos[ops[static_cast<std::size_t>(sync)].proto]) == Time());
        // In the executor the embedding is issued only after the batch load ran on the GPU.
        CHECK(check_issued_after_waits(plan, g, "batch_load").checked == mbs);
    }
    // Megatron's waits add to DeepSpeed's, which add to none, and the batch load to each (same
    // kernels, more host waits).
    plan.parallel.host_sync_microbatch = model::MicrobatchSync::forward_backward;
    const Time both = run(plan).step_time;
    plan.parallel.host_sync_microbatch = model::MicrobatchSync::forward;
    const Time fwd = run(plan).step_time;
    plan.parallel.host_sync_microbatch = model::MicrobatchSync::none;
    const Time none = run(plan).step_time;
    plan.parallel.host_sync_batch = false;
    const Time neither = run(plan).step_time;
    CHECK(both > fwd);
    CHECK(fwd > none);
    CHECK(none > neither);
    // With a pipeline the transfers' own waits hold the host: none is emitted.
    auto piped = test::small_plan(1, 2, 1, 4, 1);
    piped.parallel.host_sync_microbatch = model::MicrobatchSync::forward_backward;
    piped.parallel.host_sync_batch = true;
    const auto gp = model::build_workload(piped);
    for (const auto& st : gp.stages)
        for (const auto& op : st.ops) {
            CHECK(gp.protos[op.proto].name != "timer_sync");
            CHECK(gp.protos[op.proto].name != "batch_load");
        }
}

TEST_CASE("backward kernels are issued by the autograd engine at its own launch cost", "[executor][host]") {
    auto plan = one_gpu_plan();
    plan.parallel.host_dispatch = model::HostDispatch::legacy;
    auto g = kernel_chain(10, 0.0);
    for (auto& op : g.stages[0].ops) op.category = model::Category::backward;
    g.protos[1].launches = 3; // e.g. a linear's dgrad, wgrad and bias-gradient sum
    const auto hc = model::host_costs(plan.parallel.host_dispatch);
    const sim::ComputeCost cc(plan.hardware);
    const auto r = run_graph(plan, g);
    CHECK(r.step_time == hc.backward_launch * 30 + cc.cost(g.protos[1]));
    CHECK(r.host_busy == hc.backward_launch * 30);
}

TEST_CASE("host launch counts follow each stack's model code", "[workload][host]") {
    auto plan = test::small_plan(2, 1, 1, 4, 1);
    auto launches = [&](model::HostDispatch d) {
        plan.parallel.host_dispatch = d;
        const auto g = model::build_workload(plan);
        long n = 0;
        for (const auto& op : g.stages[0].ops)
            if (g.protos[op.proto].kind != model::OpKind::collective && op.microbatch == 0 && op.chunk == 0)
                n += g.protos[op.proto].launches;
        return n;
    };
    // Per layer: Megatron-LM 2021 code launches 19 forward + 43 backward kernels, TE 12 + 19
    // (workload.cpp layer_launches), CUDA graphs the same kernels as TE.
    CHECK(launches(model::HostDispatch::legacy) > launches(model::HostDispatch::te));
    CHECK(launches(model::HostDispatch::eager) > launches(model::HostDispatch::compiled));
    CHECK(launches(model::HostDispatch::graphs) == launches(model::HostDispatch::te));
    const auto te = model::host_costs(model::HostDispatch::te);
    const auto graphs = model::host_costs(model::HostDispatch::graphs);
    CHECK(graphs.forward_launch < te.forward_launch);
}

TEST_CASE("Megatron-LM 2021's host cost per launch is the measured layer's host time over its kernels",
          "[workload][host]") {
    // bench/host-bench/epyc-2vcpu-torch1.13-cpu.json (scripts/host-bench): the layer's forward and
    // backward host times; per kernel over the 19 forward and 43 backward kernels the legacy
    // dispatch counts per layer, plus 2.5 us for cudaLaunchKernel (framework_profile.cpp).
    const auto j = nlohmann::json::parse(
        test::read_text(std::filesystem::path(TRAINSIM_SOURCE_DIR) / "bench/host-bench/epyc-2vcpu-torch1.13-cpu.json"));
    const double fwd = j.at("median").at("layer_fwd_no_grad").get<double>();
    const double bwd = j.at("median").at("layer_bwd").get<double>();
    const auto hc = model::host_costs(model::HostDispatch::legacy);
    CHECK(hc.forward_launch.seconds() == Approx(fwd / 19 + 2.5e-6).margin(0.1e-6));
    CHECK(hc.backward_launch.seconds() == Approx(bwd / 43 + 2.5e-6).margin(0.1e-6));
    // And the workload counts that many kernels per layer on that path (one micro-batch, no recompute).
    auto plan = test::small_plan(1, 1, 1, 1, 1);
    plan.model.layers = 1;
    plan.parallel.host_dispatch = model::HostDispatch::legacy;
    plan.parallel.attention = model::AttentionImpl::unfused;
    plan.parallel.recompute = model::Recompute::none;
    plan.parallel.sequence_parallel = false;
    plan.training.seq_len = 1024;
    const auto g = model::build_workload(plan);
    long fwd_k = 0, bwd_k = 0;
    for (const auto& op : g.stages[0].ops) {
        const auto& p = g.protos[op.proto];
        if (p.kind == model::OpKind::collective || p.kind == model::OpKind::send || p.kind == model::OpKind::recv) continue;
        const bool layer = p.name.rfind("embed", 0) != 0 && p.name.rfind("lm_head", 0) != 0 &&
                           p.name.rfind("cross_entropy", 0) != 0 && p.name != "final_ln" &&
                           p.name.rfind("optimizer", 0) != 0 && p.name != "grad_norm";
        if (!layer) continue;
        (op.category == model::Category::backward ? bwd_k : fwd_k) += p.launches;
    }
    CHECK(fwd_k == 19);
    CHECK(bwd_k == 43);
}
