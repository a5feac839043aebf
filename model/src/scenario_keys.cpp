// The one table of scenario keys (docs/formats.md section 1). The loader rejects every key that
// is not listed here, applies the defaults written here and parses each value by its type here;
// `trainsim keys` prints this table. To add a key: add a row here and its binding in loader.cpp
// (the loader checks that the two agree).
//
// Conventions of the `default_value` column:
//   - a literal YAML value ("1", "auto", "400 Gbit/s"): the loader parses it like a written value;
//   - text in parentheses ("(heads)"): derived by the loader, explained in the description;
//   - empty: no default (the key is required, or it is optional and simply absent).
// Types: section (a map of keys), list, string, path, int, int|auto, bool, count (SI suffix
// allowed), fraction ("15%" or 0.15), number (plain), bandwidth (with unit), duration (a wall-clock
// span with unit: s, min, h, d), enum, model.
#include "trainsim/model/framework_profile.hpp"
#include "trainsim/model/loader.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <string>
#include <vector>

namespace trainsim::model {
namespace {

// The spellings of an enum, in enumerator order (the enums are contiguous from 0).
template <class E> std::vector<std::string> spellings(int count) {
    std::vector<std::string> out;
    out.reserve(static_cast<std::size_t>(count));
    for (int i = 0; i < count; ++i) out.push_back(to_string(static_cast<E>(i)));
    return out;
}

// Row builders: an optional key with its default, a required key, an enum.
KeySpec key(std::string path, std::string type, std::string unit, std::string default_value,
            std::string description) {
    KeySpec k;
    k.path = std::move(path);
    k.type = std::move(type);
    k.unit = std::move(unit);
    k.default_value = std::move(default_value);
    k.description = std::move(description);
    return k;
}

KeySpec required(std::string path, std::string type, std::string unit, std::string description) {
    KeySpec k = key(std::move(path), std::move(type), std::move(unit), "", std::move(description));
    k.required = true;
    return k;
}

KeySpec one_of(std::string path, std::vector<std::string> allowed, std::string default_value,
               std::string description) {
    KeySpec k = key(std::move(path), "enum", "", std::move(default_value), std::move(description));
    k.allowed = std::move(allowed);
    return k;
}

std::vector<KeySpec> make_table() {
    return {
        // --- top level ---
        key("title", "string", "", "(file name)", "Scenario title; names the only plan when there is no `plans` list"),
        key("description", "string", "", "", "Free text describing the question the scenario answers"),
        required("model", "model", "",
                 "The model: a preset id (models/<id>.yaml) or a map with `preset`, `hf_config` or the inline keys "
                 "below. A plan's `model` replaces the default model entirely"),
        // --- model (map form) ---
        key("model.preset", "string", "", "",
            "Preset id (models/<id>.yaml); inline keys written next to it override the preset's values"),
        key("model.hf_config", "path", "", "",
            "Hugging Face config.json (llama, mistral, qwen2), relative to the scenario file; stands alone"),
        key("model.name", "string", "", "custom", "Model name shown in reports"),
        key("model.source", "string", "", "", "Where the shape comes from (paper, config.json)"),
        required("model.layers", "int", "", "Transformer layers (inline form)"),
        required("model.hidden", "int", "", "Hidden size (model width) (inline form)"),
        required("model.heads", "int", "", "Attention (query) heads (inline form)"),
        key("model.kv_heads", "int", "", "(heads)", "Key/value heads: = heads for MHA, fewer for GQA / MQA"),
        key("model.head_dim", "int", "", "(hidden/heads)", "Width of one attention head"),
        required("model.ffn", "int", "", "FFN inner width (per gate/up branch for swiglu) (inline form)"),
        one_of("model.ffn_type", spellings<FfnType>(3), "swiglu", "FFN kind"),
        required("model.vocab", "int", "", "Vocabulary size (inline form)"),
        key("model.tied_embeddings", "bool", "", "false", "Input embedding and LM head share one matrix"),
        // --- training ---
        key("training", "section", "", "", "What is trained: tokens, sequence length, batch sizes"),
        required("training.tokens", "count", "tokens", "Tokens to train on (e.g. 1T, 500B)"),
        required("training.seq_len", "int", "tokens", "Tokens per sequence"),
        required("training.global_batch", "int", "sequences", "Sequences per optimizer step"),
        key("training.micro_batch", "int", "sequences", "1",
            "Sequences per micro-batch per data-parallel rank; gradient accumulation = "
            "global_batch / (micro_batch * dp)"),
        // --- parallel ---
        key("parallel", "section", "", "", "Parallel layout and the framework behaviours that change step time"),
        key("parallel.tp", "int", "", "1", "Tensor-parallel degree"),
        key("parallel.pp", "int", "", "1", "Pipeline-parallel degree (stages)"),
        key("parallel.vp", "int", "", "1", "Virtual pipeline chunks per stage (interleaved 1F1B when > 1)"),
        key("parallel.cp", "int", "", "1", "Context-parallel degree (ring attention over the sequence)"),
        key("parallel.dp", "int|auto", "", "auto", "Data-parallel degree; `auto` = GPUs / (tp*pp*cp)"),
        key("parallel.sequence_parallel", "bool", "", "false",
            "Megatron sequence parallelism (norms/dropout sharded over tp; needs tp > 1)"),
        one_of("parallel.sharding", spellings<Sharding>(7), "dist_opt",
               "Optimizer / gradient / parameter sharding across data-parallel ranks"),
        one_of("parallel.recompute", spellings<Recompute>(3), "none", "Activation recomputation policy"),
        key("parallel.recompute_layers", "int|all", "", "all",
            "With recompute: full, the layers of each model chunk recomputed, from its first (Megatron "
            "--recompute-method block --recompute-num-layers); the rest keep their activations"),
        key("parallel.framework", "string", "", "",
            fmt::format("Framework whose behaviours fill the parallel.* properties not written ({}, optionally "
                        "-<release>, e.g. nemo-24.07, deepspeed-2021; docs/accuracy.md)",
                        fmt::join(framework_families(), ", "))),
        key("parallel.overlap_grad_reduce", "bool", "", "true",
            "Data-parallel gradient reduction in buckets overlapped with backward"),
        key("parallel.overlap_param_gather", "bool", "", "true",
            "Distributed-optimizer / ZeRO parameter all-gather overlapped with forward"),
        key("parallel.tp_comm_overlap", "bool", "", "false",
            "TP collectives overlapped with GEMMs (Transformer Engine userbuffers)"),
        key("parallel.fsdp_prefetch", "bool", "", "true", "FSDP / ZeRO-3 gathers of the next layer prefetched"),
        key("parallel.dp_bucket_params", "count", "parameters", "40M",
            "Parameters per data-parallel gradient bucket (Megatron default 40M)"),
        one_of("parallel.attention", spellings<AttentionImpl>(4), "flash",
               "Attention kernel: flash (the GPU's fastest fused kernel: cuDNN / FlashAttention-3 via TE on "
               "Hopper), triton (Triton flash kernel), unfused (batched GEMMs + softmax over s x s scores, "
               "Megatron before 2023), flash2 (FlashAttention-2 kernels, PyTorch SDPA's default)"),
        key("parallel.dropout", "bool", "", "false",
            "Dropout after attention / MLP and on the attention scores (GPT-era recipes)"),
        one_of("parallel.elementwise", spellings<Elementwise>(2), "fused",
               "Element-wise ops (norms, RoPE, activation): fused kernels (Transformer Engine / Apex, torch.compile) "
               "or PyTorch eager, one kernel and memory pass per op (RMSNorm in FP32, RoPE as a complex multiply, "
               "GQA keys and values repeated)"),
        one_of("parallel.cross_entropy", spellings<CrossEntropy>(3), "megatron",
               "The loss: megatron (vocab-parallel, in place over one FP32 copy of the logits: 38 + 14 B per logit, "
               "6 B held), pytorch (F.cross_entropy on FP32 logits: 22 + 22 B per logit, 14 B held) or fused "
               "(flash-attn's kernel on the BF16 logits: 2 + 4 B per logit, 4 B held)"),
        one_of("parallel.host_dispatch", spellings<HostDispatch>(5), "te",
               "How the host issues a layer's kernels, which sets the kernels launched per op and the host time of "
               "each launch: te (Megatron-Core / NeMo on Transformer Engine), legacy (Megatron-LM 2021-22 model "
               "code), eager (plain PyTorch modules), compiled (torch.compile), graphs (CUDA-graph replay)"),
        key("parallel.host_sync_p2p", "bool", "", "false",
            "The host waits for every pipeline send / receive to finish (Megatron-LM 2021-22's "
            "torch.cuda.synchronize() after batch_isend_irecv)"),
        one_of("parallel.order", spellings<RankOrder>(6), "tp-cp-dp-pp",
               "Rank order, innermost first: which groups share a node (Megatron default tp-cp-dp-pp)"),
        key("parallel.fused_optimizer", "bool", "", "true",
            "Adam as one fused kernel (Apex / TE / DeepSpeed) rather than PyTorch's multi-pass foreach update"),
        key("parallel.fp8_params", "bool", "", "false",
            "FP8 primary weights (TE fp8_model_init, NeMo fp8_params, Megatron-Core --fp8-param-gather): no BF16 "
            "copy of the GEMM weights, FP8 parameter gathers; needs precision fp8"),
        key("parallel.master_param_remainders", "bool", "", "false",
            "FP32 master weights stored as 16-bit remainders of the BF16 weights (Apex DistributedFusedAdam "
            "store_param_remainders, NeMo): 2 B instead of 4 per parameter; needs BF16 weights and a sharded "
            "optimizer"),
        one_of("parallel.optimizer_state", spellings<OptimizerState>(2), "fp32",
               "Adam state datatype: fp32 (master weights and moments, 12 B per parameter) or bf16 (6 B: Apex "
               "DistributedFusedAdam dtype=bf16, Megatron-Core precision-aware optimizer)"),
        one_of("parallel.selective_recompute", spellings<SelectiveRecompute>(2), "attention",
               "What recompute: selective rebuilds: attention (the attention core, Megatron) or alternate_matmuls "
               "(every op but the attention kernel and every other matmul, torchtitan's op-level selective "
               "checkpointing)"),
        one_of("parallel.fsdp_fetch", spellings<FsdpFetch>(2), "layer",
               "ZeRO-3 / FSDP gathers: a layer at a time (PyTorch FSDP) or module by module, each weight before its "
               "GEMM and the next prefetched (DeepSpeed fetch_sub_module)"),
        key("parallel.fsdp_gathers_per_layer", "int", "collectives", "1",
            "ZeRO-3 / FSDP all-gathers per layer (1: flattened, as PyTorch FSDP; one per tensor in DeepSpeed 2021)"),
        key("parallel.fsdp_prefetch_bucket_params", "count", "parameters", "0",
            "ZeRO-3 / FSDP parameters of the next layer gathered ahead (0: the whole layer, as PyTorch FSDP; "
            "DeepSpeed stage3_prefetch_bucket_size 5e7)"),
        key("parallel.fsdp_reuse_distance_params", "count|unlimited", "parameters", "unlimited",
            "ZeRO-3 / FSDP with full recompute: a weight gathered for a layer's recompute stays for its backward only "
            "if fewer parameters than this are used in between, else it is gathered again (DeepSpeed "
            "stage3_max_reuse_distance, 1B; unlimited: always kept, as PyTorch FSDP)"),
        key("parallel.fsdp_reduce_scatters_per_layer", "int", "collectives", "1",
            "ZeRO-3 / FSDP gradient reduce-scatters per layer (1: flattened, as PyTorch FSDP; one per tensor in "
            "DeepSpeed 2021)"),
        key("parallel.fsdp_gather_sync", "bool", "", "false",
            "ZeRO-3 / FSDP parameter gathers wait for all queued GPU work, reduce-scatters included (DeepSpeed < 0.6: "
            "torch.cuda.synchronize() around each gather)"),
        key("parallel.list_collectives", "bool", "", "false",
            "ZeRO-3 / FSDP collectives through PyTorch's list API: one copy kernel per rank (DeepSpeed on PyTorch < "
            "1.10)"),
        key("parallel.main_grads_fp32", "bool", "", "true",
            "FP32 main-gradient buffer reduced in FP32 (Megatron); false: 16-bit gradients and sync (NeMo "
            "distributed_fused_adam grad_sync_dtype bf16)"),
        key("parallel.fsdp_reduce_fp32", "bool", "", "false",
            "ZeRO-3 / FSDP gradients reduce-scattered in FP32 (PyTorch FSDP reduce_dtype float32, torchtitan) "
            "rather than the 16-bit compute dtype"),
        key("parallel.overlap_p2p", "bool", "", "true",
            "Pipeline sends overlapped with compute (Megatron-Core); false: each send waits (Megatron-LM 2021-22)"),
        key("parallel.pp_scatter_gather", "bool", "", "false",
            "Without sequence parallelism, each TP rank sends 1/tp of a pipeline activation and the receiver "
            "all-gathers it over the TP group (Megatron-LM 2021-22 scatter/gather); false: every TP rank sends "
            "the whole activation (Megatron-Core)"),
        // --- precision ---
        one_of("precision", spellings<Precision>(3), "bf16",
               "Precision of the GEMMs (fp8: E4M3 forward, E5M2 gradients)"),
        // --- cluster ---
        key("cluster", "section", "", "", "The machines: GPU profile, node count and fabrics"),
        required("cluster.gpu", "string", "",
                 "Hardware profile id (hardware/<id>.yaml) or path to a profile (relative to the scenario "
                 "file); not required with --profile"),
        key("cluster.nodes", "int", "", "1", "Number of nodes"),
        key("cluster.gpus_per_node", "int", "", "(profile node.gpus_per_node)", "GPUs per node"),
        one_of("cluster.intra_node", spellings<IntraFabric>(3), "nvswitch", "Fabric between the GPUs of a node"),
        one_of("cluster.inter_node", spellings<InterFabric>(3), "infiniband", "Fabric between nodes"),
        key("cluster.nics_per_node", "int", "", "(profile node.nics_per_node)",
            "Network interfaces per node (0 for a single node)"),
        key("cluster.nic_rate", "bandwidth", "bit/s or B/s", "(profile node.nic_rate)",
            "Line rate per NIC, per direction"),
        key("cluster.oversubscription", "number", "ratio", "1",
            "Fat-tree leaf down:up bandwidth ratio (1 = non-blocking; 4 = cross-leaf traffic gets a quarter)"),
        key("cluster.nodes_per_leaf", "int", "nodes", "32",
            "Nodes per leaf switch and rail (scalable unit; DGX SuperPOD reference architecture: 32)"),
        // --- pricing ---
        key("pricing", "section", "", "", "What the GPUs cost"),
        one_of("pricing.basis", spellings<PriceBasis>(2), "gpu_hour",
               "What `rate` is charged for (machine_month: an 8-GPU machine)"),
        key("pricing.rate", "number", "currency", "0",
            "List price per GPU-hour or per machine-month, a plain number (0: cost reported as 0)"),
        key("pricing.currency", "string", "", "USD", "Currency of `rate`"),
        one_of("pricing.commitment", spellings<Commitment>(4), "on_demand", "Commitment the discount applies to"),
        key("pricing.discounts", "section", "", "", "Fraction off the list rate per commitment"),
        key("pricing.discounts.monthly", "fraction", "", "0%", "Discount for a monthly commitment"),
        key("pricing.discounts.quarterly", "fraction", "", "0%", "Discount for a quarterly commitment"),
        key("pricing.discounts.annual", "fraction", "", "0%", "Discount for an annual commitment"),
        // --- run (sim/run_model.hpp: expected days with checkpoints, failures and restarts) ---
        key("run", "section", "", "",
            "The whole run around the steps: checkpoint writes, failures and restarts (expected days, next to "
            "the steady-state days)"),
        key("run.checkpoint_bandwidth", "bandwidth", "B/s or bit/s", "5 GB/s",
            "Sustained checkpoint write bandwidth of one node to shared storage; nodes write in parallel (5 GB/s: "
            "an assumption, typical of one node's client throughput to a parallel file system)"),
        key("run.gpu_mtbf", "duration", "s, min, h or d", "(Llama 3: 50677 h)",
            "Mean time between failures of one GPU (the cluster's is this / GPUs). Default from Llama 3 (Dubey et "
            "al. 2024, arXiv 2407.21783, Sec. 3.3.4): 419 unexpected interruptions in 54 days on 16,384 H100s, "
            "16384 x 54 x 24 / 419 = 50,677 GPU-hours"),
        key("run.restart", "duration", "s, min, h or d", "10 min",
            "Time from a failure to training again: detect, reschedule, reload the checkpoint, warm up (10 min: an "
            "assumption; Llama 3 reports most interruptions were handled automatically)"),
        key("run.checkpoint_interval", "duration", "s, min, h or d", "",
            "Fixed time between checkpoints; absent: the Young/Daly optimum sqrt(2 x write time x cluster MTBF)"),
        // --- plans ---
        key("plans", "list", "", "",
            "Plans to compare; each overrides the top-level sections key by key (its `model` replaces the model)"),
        required("plans[].name", "string", "", "Plan name, unique and non-empty"),
    };
}

} // namespace

const std::vector<KeySpec>& scenario_keys() {
    // Built once, never modified: a constant table, not a registry.
    static const std::vector<KeySpec> table = make_table();
    return table;
}

} // namespace trainsim::model
