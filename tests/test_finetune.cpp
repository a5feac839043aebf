// Fine-tuning as a workload (issue #42 items 2 and 5; docs/model.md "Fine-tuning"): LoRA / QLoRA
// adapters' parameters, FLOPs and memory from closed forms, NF4's 4.127 bits, the full fine-tuning
// recipes' memory tricks, the loader's errors, the trust band, and the issue's done-when checks on
// structured output.
#include "cli_runner.hpp"
#include "fixtures.hpp"
#include "scratch_dir.hpp"
#include "trainsim/model/accounting/finetune.hpp"
#include "trainsim/model/accounting/flops.hpp"
#include "trainsim/model/accounting/layout.hpp"
#include "trainsim/model/accounting/memory_model.hpp"
#include "trainsim/model/core/errors.hpp"
#include "trainsim/model/input/loader.hpp"
#include "trainsim/model/workload/workload.hpp"
#include "trainsim/sim/run/estimate.hpp"
#include "trainsim/sim/search/fit_advice.hpp"
#include "trainsim/sim/trust/trust.hpp"

#include <catch2/catch.hpp>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <string>

namespace fs = std::filesystem;
using namespace trainsim;

namespace {

// Llama-2 7B (HF meta-llama/Llama-2-7b-hf config.json).
model::ModelArch llama2_7b() {
    model::ModelArch m;
    m.name = "llama2-7b";
    m.layers = 32;
    m.hidden = 4096;
    m.heads = 32;
    m.kv_heads = 32;
    m.head_dim = 128;
    m.ffn = 11008;
    m.ffn_type = model::FfnType::swiglu;
    m.vocab = 32000;
    return m;
}

model::Plan lora_plan(model::Method method, unsigned targets = model::kLoraAll) {
    auto p = test::small_plan(1, 1, 1, 4, 1);
    p.parallel.sharding = model::Sharding::none;
    p.training.method = method;
    p.training.lora_rank = 16;
    p.training.lora_targets = targets;
    p.training.base_format = method == model::Method::qlora ? model::BaseFormat::nf4 : model::BaseFormat::bf16;
    return p;
}

model::Scenario load(const std::string& yaml, const std::string& name = "finetune.yaml") {
    model::LoadOptions opts;
    opts.data_dir = TRAINSIM_TEST_DATA_DIR;
    return model::load_scenario_text(yaml, name, opts);
}

std::vector<model::Diagnostic> load_errors(const std::string& yaml) {
    try {
        (void)load(yaml);
    } catch (const model::ScenarioError& e) {
        return e.diagnostics();
    }
    FAIL("expected a ScenarioError");
    return {};
}

bool any_says(const std::vector<model::Diagnostic>& d, const std::string& key, const std::string& words) {
    return std::any_of(d.begin(), d.end(), [&](const model::Diagnostic& x) {
        return x.key.find(key) != std::string::npos && x.message.find(words) != std::string::npos && x.line > 0;
    });
}

double gemm_flops(const model::OpGraph& g) {
    double f = 0;
    for (const auto& st : g.stages)
        for (const auto& op : st.ops)
            if (g.protos[op.proto].kind == model::OpKind::gemm) f += g.protos[op.proto].flops.value();
    return f;
}

} // namespace

TEST_CASE("NF4 with double quantisation is 4.127 bits per weight", "[finetune]") {
    // QLoRA Sec. 3: 4 bits, an 8-bit constant per block of 64, an FP32 constant per 256 blocks.
    CHECK(model::kNf4BitsPerWeight == Approx(4.0 + 0.125 + 32.0 / 16384.0));
    CHECK(model::kNf4BitsPerWeight == Approx(4.127).margin(5e-4));
    CHECK(model::base_gemm_bytes_per_weight(model::BaseFormat::nf4) == Approx(4.127 / 8.0).margin(1e-4));
    CHECK(model::base_gemm_bytes_per_weight(model::BaseFormat::bf16) == 2.0);
    // bitsandbytes Adam8bit: m and v 1 B each plus an FP32 absmax per 2,048 values each.
    CHECK(model::kAdam8bitBytesPerParam == Approx(2.0 + 8.0 / 2048.0));
}

