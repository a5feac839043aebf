// Rules a parallel layout must obey, independent of how it was written down.
#pragma once

#include "trainsim/model/core/scenario.hpp"

#include <string>
#include <vector>

namespace trainsim::model {

// A rule broken by a plan; key is the scenario key path (relative to the plan) to blame.
struct LayoutProblem {
    std::string key;
    std::string message;
};

// Every rule the plan breaks (empty when it is valid): heads % tp, kv_heads % tp, ffn % tp,
// a layer in every model chunk, gpus == tp*pp*cp*dp, global_batch % (micro_batch*dp), seq_len %
// (2*cp) for load-balanced causal CP, micro-batches % pp for interleaving, at most
// kMaxMicrobatchesPerStep micro-batches, precision supported by
// the GPU, sequence parallelism only with tp > 1, pp > 1 with ZeRO-2/3 refused (as in
// Megatron/DeepSpeed; FSDP / HSDP under pp keep their gathered weights through the step).
[[nodiscard]] std::vector<LayoutProblem> check_layout(const Plan& plan);

// The most micro-batches per step (global_batch / (micro_batch * dp)) a plan may have: the
// workload builds every micro-batch's ops, so memory and time grow with them (16384 take ~1 min
// and ~0.7 GB for a 32-layer model). The largest published global batches are ~16k sequences
// (the training.global_batch range), i.e. 16384 micro-batches even at dp = 1, micro_batch 1.
inline constexpr int kMaxMicrobatchesPerStep = 16384;

// Transformer layers of model chunk `chunk` (0..vp-1) on pipeline stage `stage`. When pp*vp
// divides the layers, every chunk holds layers / (pp*vp). Otherwise the embedding and the loss
// count as one layer each (Megatron-Core account_for_embedding_in_pipeline_split /
// account_for_loss_in_pipeline_split): layers + 2 units are spread evenly over the chunks in
// pipeline order (extra units to the earliest after the first), and the first and last chunks
// give one up. Llama 3.1 405B (126 layers) on pp 8: 15, 16 x 6, 15; on pp 8 x vp 8: 1, 2 x 62, 1.
// May be 0 or less when there are too few layers (check_layout reports it).
[[nodiscard]] int chunk_layers(int layers, int pp, int vp, int stage, int chunk);
// The same where the schedule places the chunks (a V puts chunk 1 of stage s at 2 pp - 1 - s).
[[nodiscard]] int chunk_layers(int layers, int pp, int vp, int stage, int chunk, PpSchedule schedule);
// The interleaving depths vp that split `layers` over pp*vp chunks evenly, or with the embedding
// and the loss counted (layers + 2 divisible by pp*vp), without an empty chunk; ascending, 1 first
// when it qualifies.
[[nodiscard]] std::vector<int> interleavings(int layers, int pp);
// Pipeline depths up to `max` worth trying: the divisors of the layers and the powers of two that
// leave no stage empty (uneven splits, as Llama 3.1 405B's 126 layers on pp 8 or 16).
[[nodiscard]] std::vector<int> pipeline_depths(int layers, int max);
// The largest chunk of the plan, and the layers on one stage.
[[nodiscard]] int max_chunk_layers(const Plan& plan);
[[nodiscard]] int stage_layers(const Plan& plan, int stage);

// Distance between consecutive members of each parallel dimension in the global rank order
// (rank = tp_i*tp + cp_i*cp + dp_i*dp + stage*pp, with these strides); node = rank / gpus_per_node.
struct RankStrides {
    int tp = 1, cp = 1, dp = 1, pp = 1;
};
[[nodiscard]] RankStrides rank_strides(const Parallel& p);

// dp implied by the GPU count and the other degrees (0 if they do not divide it).
[[nodiscard]] int derive_dp(int num_gpus, int tp, int pp, int cp);

// The recompute policy as reports print it: "none", "selective", "full", or under block recompute
// "full (first 3 of 10 layers per chunk)".
[[nodiscard]] std::string recompute_label(const Plan& plan);

// Resizes the plan's cluster to `gpus` GPUs with its node kept: whole nodes, or part of one node
// when fewer than a node (the node then holds just these GPUs). Returns why it cannot (< 1 GPU, not
// whole nodes, several nodes without NICs) and leaves the plan unchanged then; empty on success.
[[nodiscard]] std::string set_gpu_count(Plan& plan, int gpus);

} // namespace trainsim::model
