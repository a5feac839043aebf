// Measurement plans: the descriptor lists `measure` walks. Shapes come from the layers the
// simulator builds (model/workload.cpp: QKV, attention-out, FFN up/gate (fused), FFN down, LM
// head, their dgrad and wgrad) for a few reference models under TP 1..8 and several token
// counts, plus a square size sweep; attention over sequence lengths; memory-bound kernels over
// sizes; collectives over sizes and group sizes (docs/calibration.md "What is measured").
#pragma once

#include "trainsim/calibrate/core/descriptor.hpp"

#include <string>
#include <vector>

namespace trainsim::calibrate {

enum class PlanKind {
    tiny,   // seconds on 2 CPU cores (tests, smoke runs)
    quick,  // minutes on one GPU node
    full,   // the complete sweep
};
[[nodiscard]] PlanKind parse_plan_kind(const std::string& name);  // throws CalibrationInputError
[[nodiscard]] const char* to_string(PlanKind k);

struct PlanContext {
    std::string backend = "cpu";  // cpu | cuda: sizes and dtypes differ
    int world = 1;                // ranks (GPUs or threads) available to collectives
    // Host of each rank (empty: all local). A group spanning hosts has scope inter_node.
    std::vector<std::string> hosts;
};

// Collective group sizes measured with `world` ranks: powers of two from 2, and world itself.
[[nodiscard]] std::vector<int> group_sizes(int world);

// Deduplicated by key, in a stable order: the short-benchmark GEMM alone first (right after the
// burn-in), then grouped by kind so scratch buffers are reused (GEMMs, attention, memory-bound
// kernels, collectives, the GEMM under communication and after sustained load).
[[nodiscard]] std::vector<Descriptor> make_plan(PlanKind kind, const PlanContext& ctx);

// Seconds of untimed load that start every measuring session of a backend ("cuda" or "cpu").
[[nodiscard]] double burn_in_seconds(const std::string& backend);

// Reference models whose layers give the GEMM shapes (public configs, as scenarios/models/).
struct LayerModel {
    std::string name;
    int hidden = 0, heads = 0, kv_heads = 0, head_dim = 0, ffn = 0, vocab = 0;
    bool gated = true;  // SwiGLU: the up and gate projections are one GEMM of width 2 x ffn
};
// GEMMs of one layer plus the LM head under tensor parallelism tp for `tokens` tokens, forward,
// dgrad and wgrad, with the simulator's (m, n, k) and names.
struct LayerGemm {
    std::string name;  // qkv, qkv_dgrad, qkv_wgrad, attn_out, ..., lm_head_wgrad
    std::int64_t m = 0, n = 0, k = 0;
    enum class Pass { fwd, dgrad, wgrad } pass = Pass::fwd;
};
[[nodiscard]] std::vector<LayerGemm> layer_gemms(const LayerModel& model, int tp, std::int64_t tokens);

} // namespace trainsim::calibrate
