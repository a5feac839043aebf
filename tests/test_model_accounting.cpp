// FLOPs, parameters and the activation-memory model against published closed forms.
#include "fixtures.hpp"
#include "trainsim/model/accounting/flops.hpp"
#include "trainsim/model/accounting/layout.hpp"
#include "trainsim/model/accounting/memory_model.hpp"
#include "trainsim/model/workload/workload.hpp"

#include <catch2/catch.hpp>

#include <algorithm>
#include <limits>
#include <map>
#include <string>
#include <vector>

using namespace trainsim::model;

namespace {
ModelArch gpt(int layers, int hidden, int heads) {
    ModelArch m;
    m.name = "gpt";
    m.layers = layers;
    m.hidden = hidden;
    m.heads = heads;
    m.kv_heads = heads;
    m.head_dim = hidden / heads;
    m.ffn = 4 * hidden;
    m.ffn_type = FfnType::gelu;
    m.vocab = 51200;
    return m;
}
ModelArch llama2(int layers, int hidden, int heads, int kv, int ffn) {
    ModelArch m;
    m.name = "llama";
    m.layers = layers;
    m.hidden = hidden;
    m.heads = heads;
    m.kv_heads = kv;
    m.head_dim = hidden / heads;
    m.ffn = ffn;
    m.ffn_type = FfnType::swiglu;
    m.vocab = 32000;
    return m;
}
} // namespace

TEST_CASE("parameter counts match the published Llama-2 checkpoints", "[flops]") {
    // Hugging Face meta-llama/Llama-2-7b-hf and -70b-hf: 6,738,415,616 and 68,976,648,192 parameters.
    CHECK(count_params(llama2(32, 4096, 32, 32, 11008)).total == 6738415616.0);
    CHECK(count_params(llama2(80, 8192, 64, 8, 28672)).total == 68976648192.0);
}

TEST_CASE("model FLOPs per token equal Megatron's closed form with non-causal attention", "[flops]") {
    // Narayanan et al. SC'21 eq. (3) without recompute: 72 l h^2 (1 + s/(6h) + V/(12 h l)) per token.
    for (auto [l, h, a] : {std::tuple{96, 12288, 96}, std::tuple{24, 2304, 24}, std::tuple{80, 8192, 64}}) {
        const auto m = gpt(l, h, a);
        const double s = 2048;
        const double expected = 72.0 * l * double(h) * h * (1.0 + s / (6.0 * h) + 51200.0 / (12.0 * h * l));
        CHECK(model_flops_per_token(m, 2048, false) == Approx(expected).epsilon(1e-12));
        // Causal attention does (s+1)/2 of the key positions per query.
        const double attn_noncausal = 12.0 * l * h * s;
        CHECK(model_flops_per_token(m, 2048, true) ==
              Approx(expected - attn_noncausal + attn_noncausal * (s + 1) / (2 * s)).epsilon(1e-12));
    }
}

TEST_CASE("activation memory reproduces Korthikanti et al. 2022 Table 2", "[memory]") {
    // arXiv 2205.05198 Sec. 4, per layer, 16-bit activations, with dropout, no flash attention:
    //   no parallelism       sbh (34 + 5as/h)
    //   TP                   sbh (10 + 24/t + 5as/(ht))
    //   TP + SP              sbh/t (34 + 5as/h)
    //   TP + selective       sbh (10 + 24/t)
    //   TP + SP + selective  sbh 34/t
    //   full recompute       2sbh (SP: /t)
    const ActivationOptions paper{.flash_attention = false, .dropout = true};
    // The paper's own models (Table 3): 22B, 175B, 530B, 1T with t = 8, s = 2048, b = 1 and 4.
    for (auto [l, h, a] : {std::tuple{48, 6144, 64}, std::tuple{96, 12288, 96}, std::tuple{105, 20480, 128},
                           std::tuple{128, 25600, 160}}) {
        const auto m = gpt(l, h, a);
        for (int b : {1, 4}) {
            const double s = 2048, t = 8, sbh = s * b * h, as_h = a * s / double(h);
            auto act = [&](int tp, bool sp, Recompute r) {
                return layer_activation_bytes(m, 2048, b, tp, sp, 1, r, Precision::bf16, paper).value();
            };
            CHECK(act(1, false, Recompute::none) == Approx(sbh * (34 + 5 * as_h)));
            CHECK(act(8, false, Recompute::none) == Approx(sbh * (10 + 24 / t + 5 * as_h / t)));
            CHECK(act(8, true, Recompute::none) == Approx(sbh / t * (34 + 5 * as_h)));
            CHECK(act(8, false, Recompute::selective) == Approx(sbh * (10 + 24 / t)));
            CHECK(act(8, true, Recompute::selective) == Approx(sbh * 34 / t));
            CHECK(act(8, false, Recompute::full) == Approx(2 * sbh));
            CHECK(act(8, true, Recompute::full) == Approx(2 * sbh / t));
        }
    }
}

