// Plain value structs a scenario is loaded into. After the loader, code trusts them.
#pragma once

#include "trainsim/model/core/hardware_profile.hpp"
#include "trainsim/model/core/stack_profile.hpp"
#include "trainsim/model/core/units.hpp"

#include <limits>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace trainsim::model {

enum class FfnType { swiglu, gelu, relu2 };
enum class Sharding { none, dist_opt, zero1, zero2, zero3, fsdp, hsdp };
enum class Recompute { none, selective, full };
// What lives in host memory (sim/offload.hpp): nothing; the optimizer (FP32 master weights, Adam
// moments, FP32 gradients), updated by the CPU (ZeRO-Offload, Megatron-Core's optimizer CPU
// offload); or also the 16-bit parameters, fetched per layer (ZeRO-Infinity, FSDP cpu_offload).
enum class Offload { none, optimizer, params };
enum class IntraFabric { nvswitch, nvlink_bridge, pcie };
enum class InterFabric { infiniband, roce, ethernet };
// What a price is charged for (sim/billing.hpp): a GPU-hour, a machine-hour (one machine of
// cluster.gpus_per_node GPUs) or a machine-month (whole months of 730 h).
enum class PriceBasis { gpu_hour, machine_month, machine_hour };
// How the capacity is paid for: on demand, a term paid in full (monthly / quarterly / annual, at the
// discount the pricing lists), or spot / preemptible capacity (its own rate, preempted).
enum class Commitment { on_demand, monthly, quarterly, annual, spot };
// The billing granularity of an hourly basis: a run pays whole increments.
enum class BillingIncrement { second, minute, hour };
// How the attention core is computed (docs/model.md "Attention"):
//   flash   — a fused flash-attention kernel (cuDNN / FlashAttention-2/3 via Transformer Engine);
//   triton  — the Triton flash-attention kernel (llm-foundry's attn_impl: triton);
//   unfused — batched QK^T and PV GEMMs around a separate softmax kernel that writes the s x s
//             scores to memory (Megatron-LM 2021/2022 before flash attention).
enum class AttentionImpl { flash, triton, unfused, flash2 };
// Datatype of the Adam state kept per parameter: FP32 master weights and moments (Megatron,
// DeepSpeed, PyTorch defaults), or BF16 (Apex DistributedFusedAdam dtype=bf16 as NeMo's SFT
// config sets it; Megatron-Core's precision-aware optimizer with BF16 moments and main params).
// int8 (spelled 8bit): bitsandbytes' 8-bit blockwise Adam (Dettmers et al. 2022, "8-bit Optimizers
// via Block-wise Quantization", arXiv 2110.02861): m and v in 1 B each plus one FP32 absmax per
// block of 2,048 values (bnb.optim.Adam8bit, block size 2048), over an FP32 master copy when
// parallel.master_weights is true, over the BF16 weights themselves when it is false.
enum class OptimizerState { fp32, bf16, int8 };
// What a run trains (training.method; docs/model.md "Fine-tuning"): pre-training, or a
// fine-tune of every weight (full), or low-rank adapters beside frozen BF16 weights (lora, Hu et
// al. 2021, arXiv 2106.09685) or beside frozen 4-bit NF4 weights (qlora, Dettmers et al. 2023,
// arXiv 2305.14314). full is pretrain's workload and memory; it differs in the evidence behind
// its band (docs/trust.md) and in the words the reports use (days to fine-tune).
enum class Method { pretrain, full, lora, qlora };
// Storage of the frozen base weights of a LoRA / QLoRA run: BF16, or NF4 with double quantisation
// (QLoRA Sec. 3: 4-bit NormalFloat, block size 64, FP8 block constants quantised again per 256
// blocks with an FP32 constant).
enum class BaseFormat { bf16, nf4 };
// How ZeRO-3 / FSDP gather a layer's weights: the whole layer before it runs (PyTorch FSDP wraps
// a transformer block), or module by module, each weight just before its GEMM (DeepSpeed's
// fetch_sub_module), the next one prefetched while the current one computes.
enum class FsdpFetch { layer, module };
// What `recompute: selective` rebuilds in backward: the attention core (Megatron, Korthikanti et
// al. 2022), or every op of the layer except its attention kernel and every other matmul
// (torchtitan's op-level selective activation checkpointing).
enum class SelectiveRecompute { attention, alternate_matmuls };
// How the element-wise ops of a layer (norms, RoPE, activation) run: fused kernels (Transformer
// Engine / Apex, or torch.compile), or PyTorch eager, one kernel and memory pass per op.
enum class Elementwise { fused, eager };
// The loss over the vocabulary: Megatron's vocab-parallel cross-entropy (in place over one FP32
// copy of the logits), PyTorch's F.cross_entropy on FP32 logits (log-softmax kept for backward,
// a dense gradient of the loss), or a fused kernel over the BF16 logits (flash-attn's
// CrossEntropyLoss: one pass forward, one read and one write backward).
enum class CrossEntropy { megatron, pytorch, fused };
// How the host issues a layer's kernels (docs/model.md "Host"): which kernels the stack launches
// per op, and the host time of each launch (model::host_costs).
//   te       — Megatron-Core / NeMo modules over Transformer Engine: fused norm + GEMM, fused
//              bias-dropout-add, fused attention, weight gradients accumulated inside the GEMM;
//   legacy   — Megatron-LM 2021-22 model code (also under Megatron-DeepSpeed): Apex fused norm and
//              softmax, TorchScript bias-GeLU and bias-dropout-add, biases added by addmm,
//              separate dropout kernels, a gradient-accumulation kernel per parameter;
//   eager    — plain PyTorch modules, one kernel per element-wise op (torchtitan eager, generic);
//   compiled — torch.compile (Inductor) regions: element-wise ops fused into generated kernels
//              launched from a generated wrapper, no per-op dispatch;
//   graphs   — the layer's kernels replayed from a captured CUDA graph.
enum class HostDispatch { te, legacy, eager, compiled, graphs };
// Where the trainer's own timing makes the host wait for the GPU around each micro-batch
// (Parallel::host_sync_microbatch): nowhere; before each micro-batch's forward (DeepSpeed's
// ThroughputTimer); before and after each micro-batch's forward and backward (Megatron-LM
// 2021-22's synchronizing timers).
enum class MicrobatchSync { none, forward, forward_backward };
// How a micro-batch's weight gradients join those of the earlier micro-batches of the step
// (Parallel::grad_accumulation; docs/model.md "Gradient accumulation"):
//   fused        — inside the weight-gradient GEMM (Megatron-Core / Transformer Engine
//                  gradient_accumulation_fusion: C += A B into the FP32 main_grad), or into a
//                  shard after a per-micro-batch reduce-scatter (FSDP, ZeRO-2/3): no pass of its own;
//   megatron-ddp — Megatron-LM 2021's local DDP: a hook per parameter adds the gradient into the
//                  contiguous main_grad buffer after every micro-batch's backward
//                  (main_grad.add_(grad); param.grad = None);
//   deepspeed    — DeepSpeed's engine: in BF16 with ZeRO 0 or 1 its BF16_Optimizer adds every
//                  micro-batch's BF16 gradients into FP32 copies after the backward
//                  (update_hp_grads); otherwise PyTorch's autograd accumulation below;
//   autograd     — PyTorch's AccumulateGrad: from the second micro-batch each parameter's new
//                  gradient is added into its 16-bit .grad.
// The pipeline schedule (parallel.pp_schedule; docs/model.md "Pipeline schedules"): automatic is
// today's rule (1F1B for vp == 1, interleaved 1F1B for vp > 1); zb-h1 and zb-v are the Zero Bubble
// schedules (Qi et al., ICLR 2024), dualpipe-v DeepSeek's V-shape DualPipe (deepseek-ai/DualPipe).
enum class PpSchedule { automatic, one_f_one_b, interleaved, zb_h1, zb_v, dualpipe_v };
enum class GradAccumulation { fused, megatron_ddp, deepspeed, autograd };
// How ranks are numbered (innermost first), i.e. which groups share a node. The data- and
// context-parallel ranks form one block (CP inside DP), as in Megatron. Megatron's default is
// tp-cp-dp-pp: TP inside a node, then CP and DP, pipeline stages outermost.
enum class RankOrder { tp_cp_dp_pp, tp_pp_cp_dp, cp_dp_tp_pp, cp_dp_pp_tp, pp_tp_cp_dp, pp_cp_dp_tp };

