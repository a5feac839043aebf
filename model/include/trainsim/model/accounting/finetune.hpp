// Fine-tuning accounting (docs/model.md "Fine-tuning"): LoRA adapters' shapes, parameters and
// FLOPs, the NF4 storage of QLoRA's frozen weights, and the model FLOPs of a step by method.
#pragma once

#include "trainsim/model/core/scenario.hpp"

#include <array>
#include <string>
#include <vector>

namespace trainsim::model {

// NF4 with double quantisation (Dettmers et al. 2023, arXiv 2305.14314, Sec. 3 "Double
// Quantization"): 4 bits per weight, an 8-bit quantisation constant per block of 64 weights, and
// an FP32 constant per 256 of those blocks: 4 + 8/64 + 32/(64 x 256) = 4.127 bits per weight.
inline constexpr double kNf4BitsPerWeight = 4.0 + 8.0 / 64.0 + 32.0 / (64.0 * 256.0);
// bitsandbytes' 8-bit blockwise optimizers (Dettmers et al. 2022, arXiv 2110.02861, Sec. 2.1;
// bnb.optim.Adam8bit block size 2048): per state tensor 1 B per value and one FP32 absmax per
// block of 2,048 values; Adam keeps two states (m and v).
inline constexpr double kAdam8bitBlock = 2048.0;
inline constexpr double kAdam8bitBytesPerParam = 2.0 * (1.0 + 4.0 / kAdam8bitBlock);

// The adapters of one of a layer's four GEMMs (QKV, attention output, FC1, FC2, the order of
// layer_gemm_weights): the A matrices of its targets share the GEMM's input (width `in`), so they
// run as one GEMM of r x `count` columns; the B matrices write `out` columns in all.
struct LoraGroup {
    int count = 0;   // targets in the group (q, k, v; o; gate, up; down)
    double in = 0;   // input width k of the group's weights
    double out = 0;  // sum of the targets' output widths n
};
[[nodiscard]] std::array<LoraGroup, 4> lora_groups(const ModelArch& m, unsigned targets);

// The targets' names (q, k, v, o, gate, up, down), in that order.
[[nodiscard]] std::vector<std::string> lora_target_names(unsigned targets);

// Adapter parameters of one layer: r x (k + n) summed over the targets (A: k x r, B: r x n).
[[nodiscard]] double lora_params_per_layer(const ModelArch& m, int rank, unsigned targets);

// Trainable parameters of one layer under the plan's method: the adapters for lora / qlora,
// every parameter otherwise.
[[nodiscard]] double trainable_params_per_layer(const Plan& plan);

// Bytes per weight of the frozen base's layer GEMM weights (2 for BF16, 4.127 / 8 for NF4).
[[nodiscard]] double base_gemm_bytes_per_weight(BaseFormat f);

// Model FLOPs per token of one training step under the plan's method, recompute and QLoRA's
// dequantisation excluded (design.md "Definitions", docs/model.md "Fine-tuning"): pretrain and full
// count 6 x (layer GEMM weights + head) + 3 x attention forward; lora / qlora count what their
// backward does: the frozen GEMMs' forward and input gradient (4 x weights: no weight gradient),
// the adapters' forward, input and weight gradients (6 x r x (k + n) per target) and attention's
// 3 x forward.
[[nodiscard]] double training_flops_per_token(const ModelArch& m, const Training& t, bool causal);

} // namespace trainsim::model