TEST_CASE("pipeline schedules hold the in-flight micro-batches Korthikanti et al. derive", "[memory][schedule]") {
    // 1F1B: the first stage holds p micro-batches (Sec. 4.2.3); the last holds one.
    for (int p : {2, 4, 8}) {
        CHECK(peak_inflight_chunks(pipeline_schedule(0, p, 1, 4 * p)) == p);
        CHECK(peak_inflight_chunks(pipeline_schedule(p - 1, p, 1, 4 * p)) == 1);
    }
    // Interleaved with v chunks of L/(p v) layers: L (1 + (p-1)/(p v)) layers on the first stage,
    // i.e. p (v + 1) - 1 chunks.
    for (auto [p, v] : {std::pair{4, 2}, std::pair{8, 3}, std::pair{4, 5}}) {
        const int chunks = peak_inflight_chunks(pipeline_schedule(0, p, v, 4 * p));
        CHECK(chunks == p * (v + 1) - 1);
        const double L = p * v * 4.0;
        CHECK(chunks * L / (p * v) == Approx(L * (1.0 + (p - 1.0) / (p * v))));
    }
}

TEST_CASE("the in-flight peak's closed form equals the walk over the schedule", "[memory][schedule]") {
    // Every stage of every depth and interleaving the plan search tries, with micro-batch counts
    // around the all-warm-up case (m == pp) and the layout rule m % pp == 0 for vp > 1.
    for (int p = 1; p <= 16; ++p)
        for (int v = 1; v <= 6; ++v)
            for (int m = 1; m <= 4 * p + 3; ++m) {
                if (v > 1 && (p == 1 || m % p != 0)) continue;
                for (int stage = 0; stage < p; ++stage) {
                    CAPTURE(p, v, m, stage);
                    CHECK(peak_inflight_chunks(stage, p, v, m) ==
                          peak_inflight_chunks(pipeline_schedule(stage, p, v, m)));
                }
            }
}

TEST_CASE("pipeline schedules run every micro-batch forward before its backward, once", "[schedule]") {
    for (auto [p, v, m] : {std::tuple{4, 1, 8}, std::tuple{4, 2, 8}, std::tuple{2, 3, 4}, std::tuple{8, 1, 3}}) {
        for (int stage = 0; stage < p; ++stage) {
            const auto sched = pipeline_schedule(stage, p, v, m);
            REQUIRE(sched.size() == static_cast<std::size_t>(2 * m * v));
            std::vector<int> fwd(static_cast<std::size_t>(m * v), -1), bwd(static_cast<std::size_t>(m * v), -1);
            for (std::size_t i = 0; i < sched.size(); ++i) {
                auto& slot = (sched[i].forward ? fwd : bwd)[static_cast<std::size_t>(sched[i].microbatch * v + sched[i].chunk)];
                CHECK(slot == -1);
                slot = static_cast<int>(i);
            }
            for (std::size_t k = 0; k < fwd.size(); ++k) CHECK(fwd[k] < bwd[k]);
        }
    }
    // Megatron 1F1B on stage 0 of 4 with 6 micro-batches: F0 F1 F2 | F3 B0 F4 B1 F5 B2 | B3 B4 B5.
    const auto s = pipeline_schedule(0, 4, 1, 6);
    std::string seq;
    for (const auto& it : s) {
        seq.push_back(it.forward ? 'F' : 'B');
        seq += std::to_string(it.microbatch);
    }
    CHECK(seq == "F0F1F2F3B0F4B1F5B2B3B4B5");
}

TEST_CASE("weights and optimizer state follow the per-sharding bytes per parameter", "[memory]") {
    // Megatron-LM docs/distrib_optimizer.md: BF16 params + FP32 grads: 18 B/param without, 6 + 12/d
    // with the distributed optimizer.
    auto plan = trainsim::test::small_plan(1, 1, 8);
    plan.parallel.sharding = Sharding::none;
    const auto none = stage_memory(plan, 0);
    const double P = none.local_params;
    CHECK((none.weights + none.gradients + none.optimizer).value() == Approx(18.0 * P));
    plan.parallel.sharding = Sharding::dist_opt;
    const auto dist = stage_memory(plan, 0);
    CHECK((dist.weights + dist.gradients + dist.optimizer).value() == Approx((6.0 + 12.0 / 8) * P));
    CHECK(grad_bytes_per_param(plan) == 4.0);
    // A 16-bit gradient sync (NeMo's distributed_fused_adam, grad_sync_dtype bf16): 2 B gradients.
    plan.parallel.main_grads_fp32 = false;
    const auto dist16 = stage_memory(plan, 0);
    CHECK((dist16.weights + dist16.gradients + dist16.optimizer).value() == Approx((4.0 + 12.0 / 8) * P));
    CHECK(grad_bytes_per_param(plan) == 2.0);
    plan.parallel.main_grads_fp32 = true;
    plan.parallel.sharding = Sharding::zero2;
    const auto z2 = stage_memory(plan, 0);
    CHECK((z2.weights + z2.gradients + z2.optimizer).value() == Approx((2.0 + 14.0 / 8) * P));
    // ZeRO-3: the 16-bit shard plus the layer in use and what is prefetched of the next one
    // (the whole next layer, or at most the prefetch bucket).
    plan.parallel.sharding = Sharding::zero3;
    const auto z3 = stage_memory(plan, 0);
    const double unit = (z3.weights.value() - 2.0 * P / 8) / 4.0;
    CHECK(unit > 0);
    plan.parallel.fsdp_prefetch_bucket_params = unit / 4;
    plan.parallel.fsdp_gathers_per_layer = 4;
    CHECK(stage_memory(plan, 0).weights.value() == Approx(2.0 * P / 8 + 2.0 * (unit + unit / 4)));
    // A bucket smaller than one gather still prefetches that gather: half a unit, or all of it.
    plan.parallel.fsdp_gathers_per_layer = 2;
    CHECK(stage_memory(plan, 0).weights.value() == Approx(2.0 * P / 8 + 2.0 * (unit + unit / 2)));
    plan.parallel.fsdp_gathers_per_layer = 1;
    CHECK(stage_memory(plan, 0).weights.value() == Approx(2.0 * P / 8 + 2.0 * (unit + unit)));
    // Module by module the working copies are the largest weight (FC1 = FC2 = h x 4h here) and
    // the one prefetched beside it; gradients likewise one weight before its reduce-scatter.
    plan.parallel.fsdp_fetch = FsdpFetch::module;
    const double w = plan.model.hidden * 4.0 * plan.model.hidden;
    CHECK(stage_memory(plan, 0).weights.value() == Approx(2.0 * P / 8 + 2.0 * 2.0 * w));
    CHECK(stage_memory(plan, 0).gradients.value() == Approx(2.0 * P / 8 + 2.0 * w));
    plan.parallel.fsdp_fetch = FsdpFetch::layer;
    plan.parallel.fsdp_prefetch = false;
    CHECK(stage_memory(plan, 0).weights.value() == Approx(2.0 * P / 8 + 2.0 * unit));
}