// A dense decoder-only transformer.
struct ModelArch {
    std::string name;
    std::string source;  // where the shape comes from (paper, config.json)
    int layers = 0;
    int hidden = 0;
    int heads = 0;
    int kv_heads = 0;      // == heads for MHA; < heads for GQA
    int head_dim = 0;      // usually hidden / heads
    int ffn = 0;           // FFN inner width (per gate/up branch for swiglu)
    FfnType ffn_type = FfnType::swiglu;
    int vocab = 0;
    bool tied_embeddings = false;
};

// The linear layers of a transformer layer that carry LoRA adapters (training.lora_targets), as
// Hugging Face names their modules (q_proj ... down_proj): a bit each.
enum LoraTarget : unsigned {
    kLoraQ = 1u << 0, kLoraK = 1u << 1, kLoraV = 1u << 2, kLoraO = 1u << 3,
    kLoraGate = 1u << 4, kLoraUp = 1u << 5, kLoraDown = 1u << 6,
    kLoraAll = (1u << 7) - 1u,
};

struct Training {
    double tokens = 0;    // tokens to train on (epochs x dataset_tokens when dataset_tokens is given)
    int seq_len = 0;      // tokens per sequence
    int global_batch = 0; // sequences per optimizer step
    int micro_batch = 1;  // sequences per micro-batch per data-parallel rank
    Method method = Method::pretrain;
    // LoRA rank r: each targeted weight W (k x n) gets A (k x r) and B (r x n). Default 8, PEFT's
    // LoraConfig r and LLaMA-Factory's lora_rank default (the QLoRA paper used 64).
    int lora_rank = 8;
    // LoraTarget bits; default every linear layer of the block, as the QLoRA paper found necessary
    // to match full fine-tuning (Dettmers et al. 2023, Sec. 4 "LoRA on all linear transformer
    // block layers") and LLaMA-Factory's lora_target: all does.
    unsigned lora_targets = kLoraAll;
    // Frozen base weights' storage: bf16 for lora, nf4 for qlora (the loader sets nf4 for qlora
    // unless written).
    BaseFormat base_format = BaseFormat::bf16;
    double epochs = 1;          // passes over dataset_tokens
    double dataset_tokens = 0;  // tokens of the fine-tuning set; 0: not given (tokens is the count)
};

