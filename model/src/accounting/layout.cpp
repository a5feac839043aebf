#include "trainsim/model/accounting/layout.hpp"

#include "trainsim/model/accounting/memory_model.hpp"
#include "trainsim/model/accounting/pipeline_schedule.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <array>

namespace trainsim::model {

RankStrides rank_strides(const Parallel& p) {
    // Blocks from innermost to outermost; the CP x DP block keeps CP inside DP.
    enum Block { kTp, kCpDp, kPp };
    std::array<Block, 3> blocks{kTp, kCpDp, kPp};
    switch (p.order) {
    case RankOrder::tp_cp_dp_pp: blocks = {kTp, kCpDp, kPp}; break;
    case RankOrder::tp_pp_cp_dp: blocks = {kTp, kPp, kCpDp}; break;
    case RankOrder::cp_dp_tp_pp: blocks = {kCpDp, kTp, kPp}; break;
    case RankOrder::cp_dp_pp_tp: blocks = {kCpDp, kPp, kTp}; break;
    case RankOrder::pp_tp_cp_dp: blocks = {kPp, kTp, kCpDp}; break;
    case RankOrder::pp_cp_dp_tp: blocks = {kPp, kCpDp, kTp}; break;
    }
    RankStrides s;
    int stride = 1;
    for (Block b : blocks) {
        switch (b) {
        case kTp:
            s.tp = stride;
            stride *= p.tp;
            break;
        case kCpDp:
            s.cp = stride;
            s.dp = stride * p.cp;
            stride *= p.cp * p.dp;
            break;
        case kPp:
            s.pp = stride;
            stride *= p.pp;
            break;
        }
    }
    return s;
}

std::string set_gpu_count(Plan& plan, int gpus) {
    const int gpn = plan.cluster.gpus_per_node;
    if (gpus < 1) return fmt::format("a GPU count must be at least 1, got {}", gpus);
    if (gpus < gpn) {
        plan.cluster.nodes = 1;
        plan.cluster.gpus_per_node = gpus;
        return {};
    }
    if (gpus % gpn != 0) return fmt::format("{} GPUs do not fill whole nodes of {} GPUs", gpus, gpn);
    // Nodes talk through their NICs: without any, the cluster is one node (docs/network.md).
    if (gpus > gpn && plan.cluster.nics_per_node < 1)
        return fmt::format("this cluster has no NICs (cluster.nics_per_node 0): one node of {} GPUs is the most it "
                           "can use, not {}",
                           gpn, gpus);
    plan.cluster.nodes = gpus / gpn;
    return {};
}

int derive_dp(int num_gpus, int tp, int pp, int cp) {
    const int mp = tp * pp * cp;
    if (mp <= 0 || num_gpus % mp != 0) return 0;
    return num_gpus / mp;
}

int chunk_layers(int layers, int pp, int vp, int stage, int chunk) {
    return chunk_layers(layers, pp, vp, stage, chunk, PpSchedule::automatic);
}

int chunk_layers(int layers, int pp, int vp, int stage, int chunk, PpSchedule schedule) {
    const int n = pp * vp;
    if (n <= 0) return 0;
    if (layers % n == 0) return layers / n;
    const int k = virtual_stage(schedule, pp, vp, stage, chunk); // position in pipeline order
    const int units = layers + 2;
    const int base = units / n, extra = units % n;
    int u = base + (k >= 1 && k <= extra ? 1 : 0);
    if (k == 0) u -= 1;
    if (k == n - 1) u -= 1;
    return u;
}

namespace {
bool no_empty_chunk(int layers, int pp, int vp) {
    for (int s = 0; s < pp; ++s)
        for (int c = 0; c < vp; ++c)
            if (chunk_layers(layers, pp, vp, s, c) < 1) return false;
    return true;
}
} // namespace

namespace {
// Fine-tuning methods and the full fine-tuning recipes' memory tricks (docs/model.md
// "Fine-tuning"): what each is modelled with.
template <class Add> void check_finetune(const Plan& plan, Add&& add) {
    const auto& p = plan.parallel;
    const auto& t = plan.training;
    if (frozen_base(t)) {
        if (p.sharding != Sharding::none && p.sharding != Sharding::dist_opt && p.sharding != Sharding::zero1 &&
            p.sharding != Sharding::zero2)
            add("parallel.sharding",
                fmt::format("{} is modelled with whole frozen weights on each rank (sharding none, dist_opt, zero1 "
                            "or zero2: only the adapters' state is sharded), not '{}'",
                            to_string(t.method), to_string(p.sharding)));
        if (plan.precision == Precision::fp8)
            add("precision", fmt::format("{} is modelled in bf16 or fp16 (PEFT / bitsandbytes GEMMs), not fp8",
                                         to_string(t.method)));
        const PpSchedule schedule = effective_schedule(p.pp_schedule, p.vp);
        if (schedule == PpSchedule::zb_h1 || schedule == PpSchedule::zb_v || schedule == PpSchedule::dualpipe_v)
            add("parallel.pp_schedule",
                fmt::format("a split backward defers weight gradients, which {} has only for its adapters: use "
                            "1f1b or interleaved",
                            to_string(t.method)));
        if (p.offload != Offload::none)
            add("parallel.offload", fmt::format("{} keeps the adapters' small optimizer state on the GPU; CPU offload "
                                                "is modelled for pretrain and full",
                                                to_string(t.method)));
        if (t.lora_rank > plan.model.hidden)
            add("training.lora_rank", fmt::format("rank {} is more than the hidden size {}: not a low-rank adapter",
                                                  t.lora_rank, plan.model.hidden));
    }
    if (t.base_format == BaseFormat::nf4 && t.method != Method::qlora)
        add("training.base_format",
            fmt::format("nf4 base weights are QLoRA's (frozen, dequantised per GEMM): method qlora, not {}",
                        to_string(t.method)));
    if (t.method == Method::qlora && t.base_format != BaseFormat::nf4)
        add("training.base_format", "qlora keeps its frozen base in nf4; LoRA over BF16 weights is method lora");
    if (!p.master_weights) {
        if (plan.precision != Precision::bf16)
            add("parallel.master_weights",
                fmt::format("training without a master copy keeps BF16 weights (precision bf16), not {}",
                            to_string(plan.precision)));
        if (p.master_param_remainders)
            add("parallel.master_weights", "16-bit master remainders complete a master copy, and there is none");
        if (p.offload != Offload::none)
            add("parallel.master_weights", "CPU offload runs CPU Adam on an FP32 master copy, and there is none");
    }
    if (p.optimizer_state == OptimizerState::int8 && p.offload != Offload::none)
        add("parallel.optimizer_state", "CPU offload runs CPU Adam on FP32 state, not 8-bit state");
    if (p.optimizer_state == OptimizerState::int8 && p.master_param_remainders)
        add("parallel.master_param_remainders",
            "16-bit master remainders are modelled with optimizer_state fp32, not 8bit");
    if (p.optimizer_in_backward) {
        if (p.dp * p.cp != 1 || p.pp != 1 || p.sharding != Sharding::none)
            add("parallel.optimizer_in_backward",
                fmt::format("the step inside the backward is modelled on one data-parallel rank without a pipeline "
                            "or sharding (torchtune's single-device recipe); got dp*cp={}, pp={}, sharding {}",
                            p.dp * p.cp, p.pp, to_string(p.sharding)));
        else if (plan.grad_accum() != 1)
            add("parallel.optimizer_in_backward",
                fmt::format("a step per backward leaves no gradients to accumulate: needs global_batch = micro_batch "
                            "x dp (1 micro-batch per step, as torchtune requires), got {} micro-batches",
                            plan.grad_accum()));
        if (p.offload != Offload::none)
            add("parallel.optimizer_in_backward", "the step inside the backward runs on the GPU, not with CPU offload");
    }
    if (p.paged_optimizer && p.offload != Offload::none)
        add("parallel.paged_optimizer", "a paged optimizer pages its GPU state itself; not with CPU offload");
}

// What a schedule asks of the layout (docs/model.md "Pipeline schedules").
template <class Add> void check_schedule(const Plan& plan, Add&& add) {
    const auto& p = plan.parallel;
    const PpSchedule s = effective_schedule(p.pp_schedule, p.vp);
    const std::string name = to_string(s);
    if (s == PpSchedule::one_f_one_b && p.vp != 1)
        add("parallel.pp_schedule", fmt::format("1f1b runs one chunk per stage, but vp = {} (interleaved runs more)", p.vp));
    if (s == PpSchedule::interleaved && p.vp < 2)
        add("parallel.pp_schedule", "interleaved needs vp > 1 model chunks per stage");
    if (s == PpSchedule::zb_h1 && p.vp != 1)
        add("parallel.pp_schedule", fmt::format("zb-h1 runs one chunk per stage (Qi et al. 2024, section 2.1), but vp = {}", p.vp));
    if (v_shape(s) && p.vp != 2)
        add("parallel.pp_schedule",
            fmt::format("{} places exactly vp = 2 chunks per stage in a V, but vp = {}", name, p.vp));
    if (s != PpSchedule::one_f_one_b && s != PpSchedule::interleaved && p.pp < 2)
        add("parallel.pp_schedule", fmt::format("{} is a pipeline schedule: it needs pp > 1", name));
    if (!splits_backward(s)) return;
    // The split backward is modelled on Megatron-style weights (held for the step) and per-unit
    // gradient accumulation: a W pass that regathers ZeRO-3 / FSDP weights, or DeepSpeed's
    // accumulation pass after each backward, is not.
    if (p.sharding == Sharding::zero3 || p.sharding == Sharding::fsdp || p.sharding == Sharding::hsdp)
        add("parallel.pp_schedule",
            fmt::format("{} splits the backward; its W passes are modelled with weights held through the step "
                        "(sharding none, dist_opt, zero1, zero2), not '{}'",
                        name, to_string(p.sharding)));
    if (p.grad_accumulation == GradAccumulation::deepspeed)
        add("parallel.pp_schedule",
            fmt::format("{} splits the backward; DeepSpeed's gradient accumulation after each backward is not "
                        "modelled with it",
                        name));
}
} // namespace

std::vector<int> interleavings(int layers, int pp) {
    std::vector<int> out;
    for (int v = 1; pp > 0 && v <= layers / pp; ++v)
        if ((layers % (pp * v) == 0 || (layers + 2) % (pp * v) == 0) && no_empty_chunk(layers, pp, v)) out.push_back(v);
    return out;
}

std::vector<int> pipeline_depths(int layers, int max) {
    std::vector<int> out;
    for (int p = 1; p <= std::min(layers, max); ++p) {
        const bool pow2 = (p & (p - 1)) == 0;
        if ((layers % p == 0 || pow2) && no_empty_chunk(layers, p, 1)) out.push_back(p);
    }
    return out;
}

int max_chunk_layers(const Plan& plan) {
    const auto& p = plan.parallel;
    int best = 0;
    for (int s = 0; s < p.pp; ++s)
        for (int c = 0; c < p.vp; ++c)
            best = std::max(best, chunk_layers(plan.model.layers, p.pp, p.vp, s, c, p.pp_schedule));
    return best;
}

int stage_layers(const Plan& plan, int stage) {
    const auto& p = plan.parallel;
    int sum = 0;
    for (int c = 0; c < p.vp; ++c) sum += chunk_layers(plan.model.layers, p.pp, p.vp, stage, c, p.pp_schedule);
    return sum;
}

std::string recompute_label(const Plan& plan) {
    const auto& p = plan.parallel;
    if (p.pp * p.vp < 1 || !block_recompute(plan)) return std::string(to_string(p.recompute));
    return fmt::format("full (first {} of {} layers per chunk)", full_recompute_layers(plan), max_chunk_layers(plan));
}

std::vector<LayoutProblem> check_layout(const Plan& plan) {
    std::vector<LayoutProblem> out;
    const auto& m = plan.model;
    const auto& p = plan.parallel;
    const auto& t = plan.training;
    auto add = [&](std::string key, std::string msg) { out.push_back({std::move(key), std::move(msg)}); };

    for (auto [key, v] : {std::pair{"parallel.tp", p.tp}, {"parallel.pp", p.pp}, {"parallel.vp", p.vp},
                          {"parallel.cp", p.cp}, {"parallel.dp", p.dp}}) {
        if (v < 1) add(key, fmt::format("must be at least 1, got {}", v));
    }
    if (!out.empty()) return out;  // the divisibility rules below need positive degrees

    if (m.heads % p.tp != 0)
        add("parallel.tp", fmt::format("tp={} does not divide the {} attention heads of {}", p.tp, m.heads, m.name));
    if (m.kv_heads % p.tp != 0 && p.tp % m.kv_heads != 0)
        add("parallel.tp", fmt::format("tp={} and the {} KV heads of {} do not divide one another", p.tp,
                                       m.kv_heads, m.name));
    // More TP ranks than KV heads: Megatron-Core gives each rank whole KV heads and does not
    // replicate them (megatron/core/transformer/attention.py: num_query_groups_per_partition =
    // divide(config.num_query_groups, tp_size), and divide() asserts that tp divides the groups).
    // The op shapes here (kv_heads / tp per rank) would be a fraction of a head.
    else if (m.kv_heads < p.tp)
        add("parallel.tp", fmt::format("tp={} is more than the {} KV heads of {}: Megatron-Core splits whole KV heads "
                                       "over the TP ranks (num_query_groups must be a multiple of tp) and does not "
                                       "replicate them; use tp <= {}",
                                       p.tp, m.kv_heads, m.name, m.kv_heads));
    if (m.ffn % p.tp != 0)
        add("parallel.tp", fmt::format("tp={} does not divide the FFN width {} of {}", p.tp, m.ffn, m.name));
    const PpSchedule schedule = effective_schedule(p.pp_schedule, p.vp);
    const bool empty_chunk = !no_empty_chunk(m.layers, p.pp, p.vp);
    if (empty_chunk)
        add("parallel.pp", fmt::format("pp*vp = {}*{} = {} model chunks leave a chunk without a layer of the {} of {} "
                                       "(the embedding and the loss count as one layer each when the layers do not "
                                       "divide evenly)",
                                       p.pp, p.vp, p.pp * p.vp, m.layers, m.name));
    const int gpus = plan.num_gpus();
    if (p.tp * p.pp * p.cp * p.dp != gpus)
        add("parallel.dp", fmt::format("tp*pp*cp*dp = {}*{}*{}*{} = {} but the cluster has {} GPUs ({} nodes x {})",
                                       p.tp, p.pp, p.cp, p.dp, p.tp * p.pp * p.cp * p.dp, gpus, plan.cluster.nodes,
                                       plan.cluster.gpus_per_node));
    if (t.micro_batch < 1) add("training.micro_batch", "must be at least 1");
    const auto& c = plan.cluster;
    if (c.nodes > 1 && c.nics_per_node < 1)
        add("cluster.nics_per_node", fmt::format("{} nodes need at least one NIC per node, got {}{}: without NICs "
                                                 "one node of {} GPUs is the most the cluster can use",
                                                 c.nodes, c.nics_per_node,
                                                 plan.hardware.source_file.empty()
                                                     ? std::string()
                                                     : fmt::format(" (from {} node.nics_per_node unless written here)",
                                                                   plan.hardware.source_file),
                                                 c.gpus_per_node));
    else if (t.global_batch % (t.micro_batch * p.dp) != 0)
        add("training.global_batch",
            fmt::format("global batch {} is not a multiple of micro_batch*dp = {}*{} = {}", t.global_batch,
                        t.micro_batch, p.dp, t.micro_batch * p.dp));
    else if (plan.grad_accum() > kMaxMicrobatchesPerStep)
        add("training.global_batch",
            fmt::format("global_batch / (micro_batch*dp) = {} / ({}*{}) = {} micro-batches per step, more than the {} "
                        "the simulation supports (each is simulated op by op; {} micro-batches is a 16k-sequence "
                        "global batch, the largest published, at dp = 1 and micro_batch 1): raise micro_batch or dp",
                        t.global_batch, t.micro_batch, p.dp, plan.grad_accum(), kMaxMicrobatchesPerStep,
                        kMaxMicrobatchesPerStep));
    else if (schedule == PpSchedule::interleaved && p.vp > 1 && plan.grad_accum() % p.pp != 0)
        add("parallel.vp", fmt::format("interleaved 1F1B needs the {} micro-batches per step to be a multiple of pp={}",
                                       plan.grad_accum(), p.pp));
    else if (schedule == PpSchedule::dualpipe_v && plan.grad_accum() < 2 * p.pp)
        add("parallel.pp_schedule",
            fmt::format("dualpipe-v needs at least 2 x pp = {} micro-batches per step, got {} (DualPipeV.step asserts "
                        "num_chunks >= num_ranks * 2)",
                        2 * p.pp, plan.grad_accum()));
    if (p.vp > 1 && p.pp < 2) add("parallel.vp", "vp > 1 (interleaving) needs pp > 1");
    check_schedule(plan, add);
    const bool sharded_optimizer =
        p.sharding == Sharding::dist_opt || p.sharding == Sharding::zero1 || p.sharding == Sharding::zero2;
    if (p.fp8_params && plan.precision != Precision::fp8)
        add("parallel.fp8_params",
            fmt::format("FP8 primary weights need precision: fp8, not {}", to_string(plan.precision)));
    else if (p.fp8_params && !sharded_optimizer && p.sharding != Sharding::none)
        add("parallel.fp8_params", fmt::format("FP8 primary weights are modelled with none, dist_opt, zero1 or zero2 "
                                               "sharding, not '{}'",
                                               to_string(p.sharding)));
    if (p.offload == Offload::optimizer && p.sharding == Sharding::none)
        add("parallel.offload",
            "optimizer offload runs on a sharded optimizer (ZeRO-Offload on zero1/2/3, "
            "Megatron-Core's on dist_opt), not sharding: none");
    if (p.offload == Offload::params && !gathers_per_layer(p))
        add("parallel.offload",
            fmt::format("parameter offload fetches each layer's weights as ZeRO-3 / FSDP gather them: sharding zero3, "
                        "or fsdp / hsdp without pipelining, not {}{}",
                        to_string(p.sharding), p.pp > 1 ? fmt::format(" with pp={}", p.pp) : std::string()));
    if (p.offload != Offload::none) {
        // Every profile key offload reads that the profile lacks, at once (the PCIe link it also
        // crosses, interconnect.pcie_bandwidth / pcie_efficiency, is required in every profile).
        const auto& hw = plan.hardware;
        std::vector<std::string> missing;
        if (hw.host_memory_bandwidth.value() <= 0) missing.emplace_back("node.host_memory_bandwidth");
        if (hw.cpu_adam_efficiency <= 0) missing.emplace_back("node.cpu_adam_efficiency");
        if (!plan.cluster.host_memory && hw.default_host_memory.value() <= 0)
            missing.emplace_back("node.host_memory (or the scenario's cluster.host_memory)");
        if (!missing.empty())
            add("parallel.offload",
                fmt::format("CPU offload ({}) needs the node's host memory bandwidth, CPU Adam efficiency and host "
                            "memory; the profile {} lacks {}: add {} to its node section",
                            to_string(p.offload), hw.source_file.empty() ? hw.id : hw.source_file,
                            fmt::join(missing, ", "), missing.size() == 1 ? "it" : "them"));
    }
    if (p.fsdp_fetch == FsdpFetch::module && p.fsdp_gathers_per_layer != 1)
        add("parallel.fsdp_gathers_per_layer",
            fmt::format(
                "fsdp_fetch: module gathers each of a layer's 4 weights on its own; fsdp_gathers_per_layer ({}) "
                "applies to fsdp_fetch: layer",
                p.fsdp_gathers_per_layer));
    if (p.master_param_remainders) {
        if (p.fp8_params || plan.precision == Precision::fp16)
            add("parallel.master_param_remainders",
                p.fp8_params
                    ? std::string("16-bit master remainders complete BF16 weights; with fp8_params there are none")
                    : std::string("16-bit master remainders complete BF16 weights, not FP16 ones"));
        else if (!sharded_optimizer)
            add("parallel.master_param_remainders",
                fmt::format("16-bit master remainders are a feature of a sharded optimizer (dist_opt, zero1, zero2), "
                            "not '{}'",
                            to_string(p.sharding)));
        else if (p.optimizer_state == OptimizerState::bf16)
            add("parallel.master_param_remainders",
                "16-bit master remainders complete an FP32 master copy; with optimizer_state: bf16 there is none");
    }
    check_finetune(plan, add);
    if (p.recompute_layers != 0) {
        if (p.recompute != Recompute::full)
            add("parallel.recompute_layers",
                fmt::format("recompute_layers applies to recompute: full (block recompute), not '{}'",
                            to_string(p.recompute)));
        else if (p.recompute_layers < 0 || (!empty_chunk && p.recompute_layers > max_chunk_layers(plan)))
            add("parallel.recompute_layers",
                fmt::format("{} layers recomputed per model chunk, but the largest chunk has {} ({} layers over "
                            "pp*vp = {} chunks)",
                            p.recompute_layers, max_chunk_layers(plan), m.layers, p.pp * p.vp));
    }
    if (p.cp > 1 && t.seq_len % (2 * p.cp) != 0)
        add("parallel.cp", fmt::format("seq_len {} is not a multiple of 2*cp = {} (load-balanced causal CP)",
                                       t.seq_len, 2 * p.cp));
    if (p.sequence_parallel && p.tp < 2) add("parallel.sequence_parallel", "sequence parallelism needs tp > 1");
    if (p.pp > 1 && (p.sharding == Sharding::zero2 || p.sharding == Sharding::zero3))
        add("parallel.sharding", fmt::format("sharding '{}' shards gradients across micro-batches and cannot be "
                                             "combined with pipeline parallelism (pp={})",
                                             to_string(p.sharding), p.pp));
    if (p.sharding == Sharding::hsdp && p.dp % plan.cluster.gpus_per_node != 0 && p.dp > plan.cluster.gpus_per_node)
        add("parallel.sharding", "hsdp shards within a node: dp must be a multiple of gpus_per_node");
    if (!plan.hardware.dense_peak.contains(plan.precision)) {
        auto it = plan.hardware.unsupported_reason.find(plan.precision);
        add("precision", fmt::format("{} is not supported on {}: {}", to_string(plan.precision), plan.hardware.name,
                                     it != plan.hardware.unsupported_reason.end()
                                         ? it->second
                                         : std::string("the profile gives no dense peak for it")));
    }
    if (t.seq_len < 1) add("training.seq_len", "must be at least 1");
    if (t.tokens <= 0) add("training.tokens", "must be positive");
    return out;
}

} // namespace trainsim::model