TEST_CASE("DeepSpeed's FP16_Optimizer holds FP16 gradients, then their FP32 copies and flat buffer after backward",
          "[memory]") {
    // deepspeed/runtime/fp16/fused_optimizer.py, FP16_Optimizer.step: the FP16 .grad tensors
    // (2 B per parameter) stay until every one has been copied to FP32 (p.grad.to(float32), 4 B)
    // and the copies flattened into one buffer (_flatten_dense_tensors, 4 B): 8 B per parameter
    // on top, after the backward has freed the activations.
    auto plan = trainsim::test::small_plan(1, 1, 2);
    plan.precision = Precision::fp16;
    plan.parallel.sharding = Sharding::none;
    const auto megatron = stage_memory(plan, 0);
    const double P = megatron.local_params;
    CHECK(megatron.gradients.value() == Approx(4.0 * P)); // Megatron's FP32 main gradients
    CHECK(megatron.step_transient.value() == 0.0);
    plan.parallel.optimizer_per_tensor = true;
    CHECK(per_tensor_fp16_optimizer(plan));
    const auto ds = stage_memory(plan, 0);
    CHECK(ds.gradients.value() == Approx(2.0 * P));
    CHECK(ds.step_transient.value() == Approx(8.0 * P));
    CHECK(ds.weights.value() == Approx(megatron.weights.value()));
    CHECK(ds.optimizer.value() == Approx(megatron.optimizer.value()));
    // The peak is the larger phase: backward with the activations, or the step with the copies.
    const double rest = (ds.weights + ds.gradients + ds.optimizer + ds.fp8_buffers + ds.workspace + ds.reserved).value();
    CHECK(ds.total().value() == Approx(rest + std::max(ds.activations.value(), 8.0 * P)));
    // Small activations (one short micro-batch): the step sets the peak.
    plan.training.seq_len = 128;
    plan.training.micro_batch = 1;
    const auto short_mb = stage_memory(plan, 0);
    REQUIRE(short_mb.activations.value() < 8.0 * P);
    CHECK(short_mb.total().value() ==
          Approx((short_mb.weights + short_mb.gradients + short_mb.optimizer + short_mb.workspace + short_mb.reserved)
                     .value() +
                 8.0 * P));
    // Not in BF16 (DeepSpeed's BF16 optimizer) nor under ZeRO.
    plan.precision = Precision::bf16;
    CHECK_FALSE(per_tensor_fp16_optimizer(plan));
    CHECK(stage_memory(plan, 0).step_transient.value() == 0.0);
    plan.precision = Precision::fp16;
    plan.parallel.sharding = Sharding::zero1;
    CHECK_FALSE(per_tensor_fp16_optimizer(plan));
    CHECK(stage_memory(plan, 0).step_transient.value() == 0.0);
}

TEST_CASE("block recompute keeps the inputs of N layers per chunk and the full activations of the rest",
          "[memory][recompute]") {
    // Megatron --recompute-method block: the first N layers of each model chunk keep only their
    // input (2 B x tokens x hidden, split by SP), the other layers everything, plus one layer's
    // full activations while it is recomputed. One stage (first and last): the loss and
    // embedding buffers are the same under every policy, so differences cancel them.
    auto plan = trainsim::test::small_plan(2, 1, 1, 4, 1); // tp 2 + SP, 8 layers, one chunk
    const int L = plan.model.layers;
    const auto& t = plan.training;
    ActivationOptions opt;
    const double whole =
        layer_activation_bytes(plan.model, t.seq_len, 1, 2, true, 1, Recompute::none, plan.precision, opt).value();
    const double input = 2.0 * t.seq_len * plan.model.hidden / 2;
    CHECK(layer_activation_bytes(plan.model, t.seq_len, 1, 2, true, 1, Recompute::full, plan.precision, opt).value() ==
          Approx(input));
    plan.parallel.recompute = Recompute::none;
    const double none = stage_memory(plan, 0).activations.value();
    plan.parallel.recompute = Recompute::full;
    const double full = stage_memory(plan, 0).activations.value();
    const int inflight = stage_memory(plan, 0).inflight_microbatches;
    CHECK(inflight == 1);
    CHECK(none - full == Approx(L * (whole - input) - whole));
    for (int n = 1; n <= L; ++n) {
        plan.parallel.recompute_layers = n;
        INFO("recompute_layers " << n);
        CHECK(full_recompute_layers(plan) == n);
        CHECK(stage_memory(plan, 0).activations.value() - full == Approx((L - n) * (whole - input)));
    }
    plan.parallel.recompute_layers = 0; // every layer
    CHECK(full_recompute_layers(plan) == L);
    plan.parallel.recompute = Recompute::selective;
    CHECK(full_recompute_layers(plan) == 0);
}