// Parallel layout plus the framework behaviours that change step time. Framework differences
// are explicit, named properties with documented defaults (a well-tuned Megatron-Core stack).
struct Parallel {
    int tp = 1;
    int pp = 1;
    int vp = 1;  // virtual pipeline chunks per stage (interleaved 1F1B when > 1)
    PpSchedule pp_schedule = PpSchedule::automatic;
    int cp = 1;
    int dp = 1;  // derived from the GPU count when the scenario says `auto`
    bool sequence_parallel = false;
    Sharding sharding = Sharding::dist_opt;
    Recompute recompute = Recompute::none;
    // Under full recompute, the layers of each model chunk that are recomputed, counted from the
    // chunk's first layer; the others keep their activations (Megatron --recompute-method block
    // --recompute-num-layers N, NeMo activations_checkpoint_method: block). 0: every layer.
    int recompute_layers = 0;
    SelectiveRecompute selective_recompute = SelectiveRecompute::attention;
    // The framework whose behaviours fill every property below the scenario does not write
    // (model::framework_profile; the families are model::framework_families(), each optionally
    // "-<release>"). Empty: the properties' own defaults, a well-tuned Megatron-Core stack.
    std::string framework;
    // The stack profile (a path, relative to the scenario) whose factors the plan's hardware profile
    // runs at (stack_profile.hpp; `trainsim fit-stack` writes one). Empty: none.
    std::string stack;
    bool overlap_grad_reduce = true;   // DP grad reduce in buckets during backward
    bool overlap_param_gather = true;  // dist-opt / ZeRO param all-gather overlapped with forward
    bool tp_comm_overlap = false;      // TP collectives overlapped with GEMMs (TE userbuffers)
    bool fsdp_prefetch = true;         // FSDP/ZeRO-3 gathers of the next layer prefetched
    double dp_bucket_params = 40e6;    // parameters per DP gradient bucket (Megatron default)
    AttentionImpl attention = AttentionImpl::flash;
    bool dropout = false;              // dropout after attention / MLP and on the attention scores
    Elementwise elementwise = Elementwise::fused;
    CrossEntropy cross_entropy = CrossEntropy::megatron;
    FsdpFetch fsdp_fetch = FsdpFetch::layer;
    // ZeRO-3 / FSDP: all-gathers issued per layer (1 = the layer's parameters flattened into one
    // collective, as PyTorch FSDP does; DeepSpeed 2021 gathered each parameter tensor on its own).
    int fsdp_gathers_per_layer = 1;
    // ZeRO-3 / FSDP prefetch depth: parameters of the next layer gathered ahead of use
    // (0: the whole next layer, as PyTorch FSDP's forward/backward prefetch does; DeepSpeed
    // ZeRO-3 prefetches at most stage3_prefetch_bucket_size = 5e7 parameters).
    double fsdp_prefetch_bucket_params = 0;
    // ZeRO-3 / FSDP under full recompute: a weight gathered for a layer's recompute stays for its
    // backward only if fewer parameters than this are used in between (DeepSpeed
    // stage3_max_reuse_distance, default 1e9; model::regathered_after_recompute); otherwise it is
    // gathered again. Infinite (the default): always kept, as PyTorch FSDP does with the
    // checkpointed block inside the FSDP unit. 0: always gathered again.
    double fsdp_reuse_distance_params = std::numeric_limits<double>::infinity();
    // ZeRO-3 / FSDP: gradient reduce-scatters per layer (1: the layer's gradients flattened into
    // one collective, as PyTorch FSDP does; DeepSpeed 2021 reduced each parameter tensor on its own).
    int fsdp_reduce_scatters_per_layer = 1;
    // ZeRO-3 / FSDP: every parameter gather first waits for all the rank's queued GPU work,
    // gradient reduce-scatters included (DeepSpeed < 0.6 called torch.cuda.synchronize() before
    // each all_gather and after waiting for it).
    bool fsdp_gather_sync = false;
    // ZeRO-3 / FSDP collectives through PyTorch's list API (one copy kernel per rank per
    // collective; DeepSpeed 2021 on PyTorch 1.8) rather than flat all_gather_into_tensor.
    bool list_collectives = false;
    // Megatron keeps FP32 main gradients and reduces them in FP32 (bf16 / fp8 training; with
    // --fp16 they are FP16). false: gradients live and are reduced in the 16-bit compute dtype
    // (NeMo's distributed_fused_adam with grad_sync_dtype bf16). ZeRO / FSDP always use 16 bits.
    bool main_grads_fp32 = true;
    // ZeRO / FSDP: gradients reduce-scattered in FP32 (PyTorch FSDP MixedPrecisionPolicy
    // reduce_dtype float32, torchtitan's only choice) rather than the 16-bit compute dtype.
    bool fsdp_reduce_fp32 = false;
    // Pipeline sends overlapped with the next compute (Megatron-Core's default). false: the rank
    // waits for each send to complete (Megatron-LM 2021-22 p2p_communication: batch_isend_irecv,
    // wait, then torch.cuda.synchronize() against a race).
    bool overlap_p2p = true;
    // Without sequence parallelism every TP rank holds the whole activation a pipeline stage
    // sends. Megatron-LM's scatter/gather optimisation (Narayanan et al. SC'21 Sec. 4.1, Fig. 9;
    // --scatter-gather-tensors-in-pipeline, on by default until Megatron-Core) sends 1/tp of it
    // from each rank and all-gathers it over NVLink on the receiver; false: each TP rank sends
    // the whole tensor (Megatron-Core's p2p_communication). With sequence parallelism the
    // activation is already split over the TP ranks and neither applies.
    bool pp_scatter_gather = false;
    // How the host issues kernels (see HostDispatch); the per-launch host costs are
    // model::host_costs(host_dispatch).
    HostDispatch host_dispatch = HostDispatch::te;
    // The host waits for each pipeline transfer to finish before going on (Megatron-LM 2021-22
    // p2p_communication: torch.cuda.synchronize() after batch_isend_irecv, "to protect against
    // race condition when using batch_isend_irecv()").
    bool host_sync_p2p = false;
    // The host waits for the GPU once per transformer-layer forward (and recompute), before the
    // MLP: Megatron-DeepSpeed's ParallelTransformerLayer.forward builds `moe_loss` and `mlp_bias`
    // with torch.tensor(0.0, device=...) on every call, MoE or not (microsoft/Megatron-DeepSpeed
    // megatron/model/transformer.py, 2022 on). A tensor made from a Python scalar on a CUDA device
    // is a blocking host-to-device copy (PyTorch's copy_ without non_blocking: cudaMemcpyAsync and
    // cudaStreamSynchronize, aten/src/ATen/native/cuda/Copy.cu memcpy_and_sync), so the host stops
    // until the compute stream has run everything queued, the attention block's TP all-reduce
    // included (ProcessGroupNCCL makes the compute stream wait for it).
    bool host_sync_layer = false;
    // The host waits for the GPU each time it loads a micro-batch: Megatron's get_batch (and
    // Megatron-DeepSpeed's get_batch_pipe) calls mpu.broadcast_data, which copies the key sizes to
    // the device, broadcasts them over the TP group and reads them back with .cpu(), then copies
    // the tokens with .cuda() (blocking copies: the host stops until the compute stream has run
    // everything queued), and builds the labels, loss mask, causal mask and position ids
    // (megatron/mpu/data.py _build_key_size_numel_dictionaries and broadcast_data; pretrain_gpt.py
    // get_batch / get_ltor_masks_and_position_ids, 2021-23). Modelled without a pipeline only
    // (with one, the transfers' own waits hold the host: stage_program.cpp).
    bool host_sync_batch = false;
    // The trainer's timers synchronize the device around each micro-batch. forward_backward:
    // Megatron-LM 2021-22's _Timer.start / stop call torch.cuda.synchronize() (megatron/
    // global_vars.py, until the late-2022 rewrite with timing levels) and its schedules wrap
    // every micro-batch's forward in timers('forward-compute') and its backward in
    // timers('backward-compute') (megatron/schedules.py forward_step / backward_step). forward:
    // DeepSpeed's PipelineEngine starts its ThroughputTimer at every micro-batch's forward
    // (_exec_forward_pass: self.tput_timer.start()), and ThroughputTimer.start() calls
    // torch.cuda.synchronize() from the second step on (deepspeed/utils/timer.py, 2021-23).
    MicrobatchSync host_sync_microbatch = MicrobatchSync::none;
    // DeepSpeed's FP16_Optimizer, its optimizer without ZeRO (sharding none, FP16; deepspeed/
    // runtime/fp16/fused_optimizer.py step()), works parameter tensor by parameter tensor: the
    // overflow check reads each gradient's sum back to the host (CheckOverflow.has_overflow_serial
    // -> _has_inf_or_nan: float(x.float().sum()), deepspeed/runtime/utils.py), every gradient is
    // copied to FP32 (p.grad.to(float32)) and flattened into one buffer, and after the update
    // every weight is copied back from the flat FP32 master (p.data.copy_(q.data)).
    bool optimizer_per_tensor = false;
    // How each micro-batch's weight gradients are accumulated (see GradAccumulation).
    GradAccumulation grad_accumulation = GradAccumulation::fused;
    RankOrder order = RankOrder::tp_cp_dp_pp;
    // Adam as one fused kernel (Apex / Transformer Engine / DeepSpeed FusedAdam) or as PyTorch's
    // multi-tensor `foreach` implementation, one element-wise pass per step of the update.
    bool fused_optimizer = true;
    // FP8 primary weights (Transformer Engine fp8_model_init, NeMo fp8_params, Megatron-Core
    // --fp8-param-gather): GEMM weights kept only in FP8 (1 B, plus the FP8 transpose), no BF16
    // copy, and gathered by the distributed optimizer in FP8. Needs precision fp8.
    bool fp8_params = false;
    // Apex DistributedFusedAdam store_param_remainders (NeMo's distributed_fused_adam): the FP32
    // master weights kept as the 16 low-order bits that complete the BF16 weights, 2 B instead
    // of 4 per parameter. Needs BF16 weights and a sharded optimizer.
    bool master_param_remainders = false;
    // Adam state datatype: fp32 (master 4 + moments 8 = 12 B per parameter) or bf16 (6 B).
    OptimizerState optimizer_state = OptimizerState::fp32;
    // CPU offload (see Offload).
    Offload offload = Offload::none;
    // Full fine-tuning recipes' memory tricks (docs/model.md "Fine-tuning"):
    // A master copy of the weights in the optimizer (FP32, or BF16 under optimizer_state bf16).
    // false: pure BF16 training, the BF16 weights are what the optimizer updates (torchtune's
    // full_finetune recipes with dtype bf16; AnyPrecisionAdamW) and gradients are BF16.
    bool master_weights = true;
    // Each parameter's optimizer step runs from a hook as soon as its gradient is ready and the
    // gradient is freed (torchtune optimizer_in_bwd, PyTorch register_post_accumulate_grad_hook):
    // gradient memory is about one unit's (a layer, the embedding or the head). torchtune allows it
    // without gradient accumulation only; modelled for one data-parallel rank without sharding.
    bool optimizer_in_backward = false;
    // Paged optimizer (QLoRA Sec. 3, bitsandbytes paged_adamw: NVIDIA unified memory): the optimizer
    // state is evicted to host memory when the GPU runs short and paged back for the update, so it
    // competes with the activations only at the step (MemoryBreakdown::step_transient).
    bool paged_optimizer = false;
};

