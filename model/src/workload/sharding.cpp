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
    if (unit == kEmbedUnit) return params_.embedding / p_.tp;
    if (unit == kHeadUnit) return (m_.tied_embeddings ? params_.embedding : params_.lm_head) / p_.tp;
    return params_.per_layer / p_.tp;
}

void Builder::flush_deferred(StageState& st) {
    for (auto d : deferred_) st.pending.push_back(d);
    deferred_.clear();
}

} // namespace trainsim::model::workload_detail
