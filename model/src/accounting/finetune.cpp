#include "trainsim/model/accounting/finetune.hpp"

#include "trainsim/model/accounting/flops.hpp"

namespace trainsim::model {

std::array<LoraGroup, 4> lora_groups(const ModelArch& m, unsigned targets) {
    const double h = m.hidden, q = static_cast<double>(m.heads) * m.head_dim,
                 kv = static_cast<double>(m.kv_heads) * m.head_dim, f = m.ffn;
    const bool gated = m.ffn_type == FfnType::swiglu;
    auto has = [&](unsigned bit) { return (targets & bit) != 0; };
    std::array<LoraGroup, 4> g{};
    g[0].in = h;
    for (auto [bit, n] : {std::pair{kLoraQ, q}, std::pair{kLoraK, kv}, std::pair{kLoraV, kv}})
        if (has(bit)) g[0].count += 1, g[0].out += n;
    g[1].in = q;
    if (has(kLoraO)) g[1].count = 1, g[1].out = h;
    // A 2-matrix MLP has no gate: its FC1 is the up projection.
    g[2].in = h;
    if (gated && has(kLoraGate)) g[2].count += 1, g[2].out += f;
    if (has(kLoraUp)) g[2].count += 1, g[2].out += f;
    g[3].in = f;
    if (has(kLoraDown)) g[3].count = 1, g[3].out = h;
    return g;
}

std::vector<std::string> lora_target_names(unsigned targets) {
    static constexpr std::array<const char*, 7> names{"q", "k", "v", "o", "gate", "up", "down"};
    std::vector<std::string> out;
    for (unsigned i = 0; i < names.size(); ++i)
        if ((targets & (1u << i)) != 0) out.emplace_back(names[i]);
    return out;
}

double lora_params_per_layer(const ModelArch& m, int rank, unsigned targets) {
    double p = 0;
    for (const auto& g : lora_groups(m, targets)) p += rank * (g.count * g.in + g.out);
    return p;
}

double trainable_params_per_layer(const Plan& plan) {
    if (frozen_base(plan.training))
        return lora_params_per_layer(plan.model, plan.training.lora_rank, plan.training.lora_targets);
    return count_params(plan.model).per_layer;
}

double base_gemm_bytes_per_weight(BaseFormat f) { return f == BaseFormat::nf4 ? kNf4BitsPerWeight / 8.0 : 2.0; }

double training_flops_per_token(const ModelArch& m, const Training& t, bool causal) {
    if (!frozen_base(t)) return model_flops_per_token(m, t.seq_len, causal);
    const double lm_head = 2.0 * m.hidden * static_cast<double>(m.vocab);
    const double adapters = 2.0 * lora_params_per_layer(m, t.lora_rank, t.lora_targets);
    return m.layers * (2.0 * layer_gemm_flops_per_token(m) + 3.0 * adapters +
                       3.0 * attention_flops_per_token(m, t.seq_len, causal)) +
           2.0 * lm_head;
}

} // namespace trainsim::model