struct Cluster {
    std::string gpu;  // profile id or path, as written
    int nodes = 1;
    int gpus_per_node = 8;
    IntraFabric intra = IntraFabric::nvswitch;
    InterFabric inter = InterFabric::infiniband;
    int nics_per_node = 8;
    Bandwidth nic_rate = Bandwidth(400e9 / 8);  // per NIC, per direction
    // Fat tree: leaf down-link : up-link bandwidth ratio (1 = non-blocking) and nodes per leaf
    // (a scalable unit; NVIDIA DGX SuperPOD reference architecture: 32).
    double oversubscription = 1.0;
    int nodes_per_leaf = 32;
    // Host memory of one node (CPU offload); absent: the profile's node.host_memory.
    std::optional<Bytes> host_memory;
    [[nodiscard]] int num_gpus() const { return nodes * gpus_per_node; }
};

// Spot / preemptible capacity: cheaper, and taken back (pricing.spot.*).
struct SpotOffer {
    std::optional<double> rate;           // currency per basis unit (GPU-hour or machine-hour)
    double preemptions_per_node_hour = 0; // one node taken back stops the whole job
    double restart_wait_s = 0;            // waiting for capacity after a preemption, before the restart
};

struct Pricing {
    PriceBasis basis = PriceBasis::gpu_hour;
    // Currency per GPU-hour, per machine-hour or per machine-month (one machine of
    // cluster.gpus_per_node GPUs). Absent: no price was given; every money figure is then unknown
    // (null in JSON, "no price" in text), never 0.
    std::optional<double> rate;
    std::string currency = "USD";
    BillingIncrement increment = BillingIncrement::second; // hourly bases
    Commitment commitment = Commitment::on_demand;
    std::map<Commitment, double> discounts;  // fraction off the list rate
    SpotOffer spot;
};

