// FLOP and parameter accounting for a dense decoder (docs/model.md, "FLOPs").
#pragma once

#include "trainsim/model/core/scenario.hpp"
#include "trainsim/model/core/units.hpp"

#include <array>

namespace trainsim::model {

struct ParamCounts {
    double per_layer = 0;     // attention + FFN weights (+ 2 norm vectors) of one layer
    double embedding = 0;     // input embedding V*h
    double lm_head = 0;       // output projection h*V (0 when tied: shares the embedding)
    double final_norm = 0;
    double total = 0;         // all distinct parameters
    double non_embedding = 0; // layers + final norm
};
[[nodiscard]] ParamCounts count_params(const ModelArch& m);

// One layer's GEMM weights in the order its forward pass uses them: QKV, attention output, FC1
// (gate and up for SwiGLU), FC2. With the two norm vectors they make up ParamCounts::per_layer.
[[nodiscard]] std::array<double, 4> layer_gemm_weights(const ModelArch& m);

// Weights of a recomputed layer that a sharded-parameter framework gathers a second time for the
// layer's backward, per 1/tp of the layer. DeepSpeed ZeRO-3 releases a module's weights after each
// forward use unless they are used again within fewer than `max_reuse_distance` parameters
// (stage3_max_reuse_distance; infinite: always kept, 0: never). After a recompute the parameters
// used before a module's backward are those of the modules after it, twice: the rest of the
// recompute, then the backward down to it. So FC2 is kept by any positive distance, and larger
// layers release more.
[[nodiscard]] double regathered_after_recompute(const ModelArch& m, int tp, double max_reuse_distance);
// Which of those weights (QKV, projection, FC1, FC2) are released after the recompute.
[[nodiscard]] std::array<bool, 4> released_after_recompute(const ModelArch& m, int tp, double max_reuse_distance);

// Per-token forward FLOPs of one layer's GEMMs (2*m*n*k summed over QKV, out, FFN).
[[nodiscard]] double layer_gemm_flops_per_token(const ModelArch& m);
// Per-token forward FLOPs of the attention core (QK^T and PV) at sequence length s.
// causal = true counts only the lower triangle (s+1)/2 keys on average.
[[nodiscard]] double attention_flops_per_token(const ModelArch& m, int seq_len, bool causal);

// Model FLOPs per token of one training step (forward + backward = 3x forward), recompute
// excluded: 6 x (layer GEMM params + LM head) + 3 x attention forward (design.md "Definitions").
[[nodiscard]] double model_flops_per_token(const ModelArch& m, int seq_len, bool causal);

} // namespace trainsim::model
