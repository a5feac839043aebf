// The one table of scenario keys (docs/formats.md section 1). The loader rejects every key that
// is not listed here, applies the defaults written here and parses each value by its type here;
// `trainsim keys` prints this table. To add a key: add a row here and its binding in key_bindings.cpp
// (the loader checks that the two agree).
//
// Conventions of the `default_value` column:
//   - a literal YAML value ("1", "auto", "400 Gbit/s"): the loader parses it like a written value;
//   - text in parentheses ("(heads)"): derived by the loader, explained in the description;
//   - empty: no default (the key is required, or it is optional and simply absent).
// Types: section (a map of keys), list, string, path, int, int|auto, bool, count (SI suffix
// allowed), fraction ("15%" or 0.15), number (plain), bandwidth (with unit), duration (a wall-clock
// span with unit: s, min, h, d), size (bytes with unit), rate (events per wall-clock span: '0.002/h'), enum, model.
#include "trainsim/model/framework/framework_profile.hpp"
#include "trainsim/model/input/loader.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <array>
#include <stdexcept>
#include <string>
#include <string_view>
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
            "Hugging Face config.json (llama, mistral, qwen2), relative to the scenario file; stands alone but for "
            "name and source"),
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
        required("training.tokens", "count", "tokens",
                 "Tokens to train on (e.g. 1T, 500B); not written when training.dataset_tokens is"),
        required("training.seq_len", "int", "tokens", "Tokens per sequence"),
        required("training.global_batch", "int", "sequences", "Sequences per optimizer step"),
        key("training.micro_batch", "int", "sequences", "1",
            "Sequences per micro-batch per data-parallel rank; gradient accumulation = "
            "global_batch / (micro_batch * dp)"),
        one_of("training.method", spellings<Method>(4), "pretrain",
               "What is trained: pretrain; full (a fine-tune of every weight: pre-training's workload and memory, "
               "its own evidence); lora (low-rank adapters beside frozen BF16 weights, Hu et al. 2021); qlora "
               "(adapters beside frozen 4-bit NF4 weights, Dettmers et al. 2023). docs/model.md \"Fine-tuning\""),
        key("training.lora_rank", "int", "", "8",
            "LoRA rank r (A: k x r, B: r x n per targeted weight); default PEFT's LoraConfig r and LLaMA-Factory's "
            "lora_rank (the QLoRA paper used 64)"),
        key("training.lora_targets", "list", "", "all",
            "Linear layers with adapters: a list of q, k, v, o, gate, up, down (Hugging Face's q_proj ... "
            "down_proj), qkv (q, k, v), fc1 (gate, up), fc2 (down), or all; default all, as the QLoRA paper "
            "(Sec. 4) and LLaMA-Factory's lora_target: all"),
        one_of("training.base_format", spellings<BaseFormat>(2), "bf16",
               "Storage of the frozen base weights (nf4 for method qlora when not written): bf16, or nf4 (4-bit NormalFloat with double quantisation, "
               "4.127 bits per weight, QLoRA Sec. 3; the layers' linear weights only, the embedding and head stay "
               "BF16); nf4 needs method qlora"),
        key("training.epochs", "number", "", "1", "Passes over training.dataset_tokens"),
        key("training.dataset_tokens", "count", "tokens", "",
            "Tokens of the fine-tuning set; the run trains on epochs x dataset_tokens (write it or "
            "training.tokens, not both)"),
        // --- parallel ---
        key("parallel", "section", "", "", "Parallel layout and the framework behaviours that change step time"),
        key("parallel.tp", "int", "", "1", "Tensor-parallel degree"),
        key("parallel.pp", "int", "", "1", "Pipeline-parallel degree (stages)"),
        key("parallel.vp", "int", "", "1", "Virtual pipeline chunks per stage (interleaved 1F1B when > 1)"),
        one_of("parallel.pp_schedule", spellings<PpSchedule>(6), "auto",
               "The pipeline schedule: auto (1f1b when vp is 1, interleaved when vp > 1); 1f1b; interleaved "
               "(Megatron's interleaved 1F1B, vp > 1); zb-h1 (Zero Bubble H1, Qi et al. ICLR 2024: the backward split "
               "into input- and weight-gradient passes, the weight gradients delayed into the cool-down, 1F1B's "
               "memory; vp 1); zb-v (Zero Bubble V: vp 2 chunks in a V, both the embedding and the loss on stage 0); "
               "dualpipe-v (DeepSeek's DualPipeV, deepseek-ai/DualPipe: vp 2 chunks in a V, a forward and a backward "
               "chunk issued together, at least 2 x pp micro-batches); docs/model.md \"Pipeline schedules\""),
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
                        "-<release>, e.g. nemo-24.07, deepspeed-2021; or a name of a stack that runs one: {}; "
                        "case and separators free; docs/accuracy.md \"Framework names\")",
                        fmt::join(framework_families(), ", "), fmt::join(framework_alias_names(), ", "))),
        key("parallel.stack", "string", "", "",
            "Stack profile (YAML path, relative to the scenario) fitted on your own runs by `trainsim fit-stack`: "
            "factors on the hardware profile's efficiencies and host costs as your software reaches them; "
            "--stack on the command line replaces it (docs/calibration.md)"),
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
        key("parallel.host_sync_layer", "bool", "", "false",
            "The host waits for the GPU once per layer forward and recompute, before the MLP (Megatron-DeepSpeed's "
            "torch.tensor(0.0, device=...) for moe_loss / mlp_bias: a blocking host-to-device copy)"),
        key("parallel.host_sync_batch", "bool", "", "false",
            "The host waits for the GPU when it loads each micro-batch (Megatron's get_batch: broadcast_data reads "
            "the sizes back with .cpu() and copies the tokens with .cuda()); without a pipeline only"),
        key("parallel.optimizer_per_tensor", "bool", "", "false",
            "The optimizer works tensor by tensor (DeepSpeed's FP16_Optimizer without ZeRO): a host read of each "
            "gradient's sum for the overflow check, per-tensor FP32 copies into a flat buffer and back; FP16 with "
            "sharding none only"),
        one_of("parallel.host_sync_microbatch", spellings<MicrobatchSync>(3), "none",
               "Where the trainer's timers make the host wait for the GPU: none; forward (before each micro-batch's "
               "forward: DeepSpeed's ThroughputTimer); forward-backward (before and after each micro-batch's forward "
               "and backward: Megatron-LM 2021-22's synchronizing timers); without a pipeline only"),
        one_of("parallel.grad_accumulation", spellings<GradAccumulation>(4), "fused",
               "How each micro-batch's weight gradients are accumulated: fused (inside the wgrad GEMM, Megatron-Core / "
               "TE gradient_accumulation_fusion, or into a shard after a per-micro-batch reduce-scatter: FSDP, "
               "ZeRO-2/3); megatron-ddp (Megatron-LM 2021's DDP hook adds every micro-batch's gradient into main_grad: "
               "2 + 2 x 2 B per parameter in FP16, 2 + 2 x 4 B in BF16); deepspeed (DeepSpeed's engine: in BF16 with ZeRO 0 "
               "or 1 and no offload its BF16_Optimizer, which adds each micro-batch's gradients into FP32 copies after the "
               "backward, 18 B per parameter, and is ZeRO-1 of its own: FP32 gradient all-reduce, 1/dp of the Adam state, "
               "BF16 weight all-gather, 2 + 4 B of gradients per parameter; otherwise as autograd); autograd (PyTorch adds "
               "each new gradient into the 16-bit .grad from the second micro-batch, 6 B per parameter). No pass under "
               "ZeRO-2/3, FSDP or HSDP, whose gradients are reduce-scattered every micro-batch"),
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
        one_of("parallel.optimizer_state", spellings<OptimizerState>(3), "fp32",
               "Adam state datatype: fp32 (master weights and moments, 12 B per parameter), bf16 (6 B: Apex "
               "DistributedFusedAdam dtype=bf16, Megatron-Core precision-aware optimizer) or 8bit (bitsandbytes "
               "Adam8bit: moments in 1 B each plus an FP32 constant per 2,048 values, over the master copy)"),
        key("parallel.master_weights", "bool", "", "true",
            "A master copy of the weights in the optimizer (FP32, BF16 under optimizer_state bf16); false: pure "
            "BF16 training, the optimizer updates the BF16 weights and gradients are BF16 (torchtune full "
            "fine-tune recipes, AnyPrecisionAdamW); needs precision bf16"),
        key("parallel.optimizer_in_backward", "bool", "", "false",
            "Each parameter's step runs as its gradient is ready and the gradient is freed (torchtune "
            "optimizer_in_bwd): gradients of one unit at a time; needs one data-parallel rank, no sharding, no "
            "pipeline and no gradient accumulation"),
        key("parallel.paged_optimizer", "bool", "", "false",
            "Paged optimizer (QLoRA, bitsandbytes paged_adamw): the optimizer state is paged to host memory while "
            "the activations need the GPU and back for the step, so only the larger of the two counts"),
        one_of("parallel.offload", spellings<Offload>(3), "none",
               "CPU offload: none; optimizer (FP32 master weights, Adam moments and FP32 gradients in host memory, "
               "updated by CPU Adam: ZeRO-Offload, Megatron-Core optimizer CPU offload; needs a sharded optimizer); "
               "params (also the 16-bit parameters, fetched per layer: ZeRO-Infinity, FSDP cpu_offload; needs zero3 "
               "or fsdp without pipelining)"),
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
        key("cluster.host_memory", "size", "B, GB or GiB", "(profile node.host_memory)",
            "Host memory of one node, which CPU offload fills (e.g. '2 TB')"),
        key("cluster.oversubscription", "number", "ratio", "1",
            "Fat-tree leaf down:up bandwidth ratio (1 = non-blocking; 4 = cross-leaf traffic gets a quarter)"),
        key("cluster.nodes_per_leaf", "int", "nodes", "32",
            "Nodes per leaf switch and rail (scalable unit; DGX SuperPOD reference architecture: 32)"),
        // --- pricing ---
        key("pricing", "section", "", "",
            "What the GPUs cost and how they are billed (sim/billing.hpp): the run pays whole billing units"),
        one_of("pricing.basis", spellings<PriceBasis>(3), "gpu_hour",
               "What `rate` is charged for: gpu_hour, machine_hour (one machine of cluster.gpus_per_node GPUs) or "
               "machine_month (such a machine for whole months of 730 h)"),
        key("pricing.rate", "number", "currency", "",
            "List price per GPU-hour, machine-hour or machine-month, a plain number; absent: no price (every money "
            "figure is null in JSON and 'no price' in text, and plan refuses --budget and cost rankings)"),
        key("pricing.currency", "string", "", "USD", "Currency of `rate`"),
        one_of("pricing.increment", spellings<BillingIncrement>(3), "second",
               "Billing increment of an hourly basis: a run pays whole increments (AWS EC2, Google Cloud and Azure "
               "bill Linux VMs per second; some GPU clouds bill per minute or per started hour)"),
        one_of("pricing.commitment", spellings<Commitment>(5), "on_demand",
               "How the capacity is paid for: on_demand; monthly, quarterly or annual (a term of 1, 3 or 12 months "
               "of 730 h, paid in full for every term begun, at its discount below); spot (pricing.spot.rate, with "
               "preemptions)"),
        key("pricing.discounts", "section", "", "", "Fraction off the list rate per commitment"),
        key("pricing.discounts.monthly", "fraction", "", "0%", "Discount for a monthly commitment"),
        key("pricing.discounts.quarterly", "fraction", "", "0%", "Discount for a quarterly commitment"),
        key("pricing.discounts.annual", "fraction", "", "0%", "Discount for an annual commitment"),
        key("pricing.spot", "section", "", "",
            "Spot / preemptible capacity: its price, how often a node is taken back, and the wait for capacity"),
        key("pricing.spot.rate", "number", "currency", "",
            "Spot price per GPU-hour or machine-hour (an hourly basis); absent: no spot offer"),
        key("pricing.spot.preemption_rate", "rate", "per node-hour", "",
            "How often one node is taken back, e.g. '0.002/h' (one node stops the whole job); required with "
            "pricing.spot.rate: there is no universal figure (AWS's Spot Instance Advisor publishes, per instance "
            "type and region, the share of instances interrupted per month in buckets from <5% to >20%)"),
        key("pricing.spot.restart_wait", "duration", "s, min, h or d", "0 s",
            "Waiting for replacement capacity after a preemption, before the restart (run.restart) begins"),
        // --- run (sim/run_model.hpp: expected days with checkpoints, failures and restarts) ---
        key("run", "section", "", "",
            "The whole run around the steps: slowdowns, checkpoint writes, failures, planned stops and restarts "
            "(expected days, next to the steady-state days; docs/model.md \"Whole run\")"),
        key("run.checkpoint_bandwidth", "bandwidth", "B/s or bit/s", "5 GB/s",
            "Sustained checkpoint write bandwidth of one node to shared storage; nodes write in parallel (5 GB/s: "
            "an assumption, typical of one node's client throughput to a parallel file system)"),
        key("run.gpu_mtbf", "duration", "s, min, h or d", "(Llama 3: 64149 h)",
            "Mean time between interruptions blamed on one GPU (the job's: this / GPUs). Default from Llama 3 (Dubey "
            "et al. 2024, arXiv 2407.21783, Table 5): of 419 unexpected interruptions in 54 days on 16,384 H100s, "
            "268 GPU (faulty GPU, HBM3, SRAM, system processor, silent data corruption, thermal) and 63 software or "
            "unknown: 16384 x 54 x 24 / 331 = 64,149 GPU-hours"),
        key("run.node_mtbf", "duration", "s, min, h or d", "(Llama 3: 30161 h)",
            "Mean time between interruptions blamed on one node: host, NICs, its switch and cables (the job's: this "
            "/ nodes). Default from Llama 3 Table 5: 88 of the 419 (network switch/cable 35, unplanned host "
            "maintenance 32, NIC 7, SSD, power supply, chassis, IO board, CPU, memory 14) on 2,048 nodes: "
            "2048 x 54 x 24 / 88 = 30,161 node-hours"),
        key("run.planned_interruptions", "rate", "per day", "(Llama 3: 47 in 54 d)",
            "Planned stops of the job (firmware upgrades, configuration or dataset changes), each costing a "
            "restart but no lost work. Default from Llama 3 (Sec. 3.3.4): 47 planned interruptions in 54 days"),
        key("run.restart", "duration", "s, min, h or d", "17 min",
            "Time from an interruption to training again: detect, reschedule, reload the checkpoint, warm up. "
            "Default from Llama 3's effective training time: 466 interruptions in 54 days with more than 90% "
            "effective training time make this run model give 90% at R = 1,012 s (an upper bound; 17 min)"),
        key("run.slowdown", "fraction", "", "1%",
            "Steady time added by what slows the whole job alike (the time of day). Default from Llama 3 (Sec. 3.3.4): "
            "a diurnal 1-2% throughput variation from temperature, taken as a 1% average loss"),
        key("run.stragglers", "fraction", "", "(ByteDance: 11.6%)",
            "Steady time added by stragglers: ranks slower than the rest (pipeline stage or sequence-length "
            "imbalance, garbage-collection pauses, slow or degraded nodes) that every synchronous step waits for; "
            "none with one GPU. Default from ByteDance's trace of 3,079 jobs of 128+ GPUs (Lin et al., OSDI'25, "
            "arXiv 2505.05713, Sec. 4.1): \"10.4% of the allocated GPU hours are wasted due to stragglers\", "
            "0.104 / 0.896 = 11.6% added; measured on jobs of 128+ GPUs, smaller jobs likely lose less"),
        key("run.eval_pauses", "fraction", "", "(BLOOM: 0.7%)",
            "Steady time added by evaluation pauses (in-training evaluations). Default from BLOOM-176B's training "
            "chronicle (bigscience-workshop/bigscience, train/tr11-176B-ml/chronicles.md): a 12 min evaluation every "
            "1,000 iterations of 105 s, \"about 7 iterations or 0.7% of training\"; one run's cadence, write yours"),
        key("run.data_stalls", "fraction", "", "0%",
            "Steady time added by data-loader stalls; 0: the published ones are one-off faults (BLOOM's DataLoader "
            "deadlock, SmolLM3's storage evictions) that cost a restart, not a steady share"),
        key("run.checkpoint_interval", "duration", "s, min, h or d", "",
            "Fixed time between checkpoints; absent: the Young/Daly optimum sqrt(2 x write time x cluster MTBF)"),
        // --- energy (sim/run/energy.hpp: the run's electricity from the profile's power section) ---
        key("energy", "section", "", "",
            "Electricity of an owned or co-located cluster: the power comes from the hardware profile's `power` "
            "section (GPUs at their simulated busy / idle shares, plus each node's host side); this section "
            "gives the facility overhead, the price and the grid's CO2 (docs/model.md \"Energy\")"),
        key("energy.pue", "number", "ratio", "1",
            "Power usage effectiveness: facility power over IT power (cooling, power distribution). 1 = the IT "
            "equipment only (the default: no facility is assumed); hyperscale data centres report ~1.1, the "
            "industry average is ~1.5 (Uptime Institute 2023 survey: 1.58)"),
        key("energy.price", "number", "currency per kWh", "",
            "Electricity price per kWh, a plain number; absent: the electricity cost is null"),
        key("energy.currency", "string", "", "(pricing.currency)", "Currency of `energy.price`"),
        key("energy.grid_intensity", "number", "g CO2 per kWh", "",
            "Carbon intensity of the electricity (e.g. China's grid 570, its Ministry of Ecology and Environment's 2022 national average; the EU's ~250, Ember 2023); absent: CO2 "
            "is null"),
        // --- plans ---
        key("plans", "list", "", "",
            "Plans to compare; each overrides the top-level sections key by key (its `model` replaces the model)"),
        required("plans[].name", "string", "", "Plan name, unique and non-empty"),
    };
}