// Llama 3 (Dubey et al. 2024, arXiv 2407.21783, Sec. 3.3.4 and Table 5): a 54-day snapshot of
// pre-training on 16,384 H100 GPUs (2,048 nodes of 8) had 466 job interruptions, 47 planned and 419
// unexpected, with more than 90% effective training time. Table 5 blames the 419 on:
//   the GPU (268): faulty GPU 148, HBM3 72, SRAM 19, GPU system processor 17, silent data
//     corruption 6, thermal interface + sensor 6; and software or unknown (63): software bug 54,
//     dependency 2, NCCL watchdog timeouts 7 -- counted per GPU;
//   the host and its network (88): network switch/cable 35, unplanned host maintenance 32, NIC 7,
//     SSD 3, power supply 3, server chassis 2, IO expansion board 2, CPU 2, system memory 2 --
//     counted per node.
inline constexpr double kLlama3GpuMtbfHours = 16384.0 * 54.0 * 24.0 / (268.0 + 63.0); // 64,149 GPU-hours
inline constexpr double kLlama3NodeMtbfHours = 2048.0 * 54.0 * 24.0 / 88.0;           // 30,161 node-hours
// Planned interruptions (firmware upgrades, operator configuration or dataset changes), per day of
// the job: 47 in 54 days.
inline constexpr double kLlama3PlannedPerDay = 47.0 / 54.0;
// The time lost per interruption besides the work since the last checkpoint (detect, reschedule,
// reload, warm up), from Llama 3's effective training time: with its 466 interruptions in 54 days
// (405B parameters on 2,048 nodes: a 0.55 s checkpoint write and a Young/Daly interval of 111 s
// here), run_model.hpp gives 90% effective training time (1 / overhead) at R = 1,012 s. More than
// 90% was reported, so this is an upper bound; taken as 17 min.
inline constexpr double kLlama3RestartS = 17.0 * 60.0;
// Llama 3 (Sec. 3.3.4): "a diurnal 1-2% throughput variation based on time-of-day" from
// temperature; its average loss against the best hours is taken as 1%.
inline constexpr double kLlama3DiurnalSlowdown = 0.01;
// Stragglers: ByteDance's five-month trace of 3,079 pre-training jobs of 128+ GPUs on a dedicated,
// health-checked cluster (Lin et al., "Understanding Stragglers in Large Model Training Using
// What-if Analysis", OSDI'25, arXiv 2505.05713, Sec. 4.1): "10.4% of the allocated GPU hours are
// wasted due to stragglers" against a what-if replay of the same steps without them (causes, Sec. 5:
// mostly the job's own, pipeline stage imbalance and sequence-length imbalance, then garbage-collection
// pauses; slow or faulty workers in 1.7% of straggling jobs). Wasting 10.4% of the time stretches the
// steady time by 0.104 / 0.896 = 11.6%.
inline constexpr double kByteDanceStragglerWaste = 0.104;
inline constexpr double kStragglerStretch = kByteDanceStragglerWaste / (1.0 - kByteDanceStragglerWaste);
// Evaluation pauses: BLOOM-176B's chronicle (bigscience-workshop/bigscience,
// train/tr11-176B-ml/chronicles.md, 2022-03-18): "A single eval iteration is about 12 min ... we
// perform it once every 1k iteration and it 'costs' about 7 iterations or 0.7% of training" (105 s
// iterations). One run's cadence, the only published share found; write your own.
inline constexpr double kBloomEvalPauses = 0.007;