TEST_CASE("the fewest block-recompute layers that fit is the smallest N whose peak fits", "[memory][recompute]") {
    auto plan = trainsim::test::small_plan(1, 2, 1, 8, 1); // 2 stages x 2 chunks of 2 layers
    plan.parallel.vp = 2;
    plan.parallel.recompute = Recompute::full;
    plan.parallel.recompute_layers = 1;
    const auto one = peak_memory(plan).total();
    plan.parallel.recompute_layers = 0;
    const auto all = peak_memory(plan).total();
    REQUIRE(all < one);
    // Capacity exactly at the 1-layer peak: one layer per chunk suffices.
    plan.hardware.hbm_capacity = one;
    CHECK(fewest_recompute_layers(plan) == 1);
    // Between the two: only every layer fits (0 = all, i.e. plain full recompute).
    plan.hardware.hbm_capacity = Bytes((one.value() + all.value()) / 2);
    CHECK(fewest_recompute_layers(plan) == 0);
    // Below full recompute: nothing fits.
    plan.hardware.hbm_capacity = Bytes(all.value() * 0.99);
    CHECK(fewest_recompute_layers(plan) == 0);
    // The policy the plan carries does not matter: it is taken as full recompute.
    plan.parallel.recompute = Recompute::none;
    plan.hardware.hbm_capacity = one;
    CHECK(fewest_recompute_layers(plan) == 1);
}

TEST_CASE("FP8 primary weights and 16-bit master remainders: bytes per parameter", "[memory]") {
    // FP8 primary weights (TE fp8_model_init): the layers' GEMM weights take 1 B instead of the
    // BF16 2 B plus a 1 B FP8 copy; only the transpose stays extra. The embedding and head stay
    // BF16. Master remainders (Apex store_param_remainders): FP32 master 4 B -> 2 B of the 12.
    auto plan = trainsim::test::small_plan(2, 1, 4);
    plan.precision = Precision::fp8;
    plan.cluster.gpus_per_node = 8;
    plan.cluster.nodes = 1;
    const auto base = stage_memory(plan, 0);
    const double P = base.local_params;
    const double layers = plan.model.layers * count_params(plan.model).per_layer / plan.parallel.tp;
    REQUIRE(layers < P); // the embedding and head are local too
    CHECK(base.weights.value() == Approx(2.0 * P));
    CHECK(base.fp8_buffers.value() == Approx(2.0 * layers));
    plan.parallel.fp8_params = true;
    const auto f8 = stage_memory(plan, 0);
    CHECK(f8.weights.value() == Approx(2.0 * P - layers));
    CHECK(f8.fp8_buffers.value() == Approx(layers));
    CHECK(f8.optimizer.value() == Approx(base.optimizer.value()));
    plan.parallel.fp8_params = false;
    plan.parallel.master_param_remainders = true;
    const auto rem = stage_memory(plan, 0);
    CHECK(rem.optimizer.value() == Approx(10.0 * P / 4));
    CHECK(base.optimizer.value() == Approx(12.0 * P / 4));
    CHECK(rem.weights.value() == Approx(base.weights.value()));
}

TEST_CASE("BF16 optimizer state: 6 B per parameter, sharded like the FP32 state, a lighter step", "[memory]") {
    // FP32 master 4 + m 4 + v 4 = 12 B; Apex DistributedFusedAdam dtype=bf16: 2 + 2 + 2 = 6 B.
    for (auto sharding : {Sharding::none, Sharding::dist_opt, Sharding::zero3}) {
        auto plan = trainsim::test::small_plan(1, 1, 8);
        plan.parallel.sharding = sharding;
        const auto fp32 = stage_memory(plan, 0);
        plan.parallel.optimizer_state = OptimizerState::bf16;
        const auto bf16 = stage_memory(plan, 0);
        CAPTURE(to_string(sharding));
        CHECK(bf16.optimizer.value() == Approx(fp32.optimizer.value() / 2));
        CHECK(bf16.weights.value() == Approx(fp32.weights.value()));
        CHECK(bf16.gradients.value() == Approx(fp32.gradients.value()));
    }
    // The fused step reads grad 4 + 3 x 2 and writes 3 x 2 + the BF16 weight 2 = 18 B instead of 30.
    auto plan = trainsim::test::small_plan(1, 1, 8);
    auto step_bytes = [&] {
        const auto g = build_workload(plan);
        for (const auto& op : g.stages[0].ops)
            if (g.protos[op.proto].name == "optimizer_adam") return g.protos[op.proto].bytes.value();
        return 0.0;
    };
    const double fp32 = step_bytes();
    plan.parallel.optimizer_state = OptimizerState::bf16;
    const double shard = stage_memory(plan, 0).local_params / 8; // dist_opt over dp 8
    CHECK(fp32 - step_bytes() == Approx(12.0 * shard));
}