// The physical range of every number a scenario can write (issue #19): a value outside it is not
// a plan anyone can run, and some (a NIC of 1e-9 Gbit/s, 1e8 gathers per layer) would make the
// simulation take years or overflow its clock. Bounds are generous: the largest thing built or
// announced, times a margin, so no real plan is refused. Written in each key's own syntax.
struct Range {
    std::string_view path, min, max, basis;
};
constexpr Range kRanges[] = {
    {"model.layers", "1", "1024", "the deepest published dense decoders have ~130 layers"},
    {"model.hidden", "1", "262144", "the widest published dense decoders have hidden ~25k"},
    {"model.heads", "1", "16384", "published models have up to 128 query heads"},
    {"model.kv_heads", "1", "16384", "at most the query heads"},
    {"model.head_dim", "1", "16384", "published heads are 64-256 wide"},
    {"model.ffn", "1", "1048576", "published FFN widths are up to ~100k"},
    {"model.vocab", "1", "16777216", "published vocabularies are up to ~260k"},
    {"training.tokens", "1", "1000T", "the largest published runs are ~15-40T tokens"},
    {"training.dataset_tokens", "1", "1000T", "as training.tokens"},
    {"training.epochs", "0", "10000", "fine-tunes run 1-10 passes over their data"},
    {"training.lora_rank", "1", "65536", "published LoRA ranks are 4-256"},
    {"training.seq_len", "1", "16777216", "published contexts reach 10M tokens"},
    {"training.global_batch", "1", "16777216", "published global batches are up to ~16k sequences"},
    {"training.micro_batch", "1", "65536", "at most the global batch, which is bounded likewise"},
    {"parallel.tp", "1", "1024", "a tensor-parallel group lies within one NVLink domain (<= 576 GPUs)"},
    {"parallel.pp", "1", "1024", "at most one stage per layer"},
    {"parallel.vp", "1", "1024", "at most one chunk per layer"},
    {"parallel.cp", "1", "16384", "context-parallel groups of published runs are up to 32"},
    {"parallel.dp", "1", "1048576", "GPUs of the largest clusters (~200k)"},
    {"parallel.recompute_layers", "1", "1024", "at most the layers"},
    {"parallel.dp_bucket_params", "1M", "1T",
     "Megatron's default bucket is 40M; below 1M the buckets are more collectives than a step has kernels"},
    {"parallel.fsdp_gathers_per_layer", "1", "64", "one per tensor: a transformer layer has ~12 weight tensors"},
    {"parallel.fsdp_reduce_scatters_per_layer", "1", "64", "one per tensor: a transformer layer has ~12"},
    {"parallel.fsdp_prefetch_bucket_params", "0", "1T", "at most a whole model"},
    {"parallel.fsdp_reuse_distance_params", "0", "1000T", "any distance beyond a model is unlimited"},
    {"cluster.nodes", "1", "65536", "the largest clusters have ~25k 8-GPU nodes"},
    {"cluster.gpus_per_node", "1", "576", "the largest announced NVLink domain (NVL576)"},
    {"cluster.nics_per_node", "0", "64", "servers carry up to 8-16 NICs"},
    {"cluster.nic_rate", "1 Gbit/s", "10 Tbit/s", "NICs on sale run at 1-800 Gbit/s (1.6 Tbit/s announced)"},
    {"cluster.oversubscription", "1", "64", "fat trees are built at 1:1 to ~8:1"},
    {"cluster.host_memory", "1 GiB", "1024 TiB", "servers carry 0.1-4 TB of memory"},
    {"cluster.nodes_per_leaf", "1", "65536", "at most the nodes"},
    {"pricing.rate", "0", "1000000000", "a GPU-hour or machine-month costs 0.1-1e6 in any currency"},
    {"pricing.spot.rate", "0", "1000000000", "a GPU-hour or machine-hour costs 0.1-1e5 in any currency"},
    {"pricing.spot.preemption_rate", "0/h", "1/min", "spot nodes are taken back every few hours to months"},
    {"pricing.spot.restart_wait", "0 s", "30 d", "capacity returns in minutes to days"},
    {"run.checkpoint_bandwidth", "1 MB/s", "10 TB/s", "a node writes to storage at ~0.1-100 GB/s"},
    {"run.gpu_mtbf", "1 min", "1000000 h", "published GPU MTBFs are 10^4-10^5 h (Llama 3: 64149 h)"},
    {"run.node_mtbf", "1 min", "1000000 h", "published node MTBFs are 10^3-10^5 h (Llama 3: 30161 h)"},
    {"run.planned_interruptions", "0/d", "100/d", "planned stops come every few hours to months"},
    {"run.restart", "0 s", "30 d", "restarts take minutes to hours"},
    {"run.checkpoint_interval", "1 s", "365 d", "checkpoints are written every minutes to hours"},
    {"energy.pue", "1", "3", "PUE is facility over IT power, at least 1; data centres report 1.05-2.5"},
    {"energy.price", "0", "1000", "electricity costs 0.01-1 per kWh in any common currency (up to ~200 in yen or won)"},
    {"energy.grid_intensity", "0", "2000", "grids emit 0-1100 g CO2 per kWh (coal ~1000)"},
};

std::vector<KeySpec> with_ranges(std::vector<KeySpec> table) {
    for (const Range& r : kRanges) {
        auto k = std::find_if(table.begin(), table.end(), [&](const KeySpec& s) { return s.path == r.path; });
        if (k == table.end()) throw std::logic_error(fmt::format("scenario_keys: range for unknown key '{}'", r.path));
        k->range_min = r.min;
        k->range_max = r.max;
        k->range_basis = r.basis;
    }
    return table;
}

} // namespace

const std::vector<KeySpec>& scenario_keys() {
    // Built once, never modified: a constant table, not a registry.
    static const std::vector<KeySpec> table = with_ranges(make_table());
    return table;
}

} // namespace trainsim::model