// The whole run around the steps: checkpoints, failures, planned interruptions, restarts and what
// slows the steady throughput (sim/run_model.hpp). Defaults and their sources are in the key table
// (run.*, scenario_keys.cpp).
struct RunSettings {
    // Sustained checkpoint write bandwidth of one node to shared storage (nodes write in parallel).
    Bandwidth checkpoint_bandwidth_per_node = Bandwidth(5e9);
    double gpu_mtbf_hours = kLlama3GpuMtbfHours;   // mean time between interruptions blamed on one GPU
    double node_mtbf_hours = kLlama3NodeMtbfHours; // ... on one node (host, NICs, its switch and cables)
    double planned_per_day = kLlama3PlannedPerDay; // planned interruptions of the job per day
    // Time from an interruption to training again: detect, reschedule, reload the checkpoint, warm up.
    double restart_s = kLlama3RestartS;
    // Fixed checkpoint interval instead of the Young/Daly optimum.
    std::optional<double> checkpoint_interval_s;
    // Fractions of the steady time added: the time of day (and any slowdown of the whole job),
    // stragglers (slow ranks the others wait for; none with one GPU), evaluation pauses, data-loader
    // stalls.
    double slowdown = kLlama3DiurnalSlowdown;
    double straggler_fraction = kStragglerStretch;
    double eval_fraction = kBloomEvalPauses;
    double data_stall_fraction = 0;
};