TEST_CASE("the per-step FP8 weight cast covers the layers' GEMM weights, only their transpose with FP8 weights",
          "[workload]") {
    // Read BF16 (2 B), write FP8 + its transpose (1 + 1 B) per layer weight; with FP8 primary
    // weights read FP8 (1 B) and write the transpose (1 B). The embedding and head stay BF16.
    auto plan = trainsim::test::small_plan(1, 1, 4);
    plan.precision = Precision::fp8;
    auto cast_bytes = [&] {
        const auto g = build_workload(plan);
        for (const auto& op : g.stages[0].ops)
            if (g.protos[op.proto].name == "fp8_weight_cast") return g.protos[op.proto].bytes.value();
        return 0.0;
    };
    const double layers = plan.model.layers * count_params(plan.model).per_layer;
    CHECK(cast_bytes() == Approx(4.0 * layers));
    plan.parallel.fp8_params = true;
    CHECK(cast_bytes() == Approx(2.0 * layers));
}

TEST_CASE("FP8 primary weights halve the distributed optimizer's gathers of layer weights", "[memory][workload]") {
    auto plan = trainsim::test::small_plan(1, 1, 4);
    plan.precision = Precision::fp8;
    auto gathered = [&] {
        const auto g = build_workload(plan);
        double bytes = 0;
        for (const auto& op : g.stages[0].ops)
            if (g.protos[op.proto].name == "param_ag") bytes += g.protos[op.proto].bytes.value();
        return bytes;
    };
    const double bf16 = gathered();
    plan.parallel.fp8_params = true;
    const double fp8 = gathered();
    const double layers = plan.model.layers * count_params(plan.model).per_layer;
    REQUIRE(bf16 > 0);
    // nccl-tests size of an all-gather: the gathered buffer, 2 B (or 1 B) per parameter.
    CHECK(bf16 - fp8 == Approx(layers));
}

TEST_CASE("weights gathered again after a recompute: those used beyond the reuse distance", "[flops][sharding]") {
    // Test model: h = 2048, GELU FFN 8192. Weights in forward order: QKV 3h^2, projection h^2,
    // FC1 and FC2 h*f. After the recompute, the parameters used before a module's backward are
    // the modules after it, twice: FC2 0, FC1 2hf, projection 4hf, QKV 4hf + 2h^2.
    const auto m = trainsim::test::small_model();
    const double h = 2048, f = 8192;
    const double qkv = 3 * h * h, proj = h * h, fc = h * f;
    const double inf = std::numeric_limits<double>::infinity();
    CHECK(regathered_after_recompute(m, 1, inf) == 0);                         // always kept
    CHECK(regathered_after_recompute(m, 1, 0) == Approx(qkv + proj + 2 * fc)); // never kept
    CHECK(regathered_after_recompute(m, 1, 1) == Approx(qkv + proj + fc));     // all but FC2
    CHECK(regathered_after_recompute(m, 1, 2 * fc + 1) == Approx(qkv + proj));
    CHECK(regathered_after_recompute(m, 1, 4 * fc + 1) == Approx(qkv));
    CHECK(regathered_after_recompute(m, 1, 4 * fc + 2 * h * h + 1) == 0);
    // Per tensor-parallel rank both the weights and the distances are 1/tp.
    CHECK(regathered_after_recompute(m, 2, 2 * fc / 2 + 1) == Approx((qkv + proj) / 2));
    // GPT-3 175B under DeepSpeed's default stage3_max_reuse_distance (1e9): FC1 is 2 x 4h^2 =
    // 1.21e9 away, so only FC2 stays: 8h^2 of the layer's 12h^2 weights are gathered again.
    ModelArch gpt3 = m;
    gpt3.hidden = 12288;
    gpt3.heads = 96;
    gpt3.kv_heads = 96;
    gpt3.head_dim = 128;
    gpt3.ffn = 4 * 12288;
    CHECK(regathered_after_recompute(gpt3, 1, 1e9) == Approx(8.0 * 12288.0 * 12288.0));
}

namespace {
// A Llama-style (SwiGLU, GQA) version of the test plan.
Plan llama_plan(int dp) {
    auto plan = trainsim::test::small_plan(1, 1, dp);
    plan.model = llama2(4, 2048, 16, 4, 5632);
    return plan;
}
double sum_bytes(const OpGraph& g, const std::string& name) {
    for (const auto& p : g.protos)
        if (p.name == name) return p.bytes.value();
    return -1.0;
}
} // namespace