TEST_CASE("LoRA adapters are r x (k + n) per targeted weight", "[finetune]") {
    const auto m = llama2_7b();
    // r = 8 on all 7 linear layers of Llama-2 7B: q, k, v, o 8 x (4096 + 4096) each; gate, up
    // 8 x (4096 + 11008); down 8 x (11008 + 4096) = 624,640 per layer, 19,988,480 in 32 layers
    // (the count PEFT's print_trainable_parameters reports for this configuration).
    const double per_layer = 4 * 8.0 * (4096 + 4096) + 3 * 8.0 * (4096 + 11008);
    CHECK(per_layer == 624640.0);
    CHECK(model::lora_params_per_layer(m, 8, model::kLoraAll) == per_layer);
    CHECK(32 * model::lora_params_per_layer(m, 8, model::kLoraAll) == 19988480.0);
    // q and v only (PEFT's default for Llama): 2 x 8 x 8192.
    CHECK(model::lora_params_per_layer(m, 8, model::kLoraQ | model::kLoraV) == 2 * 8.0 * 8192);
    // The group of a 2-matrix MLP has no gate: FC1 is the up projection.
    auto gelu = test::small_model();
    CHECK(model::lora_params_per_layer(gelu, 4, model::kLoraGate) == 0.0);
    CHECK(model::lora_params_per_layer(gelu, 4, model::kLoraUp) == 4.0 * (2048 + 8192));
    CHECK(model::lora_target_names(model::kLoraQ | model::kLoraDown) == std::vector<std::string>{"q", "down"});
}

TEST_CASE("a LoRA step's GEMMs are the frozen forward and dgrad plus the adapters' six GEMMs", "[finetune]") {
    // One micro-batch on one GPU: T = 2048 tokens. The frozen GEMMs (W weights per layer, the
    // V x h head) run forward and input gradient, 4 FLOPs per weight per token; the adapters (P per
    // layer) forward, input and weight gradients, 6 per parameter per token. Pre-training runs
    // 6 per weight, the head included.
    auto pre = test::small_plan(1, 1, 1, 1, 1);
    pre.parallel.sharding = model::Sharding::none;
    const auto lora = [&] {
        auto p = lora_plan(model::Method::lora);
        p.training.global_batch = 1;
        return p;
    }();
    REQUIRE(model::check_layout(lora).empty());
    const auto& m = pre.model;
    const auto w = model::layer_gemm_weights(m);
    const double W = w[0] + w[1] + w[2] + w[3];
    const double head = static_cast<double>(m.vocab) * m.hidden;
    const double T = 2048;
    const double P = model::lora_params_per_layer(m, 16, model::kLoraAll);
    CHECK(gemm_flops(model::build_workload(pre)) == Approx(T * (6.0 * W * m.layers + 6.0 * head)));
    CHECK(gemm_flops(model::build_workload(lora)) == Approx(T * (m.layers * (4.0 * W + 6.0 * P) + 4.0 * head)));
    // Model FLOPs per token (MFU) count the same GEMMs plus attention's 3 x forward.
    const double attn = model::attention_flops_per_token(m, 2048, true);
    CHECK(model::training_flops_per_token(m, lora.training, true) ==
          Approx(m.layers * (4.0 * W + 6.0 * P + 3.0 * attn) + 4.0 * head));
    CHECK(model::training_flops_per_token(m, pre.training, true) == model::model_flops_per_token(m, 2048, true));
}

