// One layer's forward, recompute and backward as ops on the stage's streams, with its TP
// collectives (builder.hpp).
#include "builder.hpp"

namespace trainsim::model::workload_detail {

std::uint32_t Builder::emit(StageState& st, ProtoId proto, Stream stream, Category cat, int mb, int chunk,
                       std::initializer_list<std::uint32_t> extra) {
    return emit(st, proto, stream, cat, mb, chunk, std::span(extra.begin(), extra.size()));
}

std::uint32_t Builder::emit(StageState& st, ProtoId proto, Stream stream, Category cat, int mb, int chunk,
                       std::span<const std::uint32_t> extra) {
    auto& deps = st.prog.deps;
    const auto dep_begin = static_cast<std::uint32_t>(deps.size());
    deps.insert(deps.end(), st.pending.begin(), st.pending.end());
    deps.insert(deps.end(), extra.begin(), extra.end());
    if (stream == Stream::compute) {
        deps.insert(deps.end(), st.blocking_sends.begin(), st.blocking_sends.end());
        st.blocking_sends.clear();
    }
    st.pending.clear();
    // Built in place: the plan search builds millions of ops for its lower bounds.
    Op& op = st.prog.ops.emplace_back();
    op.proto = proto;
    op.stream = stream;
    op.category = cat;
    op.microbatch = static_cast<std::uint16_t>(mb);
    op.chunk = static_cast<std::uint16_t>(chunk);
    op.pass = current_pass_;
    op.dep_begin = dep_begin;
    op.dep_count = static_cast<std::uint32_t>(deps.size()) - dep_begin;
    return static_cast<std::uint32_t>(st.prog.ops.size() - 1);
}

// A compute-stream op; TP collectives go here too unless TP comm overlap is on.
std::uint32_t Builder::compute(StageState& st, ProtoId proto, Category cat, int mb, int chunk) {
    return emit(st, proto, Stream::compute, cat, mb, chunk);
}

// A TP collective next to a GEMM. Without TP comm overlap it blocks the compute stream
// (Megatron's default). With overlap (TE userbuffers) it runs on the TP stream alongside
// that GEMM, and the op after the GEMM waits for both.
void Builder::tp_collective(StageState& st, ProtoId proto, int mb, int chunk, Side side) {
    if (proto == 0) return;
    if (!p_.tp_comm_overlap) {
        last_compute_ = compute(st, proto, Category::tp_comm, mb, chunk);
        return;
    }
    if (side == Side::before_gemm) {
        deferred_.push_back(emit_after(st, proto, Stream::tp_comm, Category::tp_comm, mb, chunk, last_compute_));
    } else {
        st.pending.push_back(emit_after(st, proto, Stream::tp_comm, Category::tp_comm, mb, chunk, prev_compute_));
    }
}

// The part of an overlapped TP collective that can only start once its GEMM is done; the
// next op waits for it.
void Builder::tp_tail(StageState& st, ProtoId proto, int mb, int chunk) {
    if (proto == 0) return;
    st.pending.push_back(emit_after(st, proto, Stream::tp_comm, Category::tp_comm, mb, chunk, last_compute_));
}

// An op beside the compute stream, after `deps` only: the ops waiting to be attached to the
// next kernel stay pending for it.
std::uint32_t Builder::emit_aside(StageState& st, ProtoId proto, Stream stream, Category cat, int mb, int chunk,
                             std::span<const std::uint32_t> deps) {
    auto saved = std::move(st.pending);
    st.pending.clear();
    const auto id = emit(st, proto, stream, cat, mb, chunk, deps);
    st.pending = std::move(saved);
    return id;
}

std::uint32_t Builder::emit_after(StageState& st, ProtoId proto, Stream stream, Category cat, int mb, int chunk,
                             std::uint32_t after) {
    if (after == kNone) return emit_aside(st, proto, stream, cat, mb, chunk, {});
    return emit_aside(st, proto, stream, cat, mb, chunk, std::span(&after, 1));
}

std::uint32_t Builder::compute_tracked(StageState& st, ProtoId proto, Category cat, int mb, int chunk) {
    const auto id = compute(st, proto, cat, mb, chunk);
    prev_compute_ = last_compute_;
    last_compute_ = id;
    for (auto d : deferred_) st.pending.push_back(d);
    deferred_.clear();
    return id;
}

void Builder::attention_forward(StageState& st, Category cat, int mb, int chunk) {
    if (lp_.attn_fwd_ops.empty()) {
        compute_tracked(st, lp_.attn_fwd, cat, mb, chunk);
        return;
    }
    for (auto op : lp_.attn_fwd_ops) compute_tracked(st, op, cat, mb, chunk);
}

// `own_segment`: the forward pass of the layer, which fetches its 4 weights module by module
// (fsdp_fetch: module); false for a recompute, whose fetches layer_backward lays out.
void Builder::layer_forward(StageState& st, int mb, int chunk, Category cat, std::uint32_t gather_dep,
                       bool own_segment) {
    const auto& L = lp_;
    if (own_segment && module_fetch()) begin_segment({0, 1, 2, 3});
    if (gather_dep != kNone) st.pending.push_back(gather_dep);
    compute_tracked(st, L.ln1, cat, mb, chunk);
    if (L.fp8_cast_fwd) compute_tracked(st, L.fp8_cast_fwd, cat, mb, chunk);
    tp_collective(st, L.attn_comm.fwd_gather, mb, chunk, Side::before_gemm);
    fetch_module(st, 0, mb, chunk);
    dequantise(st, 0, cat, mb, chunk);
    compute_tracked(st, L.qkv, cat, mb, chunk);
    adapters(st, 0, true, cat, mb, chunk);
    compute_tracked(st, L.rope, cat, mb, chunk);
    std::uint32_t kv = kNone;
    if (L.cp_kv_gather) kv = emit(st, L.cp_kv_gather, Stream::cp_comm, Category::cp_comm, mb, chunk, {last_compute_});
    attention_forward(st, cat, mb, chunk);
    if (kv != kNone) st.pending.push_back(kv);
    fetch_module(st, 1, mb, chunk);
    dequantise(st, 1, cat, mb, chunk);
    compute_tracked(st, L.out, cat, mb, chunk);
    adapters(st, 1, true, cat, mb, chunk);
    tp_collective(st, L.attn_comm.fwd_reduce, mb, chunk, Side::after_gemm);
    tp_tail(st, L.attn_comm.fwd_reduce_tail, mb, chunk);
    compute_tracked(st, L.res_ln2, cat, mb, chunk);
    if (L.scalar_sync != 0) compute_tracked(st, L.scalar_sync, cat, mb, chunk);
    tp_collective(st, L.mlp_comm.fwd_gather, mb, chunk, Side::before_gemm);
    fetch_module(st, 2, mb, chunk);
    dequantise(st, 2, cat, mb, chunk);
    compute_tracked(st, L.fc1, cat, mb, chunk);
    adapters(st, 2, true, cat, mb, chunk);
    compute_tracked(st, L.act, cat, mb, chunk);
    fetch_module(st, 3, mb, chunk);
    dequantise(st, 3, cat, mb, chunk);
    compute_tracked(st, L.fc2, cat, mb, chunk);
    adapters(st, 3, true, cat, mb, chunk);
    tp_collective(st, L.mlp_comm.fwd_reduce, mb, chunk, Side::after_gemm);
    tp_tail(st, L.mlp_comm.fwd_reduce_tail, mb, chunk);
    compute_tracked(st, L.residual, cat, mb, chunk);
}

// Returns the index of the op that completes this layer's weight gradients (with `split`, the
// input-gradient pass B only: the wgrad GEMMs wait for layer_weight_grad, the W pass).
// `layer`: the layer's index within its model chunk (block recompute covers the first ones).
std::uint32_t Builder::layer_backward(StageState& st, int mb, int chunk, int layer, std::uint32_t gather_dep,
                                      bool split) {
    const auto& L = lp_;
    const auto cat = Category::backward;
    const bool recompute = layer < full_recompute_layers_;
    if (module_fetch()) {
        // The recompute gathers all 4 weights; its backward those released after it (reuse
        // distance); a backward without recompute all 4, in backward order.
        std::vector<int> seg;
        if (recompute) {
            seg = {0, 1, 2, 3};
            const auto released = released_after_recompute(m_, p_.tp, p_.fsdp_reuse_distance_params);
            for (int i = 3; i >= 0; --i)
                if (released[static_cast<std::size_t>(i)]) seg.push_back(i);
        } else {
            seg = {3, 2, 1, 0};
        }
        begin_segment(std::move(seg));
    }
    if (recompute) {
        layer_forward(st, mb, chunk, Category::recompute, gather_dep, /*own_segment=*/false);
        if (!module_fetch()) regather_after_recompute(st, mb, chunk);
    } else if (gather_dep != kNone) {
        st.pending.push_back(gather_dep);
    }
    if (alternate_matmuls()) recompute_alternate(st, mb, chunk);
    // MLP block
    if (L.fp8_cast_bwd) compute_tracked(st, L.fp8_cast_bwd, cat, mb, chunk);
    tp_collective(st, L.mlp_comm.bwd_gather, mb, chunk, Side::before_gemm);
    fetch_module(st, 3, mb, chunk);
    dequantise(st, 3, cat, mb, chunk);
    compute_tracked(st, L.fc2_dgrad, cat, mb, chunk);
    adapters(st, 3, false, cat, mb, chunk);
    if (!split && !frozen_) compute_tracked(st, L.fc2_wgrad, cat, mb, chunk);
    compute_tracked(st, L.act_bwd, cat, mb, chunk);
    std::uint32_t regather = kNone;
    if (L.sp_input_regather && !split && !frozen_)
        regather = emit(st, L.sp_input_regather, Stream::tp_comm, Category::tp_comm, mb, chunk, {last_compute_});
    fetch_module(st, 2, mb, chunk);
    dequantise(st, 2, cat, mb, chunk);
    compute_tracked(st, L.fc1_dgrad, cat, mb, chunk);
    adapters(st, 2, false, cat, mb, chunk);
    if (regather != kNone) st.pending.push_back(regather);
    if (!split && !frozen_) compute_tracked(st, L.fc1_wgrad, cat, mb, chunk);
    tp_collective(st, L.mlp_comm.bwd_reduce, mb, chunk, Side::after_gemm);
    compute_tracked(st, L.ln2_bwd, cat, mb, chunk);
    // attention block
    tp_collective(st, L.attn_comm.bwd_gather, mb, chunk, Side::before_gemm);
    fetch_module(st, 1, mb, chunk);
    dequantise(st, 1, cat, mb, chunk);
    compute_tracked(st, L.out_dgrad, cat, mb, chunk);
    adapters(st, 1, false, cat, mb, chunk);
    if (!split && !frozen_) compute_tracked(st, L.out_wgrad, cat, mb, chunk);
    if (p_.recompute == Recompute::selective && p_.selective_recompute == SelectiveRecompute::attention)
        attention_forward(st, Category::recompute, mb, chunk);
    std::uint32_t kv = kNone, dkv = kNone;
    if (L.cp_kv_gather) kv = emit(st, L.cp_kv_gather, Stream::cp_comm, Category::cp_comm, mb, chunk, {last_compute_});
    if (L.attn_bwd_ops.empty()) {
        compute_tracked(st, L.attn_bwd, cat, mb, chunk);
    } else {
        for (auto op : L.attn_bwd_ops) compute_tracked(st, op, cat, mb, chunk);
    }
    if (kv != kNone) st.pending.push_back(kv);
    if (L.cp_dkv_reduce) dkv = emit(st, L.cp_dkv_reduce, Stream::cp_comm, Category::cp_comm, mb, chunk, {last_compute_});
    compute_tracked(st, L.rope_bwd, cat, mb, chunk);
    if (dkv != kNone) st.pending.push_back(dkv);
    if (L.sp_input_regather && !split && !frozen_)
        regather = emit(st, L.sp_input_regather, Stream::tp_comm, Category::tp_comm, mb, chunk, {last_compute_});
    fetch_module(st, 0, mb, chunk);
    dequantise(st, 0, cat, mb, chunk);
    const auto dgrad_done = compute_tracked(st, L.qkv_dgrad, cat, mb, chunk);
    adapters(st, 0, false, cat, mb, chunk);
    if (regather != kNone && L.sp_input_regather) st.pending.push_back(regather);
    const auto wgrad_done =
        split || frozen_ ? std::max(dgrad_done, last_compute_) : compute_tracked(st, L.qkv_wgrad, cat, mb, chunk);
    tp_collective(st, L.attn_comm.bwd_reduce, mb, chunk, Side::after_gemm);
    compute_tracked(st, L.ln1_bwd, cat, mb, chunk);
    return std::max(wgrad_done, last_compute_);
}

// The W pass of a split backward: the layer's four weight-gradient GEMMs, in the order the
// backward would have run them (the Zero Bubble repository's WeightGradStore queues each linear
// layer's wgrad closure in backward order and runs the queue; DualPipe's WeightGradStore.pop
// likewise). Under sequence parallelism the column-parallel GEMMs (fc1, qkv) read their input
// all-gathered again, as in the unsplit backward. Returns the last GEMM.
std::uint32_t Builder::layer_weight_grad(StageState& st, int mb, int chunk) {
    const auto& L = lp_;
    const auto cat = Category::backward;
    compute_tracked(st, L.fc2_wgrad, cat, mb, chunk);
    auto regathered = [&](ProtoId gemm) {
        if (L.sp_input_regather)
            st.pending.push_back(emit(st, L.sp_input_regather, Stream::tp_comm, Category::tp_comm, mb, chunk,
                                      {last_compute_}));
        return compute_tracked(st, gemm, cat, mb, chunk);
    };
    regathered(L.fc1_wgrad);
    compute_tracked(st, L.out_wgrad, cat, mb, chunk);
    return regathered(L.qkv_wgrad);
}

void Builder::dequantise(StageState& st, int g, Category cat, int mb, int chunk) {
    if (const ProtoId d = lp_.dequant[static_cast<std::size_t>(g)]; d != 0) compute_tracked(st, d, cat, mb, chunk);
}

void Builder::adapters(StageState& st, int g, bool forward, Category cat, int mb, int chunk) {
    const auto& ops = forward ? lp_.lora_fwd[static_cast<std::size_t>(g)] : lp_.lora_bwd[static_cast<std::size_t>(g)];
    for (const ProtoId op : ops) compute_tracked(st, op, cat, mb, chunk);
}

bool Builder::alternate_matmuls() const {
    return p_.recompute == Recompute::selective && p_.selective_recompute == SelectiveRecompute::alternate_matmuls;
}

// torchtitan's op-level selective checkpointing replays the layer's forward at the start of
// its backward: the saved outputs (attention, wq, wv, w1, w2, the TP reductions) are reused,
// every other op runs again: the norms, RoPE, the activation, the residual adds and the
// even-numbered matmuls wk, wo and w3 (fc2 of a 2-matrix MLP).
void Builder::recompute_alternate(StageState& st, int mb, int chunk) {
    const auto& L = lp_;
    const auto cat = Category::recompute;
    compute_tracked(st, L.ln1, cat, mb, chunk);
    if (L.fp8_cast_fwd) compute_tracked(st, L.fp8_cast_fwd, cat, mb, chunk);
    compute_tracked(st, L.recompute_wk, cat, mb, chunk);
    compute_tracked(st, L.rope, cat, mb, chunk);
    compute_tracked(st, L.out, cat, mb, chunk);
    compute_tracked(st, L.res_ln2, cat, mb, chunk);
    compute_tracked(st, L.recompute_w3 ? L.recompute_w3 : L.fc2, cat, mb, chunk);
    compute_tracked(st, L.act, cat, mb, chunk);
    compute_tracked(st, L.residual, cat, mb, chunk);
}

std::uint32_t Builder::host_wait(StageState& st, ProtoId proto, Category cat, int mb, int chunk) {
    // A device synchronize waits for every stream: the ops the next kernel waits for (an
    // overlapped TP collective, a prefetched gather) and the latest sharded-gradient reduce too.
    std::vector<std::uint32_t> deps(st.pending.begin(), st.pending.end());
    for (const auto d : {last_compute_, last_reduce_})
        if (d != kNone) deps.push_back(d);
    auto sends = std::move(st.blocking_sends);
    st.blocking_sends.clear();
    const auto id = emit_aside(st, proto, Stream::compute, cat, mb, chunk, deps);
    st.blocking_sends = std::move(sends);
    return id;
}

// Without P2P overlap the rank waits for its send before computing on (Megatron-LM 2021-22:
// batch_isend_irecv, wait, torch.cuda.synchronize()).
void Builder::blocking_p2p(StageState& st) {
    if (!p_.overlap_p2p) st.blocking_sends.push_back(static_cast<std::uint32_t>(st.prog.ops.size() - 1));
}

} // namespace trainsim::model::workload_detail
