// Memory per rank (docs/model.md, "Memory"): weights, gradients, optimizer state per sharding,
// activations per recompute / SP / CP / in-flight micro-batches (Korthikanti et al. 2022,
// arXiv 2205.05198, Sec. 4), FP8 buffers, workspace and the reserved runtime overhead.
#pragma once

#include "trainsim/model/core/scenario.hpp"
#include "trainsim/model/core/units.hpp"

#include <algorithm>
#include <optional>

namespace trainsim::model {

struct ActivationOptions {
    // Flash attention keeps no s x s score matrix (only Q, K, V, O and the FP32 log-sum-exp).
    bool flash_attention = true;
    // Dropout masks (1 byte per element) after attention, MLP and inside attention. Modern
    // LLM pre-training runs dropout-free; Korthikanti et al.'s formulas include dropout.
    bool dropout = false;
    // What selective recompute rebuilds (parallel.selective_recompute).
    SelectiveRecompute selective = SelectiveRecompute::attention;
    // LoRA / QLoRA (docs/model.md "Fine-tuning"): the layer's GEMM weights are frozen. Autograd
    // keeps a GEMM's input only to compute its weight's gradient (PyTorch's generated backward for
    // mm / linear saves `self` only when mat2 requires grad; bitsandbytes' MatMul4Bit saves the
    // input only if the weight needs a gradient), so a frozen, untargeted GEMM's input is not kept
    // for it; a targeted one's is, for its adapter A's weight gradient (the same tensor with PEFT's
    // default lora_dropout 0), and so is A's output (T x r per target) for B's.
    bool frozen = false;
    unsigned lora_targets = 0;
    int lora_rank = 0;
};

// Activation bytes one transformer layer keeps for backward, for one micro-batch, on one rank.
[[nodiscard]] Bytes layer_activation_bytes(const ModelArch& m, int seq_len, int micro_batch, int tp, bool sp,
                                           int cp, Recompute recompute, Precision precision,
                                           const ActivationOptions& opt = {});

struct MemoryBreakdown {
    int stage = 0;          // pipeline stage this breakdown is for
    Bytes weights;          // BF16/FP16 parameters (gathered working copies for FSDP)
    Bytes gradients;        // gradient buffers (FP32 main grads in Megatron)
    Bytes optimizer;        // FP32 master weights + Adam m and v (sharded per plan)
    Bytes activations;      // saved activations of all in-flight micro-batches + loss buffers
    Bytes fp8_buffers;      // FP8 weight copies and transposes (Transformer Engine)
    Bytes workspace;        // cuBLAS workspace, communication buckets
    Bytes reserved;         // CUDA context, NCCL, allocator fragmentation (from the profile)
    // Temporaries of the optimizer step, held after the backward has freed the activations
    // (DeepSpeed's FP16_Optimizer: the gradients' FP32 copies and their flat buffer); the peak
    // is the larger of the two phases.
    Bytes step_transient;
    int inflight_microbatches = 0;  // (micro-batch, chunk) forward passes held at peak
    double local_params = 0;        // parameters held by this rank before sharding
    // CPU offload: host memory of the node this stage's ranks need (all of its GPUs); not in total().
    Bytes host;
    [[nodiscard]] Bytes total() const {
        return weights + gradients + optimizer + std::max(activations, step_transient) + fp8_buffers + workspace +
               reserved;
    }
};

// Whether the optimizer step runs DeepSpeed's FP16_Optimizer tensor by tensor
// (Parallel::optimizer_per_tensor, which applies in FP16 without ZeRO).
[[nodiscard]] bool per_tensor_fp16_optimizer(const Plan& plan);

// Whether DeepSpeed's engine wraps the optimizer in its BF16_Optimizer (deepspeed/runtime/
// bf16_optimizer.py; engine.py _do_optimizer_sanity_check: BF16 weights with FP32 gradient
// accumulation under ZeRO stage 0 or 1 without CPU offload; Parallel::grad_accumulation deepspeed,
// precision bf16, sharding none or zero1, offload none). It keeps full-size FP32 gradients beside the BF16 ones (each
// micro-batch's added in, docs/model.md "Gradient accumulation"), all-reduces the FP32 gradients
// over the data-parallel ranks, updates its 1/dp shard of the FP32 master and Adam state and
// all-gathers the updated BF16 weights: ZeRO-1 of its own, whatever the configured stage.
[[nodiscard]] bool deepspeed_bf16_optimizer(const Plan& plan);

// Whether the optimizer state is sharded over the data-parallel ranks: any sharding, and
// DeepSpeed's BF16_Optimizer under ZeRO stage 0 too.
[[nodiscard]] bool optimizer_sharded(const Plan& plan);

// The breakdown of one pipeline stage's ranks.
[[nodiscard]] MemoryBreakdown stage_memory(const Plan& plan, int stage);

// Bytes per parameter of the gradient buffer, which is also the dtype gradients are reduced in:
// 4 for Megatron's FP32 main gradients (no sharding or the distributed optimizer, bf16 / fp8,
// parallel.main_grads_fp32) and DeepSpeed's BF16_Optimizer, else 2 (FP16 training, ZeRO, FSDP,
// 16-bit gradient sync).
[[nodiscard]] double grad_bytes_per_param(const Plan& plan);

// Whether the weights are gathered layer by layer for each use and released after it (ZeRO-3,
// FSDP, HSDP). Under pipeline parallelism FSDP and HSDP keep a stage's gathered weights and
// unsharded gradients through the step instead (torchtitan: reshard_after_forward off with PP;
// the pipeline schedule syncs gradients only in the last micro-batch's backward): the weights
// are gathered once at the step's start and the gradients reduce-scattered once, as the
// distributed optimizer does.
[[nodiscard]] bool gathers_per_layer(const Parallel& p);
// Bytes per parameter of the Adam state (before sharding): FP32 master 4 + moments 8 = 12, or 10
// with 16-bit master remainders; BF16 state (parallel.optimizer_state) 2 + 2 + 2 = 6.
[[nodiscard]] double optimizer_bytes_per_param(const Parallel& p);
// The optimizer's master copy per parameter: 4 (FP32), 2 (16-bit remainders or BF16 state), 0
// without one (parallel.master_weights false); and its moments: 8 (FP32), 4 (BF16), 2.004 (8-bit).
// optimizer_bytes_per_param is their sum.
[[nodiscard]] double master_bytes_per_param(const Parallel& p);
[[nodiscard]] double moment_bytes_per_param(const Parallel& p);
// ActivationOptions of a plan (attention kernel, dropout, selective recompute, LoRA).
[[nodiscard]] ActivationOptions activation_options(const Plan& plan);
// The ranks over which the optimizer state is sharded: 1 (none), dp x cp, or for HSDP the
// ranks of one node's data-parallel group.
[[nodiscard]] double optimizer_shard_degree(const Plan& plan);
// CPU offload: the host memory of one node (cluster.host_memory, else the profile's node), and what
// the offloaded state of its GPUs takes (peak stage): per parameter of each GPU's optimizer shard,
// the optimizer state (12 B, FP32 master and Adam moments) and an FP32 gradient (4 B), plus the
// 16-bit parameter (2 B) when parameters are offloaded too. 0 without offload.
[[nodiscard]] Bytes host_memory_per_node(const Plan& plan);
[[nodiscard]] Bytes host_offload_bytes_per_node(const Plan& plan);
// Whether the plan fits in GPU memory (within `capacity`, the HBM by default) and, with offload, in
// host memory.
[[nodiscard]] bool fits_in_memory(const Plan& plan, const MemoryBreakdown& peak,
                                  std::optional<Bytes> capacity = std::nullopt);
// The stage with the largest total (what decides whether the plan fits).
[[nodiscard]] MemoryBreakdown peak_memory(const Plan& plan);

// Layers of each model chunk recomputed in full before their backward: recompute_layers under
// block recompute, every layer of the chunk under recompute: full, none otherwise.
[[nodiscard]] int full_recompute_layers(const Plan& plan);

// Block recompute: full recompute of fewer layers than a model chunk has.
[[nodiscard]] bool block_recompute(const Plan& plan);

// The fewest layers per model chunk that block recompute must recompute for `plan` (taken with
// recompute: full) to fit in HBM: 1..chunk-1, or 0 (every layer) when only full recompute of
// every layer fits or nothing fits.
// `capacity`: the memory the plan may use (the HBM less a headroom); the HBM when absent.
[[nodiscard]] int fewest_recompute_layers(const Plan& plan, std::optional<Bytes> capacity = std::nullopt);

// The loss over the vocabulary, per logit of the local [tokens, vocab/tp] block: bytes moved in
// forward and in backward, and bytes held at the backward's peak.
struct LossBytes {
    double fwd, bwd, held;
};
[[nodiscard]] LossBytes loss_bytes_per_logit(CrossEntropy kind);

} // namespace trainsim::model