TEST_CASE("QLoRA dequantises each NF4 weight before its forward and its input-gradient GEMM", "[finetune]") {
    auto p = lora_plan(model::Method::qlora);
    p.training.global_batch = 1;
    const auto g = model::build_workload(p);
    const auto w = model::layer_gemm_weights(p.model);
    const double per_pass = (w[0] + w[1] + w[2] + w[3]) * (4.127 / 8.0 + 2.0);
    double bytes = 0;
    int ops = 0;
    for (const auto& op : g.stages.at(0).ops)
        if (g.protos[op.proto].name.starts_with("nf4_dequant_")) bytes += g.protos[op.proto].bytes.value(), ++ops;
    CHECK(ops == 2 * 4 * p.model.layers);  // 4 GEMMs a layer, forward and backward
    CHECK(bytes == Approx(2.0 * p.model.layers * per_pass).epsilon(1e-3));
}

TEST_CASE("frozen weights carry no gradient and no optimizer state, adapters do", "[finetune]") {
    auto p = lora_plan(model::Method::lora);
    const auto& m = p.model;
    const auto pc = model::count_params(m);
    const auto w = model::layer_gemm_weights(m);
    const double gemm = m.layers * (w[0] + w[1] + w[2] + w[3]);
    const double adapters = m.layers * model::lora_params_per_layer(m, 16, model::kLoraAll);
    const auto mb = model::stage_memory(p, 0);
    // BF16 frozen weights (2 B), FP32 adapters (4 B, PEFT); FP32 adapter gradients; Adam moments
    // (8 B) of the adapters only, which are their own master.
    CHECK(mb.weights.value() == Approx(2.0 * pc.total + 4.0 * adapters));
    CHECK(mb.gradients.value() == Approx(4.0 * adapters));
    CHECK(mb.optimizer.value() == Approx(8.0 * adapters));
    // QLoRA: the layers' GEMM weights in NF4, the rest (norms, embedding, head) BF16; one
    // dequantised BF16 weight (the largest) in the workspace.
    auto q = lora_plan(model::Method::qlora);
    const auto qb = model::stage_memory(q, 0);
    CHECK(qb.weights.value() == Approx(4.127 / 8.0 * gemm + 2.0 * (pc.total - gemm) + 4.0 * adapters).epsilon(1e-4));
    CHECK(qb.workspace.value() == Approx(32.0 * 1024 * 1024 + 2.0 * *std::max_element(w.begin(), w.end())));
    // The 8-bit optimizer's moments and a distributed optimizer's shard of them.
    q.parallel.optimizer_state = model::OptimizerState::int8;
    CHECK(model::stage_memory(q, 0).optimizer.value() == Approx(model::kAdam8bitBytesPerParam * adapters));
}

TEST_CASE("a frozen GEMM keeps no input for itself: only targeted groups' inputs stay", "[finetune]") {
    const auto m = test::small_model();  // MHA, GELU: h 2048, f 8192, 16 heads
    const int s = 2048;
    model::ActivationOptions full;  // pre-training / full fine-tuning
    model::ActivationOptions all = full;
    all.frozen = true, all.lora_targets = model::kLoraAll, all.lora_rank = 16;
    model::ActivationOptions qv = all;
    qv.lora_targets = model::kLoraQ | model::kLoraV;
    auto bytes = [&](const model::ActivationOptions& o) {
        return model::layer_activation_bytes(m, s, 1, 1, false, 1, model::Recompute::none, model::Precision::bf16, o)
            .value();
    };
    const double T = s, r = 16, h = 2048, f = 8192;
    // Every group targeted: every GEMM input stays (A's weight gradient needs it) plus A's outputs,
    // 2 B x T x r per target: q, k, v, o and up (a GELU MLP has no gate), down.
    CHECK(bytes(all) == Approx(bytes(full) + 2.0 * T * r * 6));
    // q and v only: the FC1 input (LN2 output) and the FC2 input (activation output) go.
    CHECK(bytes(qv) == Approx(bytes(full) - 2.0 * T * h - 2.0 * T * f + 2.0 * T * r * 2));
}