// What the electricity of an owned or co-located cluster costs and emits (energy.*; the power
// itself comes from the hardware profile's power section; sim/run/energy.hpp).
struct EnergySettings {
    // Facility power over IT power (power usage effectiveness). 1 = the IT equipment's own power.
    double pue = 1.0;
    std::optional<double> price_per_kwh;      // absent: no electricity price (the cost is null)
    std::optional<std::string> currency;      // absent: pricing.currency
    std::optional<double> grid_g_co2_per_kwh; // absent: no grid intensity (CO2 is null)
};

// One fully resolved plan: everything the simulator needs, nothing to read from disk.
struct Plan {
    std::string name;
    ModelArch model;
    Training training;
    Parallel parallel;
    Precision precision = Precision::bf16;
    Cluster cluster;
    Pricing pricing;
    RunSettings run;
    EnergySettings energy;
    HardwareProfile hardware;  // resolved from cluster.gpu (or --profile); with a stack, as the stack runs it
    // The stack profile applied to `hardware` (parallel.stack or --stack; stack_profile.hpp), shared
    // by the plans of a search; null: none (the hardware profile as it is).
    std::shared_ptr<const StackProfile> stack;
    [[nodiscard]] int num_gpus() const { return cluster.num_gpus(); }
    [[nodiscard]] int grad_accum() const {
        return training.global_batch / (training.micro_batch * parallel.dp);
    }
};

