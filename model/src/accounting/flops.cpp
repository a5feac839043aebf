#include "trainsim/model/accounting/flops.hpp"

namespace trainsim::model {

ParamCounts count_params(const ModelArch& m) {
    const double h = m.hidden, d = m.head_dim, a = m.heads, g = m.kv_heads, f = m.ffn, v = m.vocab;
    const double qkv = h * (a * d + 2.0 * g * d);
    const double out = a * d * h;
    const double ffn = (m.ffn_type == FfnType::swiglu ? 3.0 : 2.0) * h * f;
    ParamCounts c;
    c.per_layer = qkv + out + ffn + 2.0 * h;
    c.embedding = v * h;
    c.lm_head = m.tied_embeddings ? 0.0 : v * h;
    c.final_norm = h;
    c.non_embedding = m.layers * c.per_layer + c.final_norm;
    c.total = c.non_embedding + c.embedding + c.lm_head;
    return c;
}

std::array<double, 4> layer_gemm_weights(const ModelArch& m) {
    const double h = m.hidden, d = m.head_dim, a = m.heads, g = m.kv_heads, f = m.ffn;
    const double fc1 = (m.ffn_type == FfnType::swiglu ? 2.0 : 1.0) * h * f;
    return {h * (a * d + 2.0 * g * d), a * d * h, fc1, f * h};
}

std::array<bool, 4> released_after_recompute(const ModelArch& m, int tp, double max_reuse_distance) {
    const auto w = layer_gemm_weights(m);
    std::array<bool, 4> released{};
    double after = 0; // weights of the modules after the current one
    for (int i = 3; i >= 0; --i) {
        released[static_cast<std::size_t>(i)] = 2.0 * after / tp >= max_reuse_distance;
        after += w[static_cast<std::size_t>(i)];
    }
    return released;
}

double regathered_after_recompute(const ModelArch& m, int tp, double max_reuse_distance) {
    const auto w = layer_gemm_weights(m);
    const auto released = released_after_recompute(m, tp, max_reuse_distance);
    double regathered = 0;
    for (std::size_t i = 0; i < 4; ++i)
        if (released[i]) regathered += w[i] / tp;
    return regathered;
}

double layer_gemm_flops_per_token(const ModelArch& m) {
    const double h = m.hidden, d = m.head_dim, a = m.heads, g = m.kv_heads, f = m.ffn;
    const double weights = h * (a * d + 2.0 * g * d) + a * d * h + (m.ffn_type == FfnType::swiglu ? 3.0 : 2.0) * h * f;
    return 2.0 * weights;
}

double attention_flops_per_token(const ModelArch& m, int seq_len, bool causal) {
    // QK^T and PV: 2 GEMMs of 2*s*d FLOPs per query per head over s keys.
    const double keys = causal ? (seq_len + 1.0) / 2.0 : static_cast<double>(seq_len);
    return 2.0 * 2.0 * keys * m.head_dim * m.heads;
}

double model_flops_per_token(const ModelArch& m, int seq_len, bool causal) {
    const double lm_head = 2.0 * m.hidden * static_cast<double>(m.vocab);
    return 3.0 * (m.layers * (layer_gemm_flops_per_token(m) + attention_flops_per_token(m, seq_len, causal)) + lm_head);
}

} // namespace trainsim::model