TEST_CASE("full fine-tuning's memory tricks, each as its closed form", "[finetune]") {
    auto p = test::small_plan(1, 1, 1, 1, 1);
    p.parallel.sharding = model::Sharding::none;
    p.training.method = model::Method::full;
    const auto pc = model::count_params(p.model);
    const double N = pc.total;
    // The default: BF16 weights 2, FP32 main gradients 4, FP32 master 4 + Adam 8.
    auto base = model::stage_memory(p, 0);
    CHECK(base.weights.value() == Approx(2.0 * N));
    CHECK(base.gradients.value() == Approx(4.0 * N));
    CHECK(base.optimizer.value() == Approx(12.0 * N));
    // Pure BF16 (no master): BF16 gradients 2, BF16 moments 4 (optimizer_state bf16).
    p.parallel.master_weights = false;
    p.parallel.optimizer_state = model::OptimizerState::bf16;
    REQUIRE(model::check_layout(p).empty());
    auto pure = model::stage_memory(p, 0);
    CHECK(pure.gradients.value() == Approx(2.0 * N));
    CHECK(pure.optimizer.value() == Approx(4.0 * N));
    // Optimizer in backward: one unit's gradients at a time, the largest (here the embedding or
    // the head, V x h, against a layer's).
    p.parallel.optimizer_in_backward = true;
    REQUIRE(model::check_layout(p).empty());
    const double unit = std::max({pc.per_layer, pc.embedding, pc.lm_head});
    CHECK(model::stage_memory(p, 0).gradients.value() == Approx(2.0 * unit));
    // 8-bit state over the BF16 weights.
    p.parallel.optimizer_state = model::OptimizerState::int8;
    CHECK(model::stage_memory(p, 0).optimizer.value() == Approx(model::kAdam8bitBytesPerParam * N));
    // A paged optimizer's state meets the activations only at the step.
    p.parallel.paged_optimizer = true;
    const auto paged = model::stage_memory(p, 0);
    CHECK(paged.optimizer.value() == 0.0);
    CHECK(paged.step_transient.value() == Approx(model::kAdam8bitBytesPerParam * N));
    // Where they are not modelled, check_layout says so.
    p.training.global_batch = 4;  // 4 micro-batches: no step inside the backward
    const auto problems = model::check_layout(p);
    CHECK(std::any_of(problems.begin(), problems.end(),
                      [](const auto& x) { return x.key == "parallel.optimizer_in_backward"; }));
}

TEST_CASE("fine-tuning keys: defaults, dataset_tokens x epochs, and errors at file:line:col", "[finetune][loader]") {
    const auto sc = load(R"(model: llama2-7b
training: {dataset_tokens: 20M, epochs: 3, seq_len: 2048, global_batch: 16, method: qlora}
parallel: {sharding: none, recompute: full}
precision: bf16
cluster: {gpu: rtx-3090, nodes: 1, gpus_per_node: 1}
)");
    const auto& t = sc.plans.front().training;
    CHECK(t.tokens == 60e6);
    CHECK(t.base_format == model::BaseFormat::nf4);  // qlora's default
    CHECK(t.lora_rank == 8);
    CHECK(t.lora_targets == model::kLoraAll);
    const auto d = load_errors(R"(model: llama2-7b
training: {tokens: 1B, dataset_tokens: 20M, seq_len: 2048, global_batch: 16, method: lorra,
           lora_targets: [q, x], base_format: nf4}
cluster: {gpu: rtx-3090, nodes: 1, gpus_per_node: 1}
)");
    CHECK(any_says(d, "training.method", "unknown value 'lorra'"));
    CHECK(any_says(d, "training.lora_targets", "unknown value 'x'"));
    CHECK(any_says(d, "training.dataset_tokens", "not both"));
    const auto e = load_errors(R"(model: llama2-7b
training: {tokens: 1B, seq_len: 2048, global_batch: 16, method: lora, base_format: nf4}
parallel: {sharding: zero3}
cluster: {gpu: rtx-3090, nodes: 1, gpus_per_node: 1}
)");
    CHECK(any_says(e, "training.base_format", "method qlora"));
    CHECK(any_says(e, "parallel.sharding", "zero3"));
}