TEST_CASE("op-level selective checkpointing keeps the attention output and every other matmul's", "[memory]") {
    // torchtitan's policy saves wq, wv, w1 and w2 of wq, wk, wv, wo, w1, w3, w2, and the SDPA
    // output with its FP32 log-sum-exp, besides the layer input (all BF16, tp = 1).
    const auto m = llama2(4, 2048, 16, 4, 5632);
    const double T = 2.0 * 4096, h = 2048, d = 128, a = 16, g = 4, f = 5632;
    ActivationOptions opt;
    opt.selective = SelectiveRecompute::alternate_matmuls;
    const double expected = 2 * T * h + 2 * T * (a + g) * d + 2 * T * f + 2 * T * h + 2 * T * a * d + 4 * T * a;
    CHECK(layer_activation_bytes(m, 4096, 2, 1, false, 1, Recompute::selective, Precision::bf16, opt).value() ==
          Approx(expected));
    // Less than keeping everything, more than the layer input alone.
    CHECK(expected < layer_activation_bytes(m, 4096, 2, 1, false, 1, Recompute::none, Precision::bf16, opt).value());
    // The stage holds every layer's saved set plus, once, the full activations of the layer
    // being rebuilt.
    auto plan = llama_plan(8);
    plan.parallel.sharding = Sharding::fsdp;
    plan.parallel.recompute = Recompute::selective;
    plan.parallel.selective_recompute = SelectiveRecompute::alternate_matmuls;
    const double sel = stage_memory(plan, 0).activations.value();
    plan.parallel.recompute = Recompute::none;
    const double none = stage_memory(plan, 0).activations.value();
    const auto t = plan.training;
    const double per_sel =
        layer_activation_bytes(plan.model, t.seq_len, 1, 1, false, 1, Recompute::selective, Precision::bf16, opt)
            .value();
    const double per_none =
        layer_activation_bytes(plan.model, t.seq_len, 1, 1, false, 1, Recompute::none, Precision::bf16, opt).value();
    CHECK(none - sel == Approx(4 * (per_none - per_sel) - per_none));
}

TEST_CASE("op-level selective checkpointing replays every op but the attention, wq, wv, w1 and w2", "[workload]") {
    auto plan = llama_plan(8);
    plan.parallel.recompute = Recompute::selective;
    plan.parallel.selective_recompute = SelectiveRecompute::alternate_matmuls;
    const auto g = build_workload(plan);
    std::map<std::string, int> names;
    double gemm_flops = 0;
    for (const auto& op : g.stages[0].ops) {
        if (op.category != Category::recompute) continue;
        const auto& p = g.protos[op.proto];
        ++names[p.name];
        if (p.kind == OpKind::gemm) gemm_flops += p.flops.value();
    }
    // One replay per layer and micro-batch (4 layers, 2 micro-batches of 1 x 2048 tokens).
    const double T = 2048, h = 2048, d = 128, g_heads = 4, f = 5632;
    const int replays = 4 * 2;
    CHECK(gemm_flops == Approx(replays * 2 * T * h * (g_heads * d + h + f))); // wk, wo, w3
    for (const char* n :
         {"ln1", "rope", "residual_ln2", "swiglu", "residual", "recompute_wk", "attn_out", "recompute_w3"})
        CHECK(names[n] == replays);
    CHECK(names.count("attn_fwd") == 0);
    CHECK(names.count("qkv") == 0);
    CHECK(names.count("fc1") == 0);
    CHECK(names.count("fc2") == 0);
    // Megatron's selective recompute replays only the attention kernel.
    plan.parallel.selective_recompute = SelectiveRecompute::attention;
    const auto mg = build_workload(plan);
    std::map<std::string, int> mnames;
    for (const auto& op : mg.stages[0].ops)
        if (op.category == Category::recompute) ++mnames[mg.protos[op.proto].name];
    CHECK(mnames.size() == 1);
    CHECK(mnames["attn_fwd"] == replays);
}

TEST_CASE("eager element-wise ops move the bytes of one kernel per PyTorch op", "[workload]") {
    // Fused (TE / torch.compile): a norm reads x and writes y (2 + 2 B). Eager RMSNorm in FP32:
    // 36 B per element forward, 70 + 6 backward; RoPE as a complex multiply 20 B per query / key
    // element plus the GQA repeat of K and V (read g, write a heads, 2 B each, for K and V);
    // SwiGLU 10 B forward, 18 backward.
    auto plan = llama_plan(8);
    const double T = 2048, h = 2048, d = 128, a = 16, g = 4, f = 5632;
    const auto fused = build_workload(plan);
    plan.parallel.elementwise = Elementwise::eager;
    const auto eager = build_workload(plan);
    CHECK(sum_bytes(fused, "ln1") == Approx(4 * T * h));
    CHECK(sum_bytes(eager, "ln1") == Approx(36 * T * h));
    CHECK(sum_bytes(eager, "ln1_bwd") == Approx(76 * T * h));
    CHECK(sum_bytes(eager, "rope") == Approx(20 * T * (a + g) * d + 2 * 2 * T * (a + g) * d));
    CHECK(sum_bytes(eager, "swiglu") == Approx(10 * T * f));
    CHECK(sum_bytes(eager, "act_bwd") == Approx(18 * T * f));
    CHECK(sum_bytes(fused, "swiglu") == Approx(6 * T * f));
}

TEST_CASE("FSDP with an FP32 reduce dtype reduce-scatters 4 B per parameter", "[workload][sharding]") {
    auto plan = llama_plan(8);
    plan.parallel.sharding = Sharding::fsdp;
    CHECK(grad_bytes_per_param(plan) == 2.0);
    const double bf16 = sum_bytes(build_workload(plan), "fsdp_rs");
    plan.parallel.fsdp_reduce_fp32 = true;
    CHECK(grad_bytes_per_param(plan) == 4.0);
    CHECK(sum_bytes(build_workload(plan), "fsdp_rs") == Approx(2 * bf16));
    // The flag belongs to per-layer sharding; Megatron's buffers follow main_grads_fp32.
    plan.parallel.sharding = Sharding::dist_opt;
    plan.parallel.main_grads_fp32 = false;
    CHECK(grad_bytes_per_param(plan) == 2.0);
}

