// Data-parallel and sharding traffic (builder.hpp): ZeRO / FSDP parameter gathers, gradient
// reductions in buckets, list-API collectives.
#include "builder.hpp"

namespace trainsim::model::workload_detail {

// ---------- sharding helpers ----------
// ZeRO-3 module-by-module fetch (fsdp_fetch: module): a layer pass fetches the weights of
// `seg_` (0 QKV, 1 projection, 2 FC1, 3 FC2) in that order, each before its GEMM; with
// prefetch, the next one's gather is issued as the current module starts, so it runs beside
// it, and the first of the next layer pass beside this pass's last module.
bool Builder::module_fetch() const {
    return per_layer_sharding() && shard_size() > 1 && p_.fsdp_fetch == FsdpFetch::module;
}

void Builder::begin_segment(std::vector<int> modules) {
    seg_ = std::move(modules);
    seg_pos_ = 0;
    seg_prefetched_ = !seg_.empty() && next_first_module_ == seg_.front() ? next_first_ : kNone;
    next_first_ = kNone;
}

std::uint32_t Builder::emit_module_gather(StageState& st, int module, int mb, int chunk, std::uint32_t after) {
    const auto w = layer_gemm_weights(m_);
    const auto proto = collective("fsdp_ag", CollectiveOp::all_gather, shard_group(),
                                  2.0 * w[static_cast<std::size_t>(module)] / p_.tp);
    mark_list_collective(proto);
    return emit_aside(st, proto, Stream::dp_gather, Category::dp_comm, mb, chunk, gather_gates(after));
}

void Builder::fetch_module(StageState& st, int module, int mb, int chunk) {
    if (!module_fetch() || seg_pos_ >= seg_.size() || seg_[seg_pos_] != module) return;
    const std::uint32_t cur =
        seg_prefetched_ != kNone ? seg_prefetched_ : emit_module_gather(st, module, mb, chunk, last_compute_);
    seg_prefetched_ = kNone;
    ++seg_pos_;
    if (p_.fsdp_prefetch && seg_pos_ < seg_.size())
        seg_prefetched_ = emit_module_gather(st, seg_[seg_pos_], mb, chunk, last_compute_);
    last_module_gate_ = last_compute_;
    st.pending.push_back(cur);
}

// Before a layer pass: with prefetch, its first weight's gather beside the previous pass's
// last module.
void Builder::prefetch_first_module(StageState& st, int module, int mb, int chunk) {
    next_first_ = kNone;
    if (!module_fetch() || !p_.fsdp_prefetch || last_module_gate_ == kNone) return;
    next_first_ = emit_module_gather(st, module, mb, chunk, last_module_gate_);
    next_first_module_ = module;
}

// ZeRO-3 / FSDP weights released after a layer's recompute and gathered again for its backward
// (fsdp_reuse_distance_params): they start once the recompute is done, the backward waits for them.
void Builder::regather_after_recompute(StageState& st, int mb, int chunk) {
    if (!per_layer_sharding() || shard_size() <= 1) return;
    const double params = regathered_after_recompute(m_, p_.tp, p_.fsdp_reuse_distance_params);
    if (params <= 0) return;
    const double layer = params_.per_layer / p_.tp;
    const int pieces =
        std::max(1, static_cast<int>(std::lround(std::max(1, p_.fsdp_gathers_per_layer) * params / layer)));
    const auto proto = collective("fsdp_ag", CollectiveOp::all_gather, shard_group(), 2.0 * params / pieces);
    mark_list_collective(proto);
    std::uint32_t last = kNone;
    for (int i = 0; i < pieces; ++i)
        last = emit(st, proto, Stream::dp_gather, Category::dp_comm, mb, chunk, gather_gates(last_compute_));
    st.pending.push_back(last);
}

// What a ZeRO-3 / FSDP parameter gather waits for: `after` (kNone: nothing), and with
// fsdp_gather_sync every gradient reduce-scatter issued before it too (a device-wide
// torch.cuda.synchronize() before the gather).
std::vector<std::uint32_t> Builder::gather_gates(std::uint32_t after) const {
    std::vector<std::uint32_t> deps;
    if (after != kNone) deps.push_back(after);
    if (p_.fsdp_gather_sync && last_reduce_ != kNone) deps.push_back(last_reduce_);
    return deps;
}

bool Builder::per_layer_sharding() const { return gathers_per_layer(p_); }

// ZeRO-3 / FSDP collectives through PyTorch's list API copy one slice per shard rank.
void Builder::mark_list_collective(ProtoId id) {
    if (p_.list_collectives) g_.protos[id].copy_slices = shard_size();
}

Group Builder::shard_group() const { return p_.sharding == Sharding::hsdp ? Group::dp_shard : Group::dp_cp; }

int Builder::shard_size() const { return p_.sharding == Sharding::hsdp ? g_.hsdp_shard : p_.dp * p_.cp; }

double Builder::grad_bytes() const { return grad_bytes_per_param(plan_); }

// Bytes the distributed optimizer gathers for a bucket: BF16 parameters, or with FP8 primary
// weights 1 B for the layers' (GEMM) weights and 2 B for the embedding and head.
double Builder::gather_bytes(const Bucket& b) const {
    double bytes = 0;
    for (int u : b.units) bytes += unit_params(u) * (p_.fp8_params && u >= 0 ? 1.0 : 2.0);
    return bytes;
}

// Parameters of one "unit" on this TP rank: a layer, the embedding, or the LM head.
double Builder::unit_params(int unit) const {
    // LoRA / QLoRA: the units' trainable parameters (the adapters), which are all the gradients
    // reduce, the optimizer updates and the distributed optimizer gathers.
    if (frozen_) return unit >= 0 ? trainable_params_per_layer(plan_) / p_.tp : 0.0;
    if (unit == kEmbedUnit) return params_.embedding / p_.tp;
    if (unit == kHeadUnit) return (m_.tied_embeddings ? params_.embedding : params_.lm_head) / p_.tp;
    return params_.per_layer / p_.tp;
}

int Builder::unit_tensors(int unit, bool stage_has_embedding) const {
    if (unit == kEmbedUnit) return 2;
    if (unit == kHeadUnit) return 2 + (m_.tied_embeddings && stage_has_embedding ? 0 : 1);
    return 12;
}

Builder::AccumulationPass Builder::accumulation_pass() const {
    // Sharded gradients are reduce-scattered every micro-batch and added into the rank's shard
    // (FSDP, ZeRO-2/3): 1/shard of the traffic below, not modelled.
    if (per_layer_sharding() || p_.sharding == Sharding::zero2) return {};
    // PyTorch's AccumulateGrad from the second micro-batch on (the first takes the new gradient
    // as the parameter's .grad): .grad += new, reading both 16-bit tensors and writing one.
    const AccumulationPass autograd{2.0 + 2.0 + 2.0, false, false};
    switch (p_.grad_accumulation) {
        case GradAccumulation::fused:
            return {};
        case GradAccumulation::megatron_ddp:
            // main_grad.add_(grad): read the 16-bit gradient, read and write the buffer (FP16, or
            // FP32 with BF16: grad_bytes_per_param), every micro-batch (the buffer is zeroed at
            // the step's start, with the optimizer's pass).
            return {2.0 + 2.0 * grad_bytes(), true, false};
        case GradAccumulation::deepspeed:
            // In BF16 with ZeRO stage 0 or 1 the engine wraps the optimizer in its BF16_Optimizer
            // (engine.py _do_optimizer_sanity_check: BF16 weights with FP32 gradient accumulation,
            // the BF16 default; the optimizer shards its own FP32 state, ZeRO-1 style), whose
            // update_hp_grads runs hp_grad.add_(lp.grad.to(float32)) per tensor after every
            // micro-batch's backward into full-size FP32 gradients: the BF16 gradient read and its
            // FP32 copy written (2 + 4), then the copy and the FP32 gradient read and the sum
            // written (4 + 4 + 4).
            if (deepspeed_bf16_optimizer(plan_)) return {2.0 + 4.0 + 4.0 + 4.0 + 4.0, true, true};
            return autograd;
        case GradAccumulation::autograd:
            return autograd;
    }
    return {};
}

void Builder::flush_deferred(StageState& st) {
    for (auto d : deferred_) st.pending.push_back(d);
    deferred_.clear();
}

} // namespace trainsim::model::workload_detail