TEST_CASE("a fine-tune is outside the published evidence and its band is wider", "[finetune][trust]") {
    std::ifstream in(fs::path(TRAINSIM_TEST_DATA_DIR) / "trust" / "error-model.json");
    REQUIRE(in);
    const auto em = sim::error_model_from_json(nlohmann::json::parse(in), "error-model.json");
    auto plan = [&](const char* method) {
        return load(fmt::format(R"(model: llama2-7b
training: {{tokens: 1B, seq_len: 4096, global_batch: 64, method: {}}}
parallel: {{tp: 1, dp: 8, sharding: dist_opt}}
precision: bf16
cluster: {{gpu: h100-sxm, nodes: 1, gpus_per_node: 8}}
)",
                                method))
            .plans.front();
    };
    auto says = [](const sim::Band& b, const std::string& m) {
        return std::any_of(b.out_of_domain.begin(), b.out_of_domain.end(),
                           [&](const std::string& w) { return w.find("method " + m) != std::string::npos; });
    };
    const auto pre = sim::band_for(em, plan("pretrain"));
    const auto lora = sim::band_for(em, plan("lora"));
    CHECK_FALSE(says(pre, "pretrain"));
    CHECK(says(lora, "lora"));
    CHECK(says(sim::band_for(em, plan("full")), "full"));
    CHECK(lora.time_p90 - lora.time_p10 > pre.time_p90 - pre.time_p10);
}

TEST_CASE("done when: QLoRA of Llama-2 7B fits one RTX 3090 and simulate prints tokens/s", "[finetune][cli][data]") {
    const auto file = fs::path(TRAINSIM_TEST_DATA_DIR) / "questions" / "qlora-7b-1x-rtx3090.yaml";
    model::LoadOptions opts;
    opts.data_dir = TRAINSIM_TEST_DATA_DIR;
    const auto plans = model::load_scenario(file.string(), opts).plans;
    REQUIRE(!plans.empty());
    const auto& q = plans.front();
    const auto mem = model::peak_memory(q);
    CHECK(model::fits_in_memory(q, mem));
    CHECK(mem.total() <= model::gib(24));
    const auto r = test::run_trainsim("simulate '" + file.string() + "' --json");
    REQUIRE(r.rc == 0);
    const auto j = nlohmann::json::parse(r.out);
    INFO(r.out.substr(0, 2000));
    const auto& p0 = j.at("plans").at(0);
    CHECK(p0.at("method") == "qlora");
    CHECK(p0.at("base_format") == "nf4");
    CHECK(p0.at("tokens") == Approx(3 * 20e6)); // epochs x dataset_tokens
    CHECK(p0.at("tokens_per_s_per_gpu").get<double>() > 0);
    CHECK(p0.at("fits") == true);
}

TEST_CASE("done when: full BF16 Llama-2 7B on two RTX 3090s does not fit, fit_advice says what does",
          "[finetune][data]") {
    const auto sc = load(R"(model: llama2-7b
training: {tokens: 100M, seq_len: 2048, global_batch: 16, micro_batch: 1, method: full}
parallel: {tp: 1, pp: 1, dp: 2, sharding: zero2, recompute: full}
precision: bf16
cluster: {gpu: rtx-3090, nodes: 1, gpus_per_node: 2}
)");
    const auto base = sc.plans.front();
    std::vector<model::Plan> candidates;
    for (auto sh : {model::Sharding::none, model::Sharding::dist_opt, model::Sharding::zero1, model::Sharding::zero2,
                    model::Sharding::zero3, model::Sharding::fsdp})
        for (int tp : {1, 2}) {
            auto p = base;
            p.parallel.sharding = sh;
            p.parallel.tp = tp;
            p.parallel.dp = 2 / tp;
            if (!model::check_layout(p).empty()) continue;
            CHECK_FALSE(model::fits_in_memory(p, model::peak_memory(p)));
            candidates.push_back(p);
        }
    REQUIRE(!candidates.empty());
    const auto advice = sim::fit_advice(candidates, 0.0, /*simulate=*/false);
    auto fits = [&](const std::string& knob) {
        return std::any_of(advice.knobs.begin(), advice.knobs.end(),
                           [&](const sim::KnobTry& k) { return k.knob.starts_with(knob) && k.fits; });
    };
    CHECK(fits("training.method: lora"));
    CHECK(fits("training.method: qlora"));
    CHECK(fit_advice_json(advice).at("knobs").size() == advice.knobs.size());
}