TEST_CASE("uneven pipeline splits count the embedding and the loss as a layer each", "[memory][pipeline]") {
    // Llama 3.1 405B, 126 layers: pp 8 -> 128 units, 16 per stage, the first and last give one up.
    const std::vector<int> pp8{15, 16, 16, 16, 16, 16, 16, 15};
    for (int s = 0; s < 8; ++s) CHECK(chunk_layers(126, 8, 1, s, 0) == pp8[static_cast<std::size_t>(s)]);
    // pp 8 x vp 8 (NeMo's 405B recipe): 2 units per chunk; chunk 0 of stage 0 and the last chunk
    // of stage 7 hold one layer.
    int total = 0;
    for (int s = 0; s < 8; ++s)
        for (int c = 0; c < 8; ++c) {
            const int n = chunk_layers(126, 8, 8, s, c);
            total += n;
            CHECK(n == ((s == 0 && c == 0) || (s == 7 && c == 7) ? 1 : 2));
        }
    CHECK(total == 126);
    // An even split is untouched; extra units go to the earliest chunks after the first.
    CHECK(chunk_layers(32, 4, 1, 0, 0) == 8);
    CHECK(chunk_layers(31, 4, 1, 0, 0) == 7); // 33 units: 8 + 1 extra for chunk 1
    CHECK(chunk_layers(31, 4, 1, 1, 0) == 9);
    CHECK(chunk_layers(31, 4, 1, 2, 0) == 8);
    CHECK(chunk_layers(31, 4, 1, 3, 0) == 7);
    // Depths and interleavings worth trying: 126 layers take pp 8 and 16 (powers of two, uneven)
    // besides their divisors; on pp 8, vp 1, 2, 4, 8 split the 128 units evenly, vp 16 would
    // leave the first chunk empty.
    const auto depths = pipeline_depths(126, 16);
    CHECK(depths == std::vector<int>{1, 2, 3, 4, 6, 7, 8, 9, 14, 16});
    CHECK(interleavings(126, 8) == std::vector<int>{1, 2, 4, 8});
    CHECK(interleavings(80, 4) == std::vector<int>{1, 2, 4, 5, 10, 20});
    // The workload and the memory model follow the split: stage 0 of 126 layers on pp 8 holds
    // 15 layers' parameters, stage 1 16.
    auto plan = trainsim::test::small_plan(1, 8, 1, 16, 1);
    plan.model.layers = 126;
    plan.model.vocab = 128;
    const auto pc = count_params(plan.model);
    CHECK(stage_memory(plan, 1).local_params == Approx(16 * pc.per_layer));
    const auto g = build_workload(plan);
    auto layer_passes = [&](int stage) {
        int n = 0;
        for (const auto& op : g.stages[static_cast<std::size_t>(stage)].ops)
            if (g.protos[op.proto].name == "qkv" && op.category == Category::forward) ++n;
        return n;
    };
    CHECK(layer_passes(0) == 15 * plan.grad_accum());
    CHECK(layer_passes(1) == 16 * plan.grad_accum());
    CHECK(layer_passes(7) == 15 * plan.grad_accum());
}

TEST_CASE("FSDP under pipelining keeps its gathered weights through the step", "[memory][sharding]") {
    // torchtitan with PP: weights gathered once at the step's start and kept, unsharded gradients
    // accumulated over the micro-batches and reduce-scattered once, FP32 master and Adam sharded.
    auto plan = trainsim::test::small_plan(1, 2, 4, 16, 1);
    plan.parallel.sharding = Sharding::fsdp;
    plan.parallel.fsdp_reduce_fp32 = true;
    REQUIRE(check_layout(plan).empty());
    CHECK_FALSE(gathers_per_layer(plan.parallel));
    const auto mem = stage_memory(plan, 0);
    const double local = mem.local_params;
    CHECK(mem.weights.value() == Approx(2.0 * local));
    CHECK(mem.gradients.value() == Approx(4.0 * local));
    CHECK(mem.optimizer.value() == Approx(12.0 * local / 4));
    const auto g = build_workload(plan);
    double gathered = 0, reduced = 0;
    int per_layer_gathers = 0;
    for (const auto& op : g.stages[0].ops) {
        const auto& p = g.protos[op.proto];
        if (p.name == "param_ag") gathered += p.bytes.value();
        if (p.name == "grad_rs") reduced += p.bytes.value();
        if (p.name == "fsdp_ag") ++per_layer_gathers;
    }
    CHECK(per_layer_gathers == 0);
    CHECK(gathered == Approx(2.0 * local));
    CHECK(reduced == Approx(4.0 * local));
    // ZeRO-3 under pipelining stays refused (DeepSpeed does not combine them).
    plan.parallel.sharding = Sharding::zero3;
    CHECK_FALSE(check_layout(plan).empty());
}