struct Scenario {
    std::string file;
    std::string title;
    std::vector<Plan> plans;
    // What loaded but should be said (an unknown framework modelled as a generic stack), with
    // file:line:col and key; the CLI prints them on stderr.
    std::vector<std::string> warnings;
};

[[nodiscard]] std::string to_string(FfnType v);
[[nodiscard]] std::string to_string(Sharding v);
[[nodiscard]] std::string to_string(Recompute v);
[[nodiscard]] std::string to_string(Offload v);
[[nodiscard]] std::string to_string(IntraFabric v);
[[nodiscard]] std::string to_string(InterFabric v);
[[nodiscard]] std::string to_string(PriceBasis v);
[[nodiscard]] std::string to_string(Commitment v);
[[nodiscard]] std::string to_string(BillingIncrement v);
[[nodiscard]] std::string to_string(AttentionImpl v);
[[nodiscard]] std::string to_string(RankOrder v);
[[nodiscard]] std::string to_string(OptimizerState v);
[[nodiscard]] std::string to_string(FsdpFetch v);
[[nodiscard]] std::string to_string(SelectiveRecompute v);
[[nodiscard]] std::string to_string(Elementwise v);
[[nodiscard]] std::string to_string(CrossEntropy v);
[[nodiscard]] std::string to_string(HostDispatch v);
[[nodiscard]] std::string to_string(MicrobatchSync v);
[[nodiscard]] std::string to_string(GradAccumulation v);
[[nodiscard]] std::string to_string(PpSchedule v);
[[nodiscard]] std::string to_string(Method v);
[[nodiscard]] std::string to_string(BaseFormat v);
// Whether the base weights are frozen (lora, qlora): no gradient, no optimizer state.
[[nodiscard]] inline bool frozen_base(const Training& t) { return t.method == Method::lora || t.method == Method::qlora; }

} // namespace trainsim::model