TEST_CASE("done when: a 3B full fine-tune in BF16 with optimizer-in-backward fits one 80 GB A100",
          "[finetune][data]") {
    const auto sc = load(R"(model: llama3.2-3b
training: {tokens: 100M, seq_len: 2048, global_batch: 4, micro_batch: 4, method: full}
parallel: {tp: 1, pp: 1, dp: 1, sharding: none, recompute: full, master_weights: false,
           optimizer_state: bf16, optimizer_in_backward: true}
precision: bf16
cluster: {gpu: a100-sxm-80gb, nodes: 1, gpus_per_node: 1}
)");
    const auto& p = sc.plans.front();
    const auto pc = model::count_params(p.model);
    const auto mem = model::peak_memory(p);
    // 2 B weights, 4 B BF16 moments, the embedding's BF16 gradient (tied, the largest unit).
    CHECK(mem.weights.value() == Approx(2.0 * pc.total));
    CHECK(mem.optimizer.value() == Approx(4.0 * pc.total));
    CHECK(mem.gradients.value() == Approx(2.0 * pc.embedding));
    CHECK(model::fits_in_memory(p, mem));
    const auto e = sim::estimate_plan(p);
    CHECK(e.fits);
    CHECK(e.tokens_per_s_per_gpu > 0);
}

TEST_CASE("validate reads an optional method column: a LoRA row is simulated as LoRA, outside the evidence",
          "[finetune][cli][data]") {
    test::ScratchDir dir;
    const auto csv = dir / "lora.csv";
    {
        std::ofstream out(csv);
        out << "id,source_group,source,model,layers,hidden,heads,kv_heads,ffn,ffn_type,vocab,seq_len,gpu,num_gpus,tp,"
               "pp,vp,cp,dp,sequence_parallel,sharding,micro_batch,global_batch,recompute,precision,framework,kind,"
               "tokens_per_s_per_gpu,method\n";
        for (const char* method : {"", "lora"})
            out << (*method ? "lora" : "pre") << ",ft,test row,GPT-1.3B,24,2048,16,16,8192,gelu,51200,2048,h100-sxm,8,1,1,"
                << "1,1,8,false,dist_opt,1,64,none,bf16,megatron-core,step,10000," << method << "\n";
    }
    const auto v = test::run_trainsim("validate '" + csv.string() + "' --json");
    REQUIRE(v.rc == 0);
    const auto rows = nlohmann::json::parse(v.out).at("rows");
    REQUIRE(rows.size() == 2);
    auto says_method = [](const nlohmann::json& row) {
        for (const auto& w : row.at("out_of_domain"))
            if (w.get<std::string>().find("method lora") != std::string::npos) return true;
        return false;
    };
    CHECK_FALSE(says_method(rows.at(0)));
    CHECK(says_method(rows.at(1)));
    // The same layout without the frozen weights' gradient GEMMs runs faster.
    CHECK(rows.at(1).at("predicted_tokens_per_s_per_gpu").get<double>() >
          rows.at(0).at("predicted_tokens_per_s_per_gpu").get<double>());
}