TEST_CASE("the loss: Megatron's in-place cross-entropy, PyTorch's on FP32 logits or a fused kernel",
          "[workload][memory]") {
    // Per logit: Megatron 38 B forward, 14 backward, 6 held (BF16 logits + one FP32 softmax);
    // PyTorch 22 and 22, 14 held (BF16 logits, FP32 log-softmax, the loss's dense gradient and
    // the log-softmax input gradient); a fused kernel on the BF16 logits 2 and 4, 4 held (the
    // logits and their gradient).
    auto plan = llama_plan(8);
    const double per_mb = 2048.0 * 32000.0; // logits of one micro-batch: tokens x vocab
    const auto mg = build_workload(plan);
    CHECK(sum_bytes(mg, "cross_entropy") == Approx(38 * per_mb));
    CHECK(sum_bytes(mg, "cross_entropy_bwd") == Approx(14 * per_mb));
    const double mg_act = stage_memory(plan, 0).activations.value();
    plan.parallel.cross_entropy = CrossEntropy::pytorch;
    const auto pt = build_workload(plan);
    CHECK(sum_bytes(pt, "cross_entropy") == Approx(22 * per_mb));
    CHECK(sum_bytes(pt, "cross_entropy_bwd") == Approx(22 * per_mb));
    CHECK(stage_memory(plan, 0).activations.value() - mg_act == Approx(8 * per_mb));
    plan.parallel.cross_entropy = CrossEntropy::fused;
    const auto fu = build_workload(plan);
    CHECK(sum_bytes(fu, "cross_entropy") == Approx(2 * per_mb));
    CHECK(sum_bytes(fu, "cross_entropy_bwd") == Approx(4 * per_mb));
    CHECK(stage_memory(plan, 0).activations.value() - mg_act == Approx(-2 * per_mb));
}

TEST_CASE("pipeline activations: split over TP by SP or scatter/gather, else sent whole", "[workload][pipeline]") {
    // small_plan: 2048 tokens per micro-batch, hidden 2048: a 2-byte activation of 8 MiB.
    auto plan = trainsim::test::small_plan(8, 2, 1, 4, 1);
    const double act = 2.0 * 2048 * 2048;
    auto ops_named = [](const OpGraph& g, const std::string& name) {
        int n = 0;
        for (const auto& st : g.stages)
            for (const auto& op : st.ops)
                if (g.protos[op.proto].name == name) ++n;
        return n;
    };
    // Sequence parallelism: each TP rank holds and sends its 1/8 of the sequence.
    const auto sp = build_workload(plan);
    CHECK(sum_bytes(sp, "recv_act") == Approx(act / 8));
    CHECK(ops_named(sp, "pp_gather") == 0);
    // Without it, Megatron-Core sends the whole tensor from every TP rank.
    plan.parallel.sequence_parallel = false;
    const auto whole = build_workload(plan);
    CHECK(sum_bytes(whole, "recv_act") == Approx(act));
    CHECK(ops_named(whole, "pp_gather") == 0);
    // Megatron-LM's scatter/gather (SC'21 Sec. 4.1): 1/8 over the network, then an all-gather of
    // the whole tensor over the TP group after every receive, forward and backward.
    plan.parallel.pp_scatter_gather = true;
    const auto sg = build_workload(plan);
    CHECK(sum_bytes(sg, "recv_act") == Approx(act / 8));
    CHECK(sum_bytes(sg, "recv_grad") == Approx(act / 8));
    CHECK(sum_bytes(sg, "pp_gather") == Approx(act));
    const int receives = ops_named(sg, "recv_act") + ops_named(sg, "recv_grad");
    CHECK(receives == 2 * 4); // 4 micro-batches: stage 1 receives activations, stage 0 gradients
    CHECK(ops_named(sg, "pp_gather") == receives);
    for (const auto& p : sg.protos)
        if (p.name == "pp_gather") {
            CHECK(p.collective == CollectiveOp::all_gather);
            CHECK(p.group == Group::tp);
        }
}

TEST_CASE("Megatron's fused softmax runs only inside its kernel's shape limits, else PyTorch's FP32 ops",
          "[workload][attention]") {
    // megatron/model/fused_softmax.py (2021-22): 16 < sk <= 2048, sq % 4 == 0, b * np % 4 == 0.
    CHECK(unfused_softmax_fuses(2, 2, 1024, 1024));
    CHECK_FALSE(unfused_softmax_fuses(1, 2, 1024, 1024));  // GPT-1.3B on tp 8 at micro-batch 1
    CHECK(unfused_softmax_fuses(1, 4, 1024, 1024));
    CHECK_FALSE(unfused_softmax_fuses(4, 4, 4096, 4096));
    CHECK_FALSE(unfused_softmax_fuses(4, 4, 16, 16));
    CHECK_FALSE(unfused_softmax_fuses(4, 4, 1022, 1022));
    // Scores per op (a micro-batch of one layer): b x (heads / tp) x s x s. Fused: 4 B forward, 6 backward;
    // the FP32 fallback 37 and 41 (float, scale, masked_fill, softmax, half), dropout 5 each way.
    auto plan = trainsim::test::small_plan(8, 1, 1, 2, 1);
    plan.training.seq_len = 1024;
    plan.parallel.sequence_parallel = false;
    plan.parallel.attention = AttentionImpl::unfused;
    plan.parallel.dropout = true;
    auto scores = [&] {
        return static_cast<double>(plan.training.micro_batch) * (16 / 8) * 1024.0 * 1024.0;
    };
    const auto fallback = build_workload(plan);
    CHECK(sum_bytes(fallback, "attn_softmax") == Approx((37 + 5) * scores()));
    CHECK(sum_bytes(fallback, "attn_softmax_bwd") == Approx((41 + 5) * scores()));
    plan.training.micro_batch = 2;
    const auto fused = build_workload(plan);
    CHECK(sum_bytes(fused, "attn_softmax") == Approx((4 + 5) * scores()));
    CHECK(sum_bytes(fused, "attn_softmax_bwd") == Approx((6 + 5) * scores()));
}
