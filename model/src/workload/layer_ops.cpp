// The ops of a layer, the embedding and the head (builder.hpp): GEMM shapes under TP / SP / CP,
// attention, element-wise bytes, FP8 casts, and the kernels each stack launches per op.
#include "builder.hpp"

namespace trainsim::model::workload_detail {

ElementwiseBytes eager_bytes(FfnType ffn) {
    ElementwiseBytes b;
    b.norm_fwd = 36.0;
    b.norm_bwd = 70.0 + 6.0;
    b.rope = 20.0;
    switch (ffn) {
        case FfnType::swiglu:
            b.act_fwd = 10.0, b.act_bwd = 18.0;
            break;
        case FfnType::gelu:
            b.act_fwd = 4.0, b.act_bwd = 6.0;
            break;
        case FfnType::relu2:
            b.act_fwd = 8.0, b.act_bwd = 12.0;
            break;
    }
    return b;
}

LayerLaunches layer_launches(HostDispatch d, CrossEntropy ce) {
    LayerLaunches l{};
    switch (d) {
        case HostDispatch::legacy:
            // Megatron-LM 2021-22 megatron/model/transformer.py (ParallelTransformerLayer) and
            // mpu/layers.py, forward: Apex FusedLayerNorm 1; the QKV ColumnParallelLinear keeps its bias
            // in F.linear -> addmm: bias copy + GEMM 2; the Q/K/V transposes 1; baddbmm 1;
            // FusedScaleMaskSoftmax 1, attention dropout under the RNG tracker's fork 1 (+1 for the
            // fork's get/set of the CUDA RNG state); bmm 1 + permute().contiguous() 1; dense GEMM
            // (skip_bias_add) 1; bias_dropout_add (TorchScript: fused add + dropout mask) 2 +
            // post-attention LayerNorm 1; dense_h_to_4h 1; bias_gelu (TorchScript) 1; dense_4h_to_h 1;
            // bias_dropout_add 2: 19 kernels. Backward (autograd): each GEMM's dgrad and wgrad, the bias
            // gradients (a sum each), Apex's LayerNorm backward (3 kernels), dropout and softmax
            // backward, the residual branches' gradient adds, and the AccumulateGrad add into each of
            // the layer's 12 parameter gradients (DeepSpeed / Megatron accumulate grads per parameter
            // across micro-batches): 43 kernels.
            l = {1, 2, 1, 1, 1, 3, 2, 1, 3, 1, 1, 1, 2, 1, 2, 3, 1, 2, 9, 1, 2, 2, 2, 1, 2, 1, 1, 1, 1, 4, 9, 4,
                 // GPT embedding: word + position lookups, add, dropout; backward: the two embedding
                 // backwards (sort-based) and their accumulations; final LayerNorm; vocab-parallel
                 // cross-entropy (mpu/cross_entropy.py: max, subtract, target mask and gather, exp, sum,
                 // log, ... ~15 ops, 3 all-reduces; backward ~6 ops).
                 4, 12, 1, 15, 3, 6};
            break;
        case HostDispatch::eager:
            // Plain PyTorch modules (torchtitan's Llama, eager): RMSNorm as float(), pow, mean, add,
            // rsqrt, mul, type_as, mul weight 8; wq, wk, wv 3; RoPE through view_as_complex: float()
            // and view x2, complex mul x2, view_as_real, type_as x2 6; SDPA 1 + transposes 3 (its
            // contiguous copies); wo 1; residual add 1 + RMSNorm 8; w1, w3 2; silu, mul 2; w2 1;
            // residual add 1. Backward about twice each forward op.
            l = {8, 3, 6, 4, 1, 2, 1, 1, 9, 2, 2, 1,  1, 1, 1, 3, 3, 2, 16,
                 1, 1, 4, 1, 1, 2, 1, 1, 6, 5, 3, 16, 4, 1, 5, 8, 4, 1, 2};
            break;
        case HostDispatch::compiled:
            // torch.compile: the element-wise chains fused into one generated kernel each, the GEMMs
            // and the attention kernel as before.
            l = {1, 3, 1, 1, 1, 1, 1, 1, 1, 2, 1, 1, 0, 1, 1, 1, 2, 2, 2,
                 1, 1, 1, 1, 1, 1, 1, 1, 1, 3, 3, 2, 1, 1, 2, 1, 2, 1, 1};
            break;
        case HostDispatch::te:
        case HostDispatch::graphs:
            // Megatron-Core GPT layer on Transformer Engine: LayerNormLinear (LN kernel + GEMM) 1 + 1;
            // fused RoPE for q and k 2; fused attention 1 (+2 around it: layout and softmax-stats
            // buffers); proj Linear 1; fused bias-dropout-add 1 + LayerNormMLP's LN 1; fc1 1; fused
            // bias-SwiGLU / GeLU 1; fc2 1; bias-dropout-add 1. Backward: dgrad and wgrad per GEMM (wgrad
            // accumulates into main_grad inside the GEMM: gradient_accumulation_fusion), LN backward 2
            // + the residual gradient add 1, fused activation / RoPE / attention backward.
            l = {1, 1, 2, 3, 1, 2, 2, 1, 2, 1, 1, 1, 1, 1, 1, 1, 1,  1, 3,
                 1, 1, 3, 1, 1, 2, 1, 1, 2, 1, 1, 3, 2, 1, 6, 1, 15, 3, 6};
            break;
    }
    // The loss kernels follow the loss, not the model code.
    if (ce == CrossEntropy::pytorch) l.loss = 2, l.loss_bwd = 2; // log_softmax + nll_loss; backward likewise
    if (ce == CrossEntropy::fused) l.loss = 1, l.loss_bwd = 1;   // one fused kernel each way
    return l;
}

Builder::Builder(const Plan& plan, WorkloadOrder order) : plan_(plan), order_(order), m_(plan.model), p_(plan.parallel), frozen_(frozen_base(plan.training)) {
    g_.tp = p_.tp;
    g_.pp = p_.pp;
    g_.vp = p_.vp;
    g_.cp = p_.cp;
    g_.dp = p_.dp;
    g_.microbatches = plan.grad_accum();
    g_.hsdp_shard = std::min(p_.dp * p_.cp, std::max(1, plan.cluster.gpus_per_node / (p_.tp)));
    tokens_ = static_cast<std::int64_t>(plan.training.micro_batch) * plan.training.seq_len / p_.cp;
    sp_tokens_ = p_.sequence_parallel ? tokens_ / p_.tp : tokens_;
    full_recompute_layers_ = full_recompute_layers(plan_);
    params_ = count_params(m_);
    add_proto(OpProto{});  // id 0 = "none" for optional collectives
    make_layer_protos();
    make_head_protos();
    assign_launches();
}

// ---------- protos ----------
ProtoId Builder::add_proto(OpProto p) {
    g_.protos.push_back(std::move(p));
    return static_cast<ProtoId>(g_.protos.size() - 1);
}

ProtoId Builder::gemm(std::string name, std::int64_t m, std::int64_t n, std::int64_t k, Precision prec) {
    OpProto p;
    p.kind = OpKind::gemm;
    p.name = std::move(name);
    p.precision = prec;
    p.m = m;
    p.n = n;
    p.k = k;
    p.flops = Flops(2.0 * static_cast<double>(m) * static_cast<double>(n) * static_cast<double>(k));
    const double ob = operand_bytes(prec);
    p.bytes = Bytes(ob * static_cast<double>(m * k + k * n) + kActBytes * static_cast<double>(m * n));
    return add_proto(std::move(p));
}

ProtoId Builder::batched_gemm(std::string name, std::int64_t batch, std::int64_t m, std::int64_t n, std::int64_t k) {
    const ProtoId id = gemm(std::move(name), m, n, k, Precision::bf16);
    auto& p = g_.protos[id];
    p.batch = batch;
    p.flops = p.flops * static_cast<double>(batch);
    p.bytes = p.bytes * static_cast<double>(batch);
    return id;
}

ProtoId Builder::memory(std::string name, double bytes) {
    OpProto p;
    p.kind = OpKind::memory;
    p.name = std::move(name);
    p.bytes = Bytes(bytes);
    return add_proto(std::move(p));
}

ProtoId Builder::collective(std::string name, CollectiveOp op, Group group, double bytes) {
    // Per-bucket and per-unit collectives repeat with few distinct sizes: share protos.
    const auto key = std::make_tuple(name, op, group, bytes);
    if (auto it = collective_cache_.find(key); it != collective_cache_.end()) return it->second;
    const ProtoId id = make_collective(std::move(name), op, group, bytes);
    collective_cache_.emplace(key, id);
    return id;
}

ProtoId Builder::make_collective(std::string name, CollectiveOp op, Group group, double bytes) {
    OpProto p;
    p.kind = OpKind::collective;
    p.name = std::move(name);
    p.collective = op;
    p.group = group;
    p.bytes = Bytes(bytes);
    return add_proto(std::move(p));
}

ProtoId Builder::p2p(std::string name, OpKind kind, double bytes) {
    OpProto p;
    p.kind = kind;
    p.name = std::move(name);
    p.collective = CollectiveOp::send_recv;
    p.group = Group::pp;
    p.bytes = Bytes(bytes);
    return add_proto(std::move(p));
}

ProtoId Builder::attention(std::string name, bool fwd) {
    OpProto p;
    p.kind = fwd ? OpKind::attention_fwd : OpKind::attention_bwd;
    p.name = std::move(name);
    p.precision = Precision::bf16;  // TE keeps dot-product attention in BF16 by default
    p.batch_heads = static_cast<std::int64_t>(plan_.training.micro_batch) * (m_.heads / p_.tp);
    p.seq_q = plan_.training.seq_len / p_.cp;
    p.seq_kv = plan_.training.seq_len;
    p.head_dim = m_.head_dim;
    p.causal = true;
    p.attention_impl = p_.attention;
    // Causal flash attention: QK^T and PV over the lower triangle, split evenly over CP
    // ranks by the load-balanced (2*cp chunk) layout. Backward does 5 GEMMs to forward's 2.
    const double s = plan_.training.seq_len;
    const double fwd_flops = 4.0 * static_cast<double>(p.batch_heads) * m_.head_dim * s * (s + 1.0) / 2.0 / p_.cp;
    p.flops = Flops(fwd ? fwd_flops : 2.5 * fwd_flops);
    // Q, K, V, O (and dO, dQ, dK, dV in backward) streamed once.
    const double qkvo = kActBytes * static_cast<double>(tokens_) * (2.0 * m_.heads + 2.0 * m_.kv_heads) *
                        m_.head_dim / p_.tp;
    p.bytes = Bytes(fwd ? qkvo : 2.0 * qkvo);
    return add_proto(std::move(p));
}

SublayerComm Builder::sublayer_comm(const std::string& name) {
    SublayerComm c;
    if (p_.tp == 1) return c;
    const double full = kActBytes * static_cast<double>(tokens_) * m_.hidden;  // [T, h] in BF16
    if (p_.sequence_parallel) {
        c.fwd_gather = collective(name + "_sp_ag", CollectiveOp::all_gather, Group::tp, full);
        if (p_.tp_comm_overlap) {
            // Userbuffers' pipelined GEMM + reduce-scatter: the chunk k reduce-scatter overlaps the
            // GEMM of chunk k + 1, and the last chunk's trails the GEMM.
            const double chunks = kTpOverlapPipelineSplits;
            c.fwd_reduce =
                collective(name + "_sp_rs", CollectiveOp::reduce_scatter, Group::tp, full * (chunks - 1) / chunks);
            c.fwd_reduce_tail =
                collective(name + "_sp_rs_tail", CollectiveOp::reduce_scatter, Group::tp, full / chunks);
        } else {
            c.fwd_reduce = collective(name + "_sp_rs", CollectiveOp::reduce_scatter, Group::tp, full);
        }
        c.bwd_gather = collective(name + "_sp_ag_grad", CollectiveOp::all_gather, Group::tp, full);
        c.bwd_reduce = collective(name + "_sp_rs_grad", CollectiveOp::reduce_scatter, Group::tp, full);
    } else {
        c.fwd_reduce = collective(name + "_tp_ar", CollectiveOp::all_reduce, Group::tp, full);
        c.bwd_reduce = collective(name + "_tp_ar_grad", CollectiveOp::all_reduce, Group::tp, full);
    }
    return c;
}

void Builder::make_layer_protos() {
    const Precision gp = plan_.precision == Precision::fp8 ? Precision::fp8 : plan_.precision;
    const std::int64_t T = tokens_;
    const double Ts = static_cast<double>(sp_tokens_);
    const std::int64_t h = m_.hidden;
    const std::int64_t qkv_n = static_cast<std::int64_t>(m_.heads + 2 * m_.kv_heads) * m_.head_dim / p_.tp;
    const std::int64_t attn_n = static_cast<std::int64_t>(m_.heads) * m_.head_dim / p_.tp;
    const std::int64_t f = m_.ffn / p_.tp;
    const bool gated = m_.ffn_type == FfnType::swiglu;
    const std::int64_t fc1_n = gated ? 2 * f : f;
    const double norm_out = plan_.precision == Precision::fp8 ? 1.0 : kActBytes;  // LN writes FP8 in TE
    const auto Td = static_cast<double>(T), hd = static_cast<double>(h), fd = static_cast<double>(f);
    const auto qkvd = static_cast<double>(qkv_n), attnd = static_cast<double>(attn_n), fc1d = static_cast<double>(fc1_n);
    const double qk_heads = m_.heads + m_.kv_heads;

    auto& L = lp_;
    // Bytes moved per element by the norms, RoPE and the activation, fused or eager.
    const bool eager = p_.elementwise == Elementwise::eager;
    const ElementwiseBytes eb = eager ? eager_bytes(m_.ffn_type) : ElementwiseBytes{};
    const double qk_elems = Td * qk_heads * m_.head_dim / p_.tp;
    // Eager GQA attention repeats the keys and values to every query head (repeat_kv: read
    // the kv heads, write the query heads' copies); its backward sums them back.
    const double repeat_kv = eager && m_.kv_heads < m_.heads
                                 ? 2.0 * kActBytes * Td * (m_.heads + m_.kv_heads) * m_.head_dim / p_.tp
                                 : 0.0;
    // Norm: read x, write y. Residual add: read 2, write 1.
    L.ln1 = memory("ln1", Ts * hd * (eager ? eb.norm_fwd : kActBytes + norm_out));
    L.qkv = gemm("qkv", T, qkv_n, h, gp);
    L.rope = memory("rope", (eager ? eb.rope : 2.0 * kActBytes) * qk_elems + repeat_kv);
    L.attn_fwd = attention("attn_fwd", true);
    L.attn_bwd = attention("attn_bwd", false);
    if (p_.attention == AttentionImpl::unfused) {
        // Scores are computed for every (query, key) pair: causal masking does not skip work.
        const std::int64_t bh = static_cast<std::int64_t>(plan_.training.micro_batch) * (m_.heads / p_.tp);
        const std::int64_t sq = plan_.training.seq_len / p_.cp, sk = plan_.training.seq_len, d = m_.head_dim;
        const double scores = static_cast<double>(bh) * static_cast<double>(sq) * static_cast<double>(sk);
        const double drop = p_.dropout ? 1.0 : 0.0;
        // Fused scale-mask-softmax: read scores, write probabilities (2 B each); backward reads
        // the probabilities and their gradient and writes dS (6 B). Outside the fused kernel's
        // shape constraints (unfused_softmax_fuses) Megatron falls back to PyTorch ops in FP32
        // (forward_torch_softmax): float() 2+4, * scale 4+4, masked_fill_ 4+4+1 (the bool mask),
        // Softmax 4+4, half() 4+2 = 37 B; backward through autograd: half 2+4, softmax 4+4+4,
        // masked_fill 4+4+1, mul 4+4, float 4+2 = 41 B. Dropout on the probabilities reads
        // them and writes the result and a 1-byte mask (5 B), and reads the mask in backward.
        fused_softmax_ = unfused_softmax_fuses(plan_.training.micro_batch, m_.heads / p_.tp, sq, sk);
        const double soft_fwd = fused_softmax_ ? 4.0 : 37.0, soft_bwd = fused_softmax_ ? 6.0 : 41.0;
        L.attn_fwd_ops = {batched_gemm("attn_qk", bh, sq, sk, d),
                          memory("attn_softmax", scores * (soft_fwd + drop * 5.0)),
                          batched_gemm("attn_pv", bh, sq, d, sk)};
        // Backward: dV = P^T dO, dP = dO V^T, dropout and softmax backward (read P, dP (and the
        // mask), write dS), dQ = dS K, dK = dS^T Q.
        L.attn_bwd_ops = {batched_gemm("attn_dv", bh, sk, d, sq), batched_gemm("attn_dp", bh, sq, sk, d),
                          memory("attn_softmax_bwd", scores * (soft_bwd + drop * 5.0)),
                          batched_gemm("attn_dq", bh, sq, d, sk), batched_gemm("attn_dk", bh, sk, d, sq)};
    }
    L.out = gemm("attn_out", T, h, attn_n, gp);
    if (alternate_matmuls()) {
        L.recompute_wk =
            gemm("recompute_wk", T, static_cast<std::int64_t>(m_.kv_heads) * m_.head_dim / p_.tp, h, gp);
        L.recompute_w3 = gated ? gemm("recompute_w3", T, f, h, gp) : 0;
    }
    // With dropout, the bias-dropout-add fusion also writes a 1-byte mask (read again in backward).
    const double mask = p_.dropout ? 1.0 : 0.0;
    L.res_ln2 =
        memory("residual_ln2", Ts * hd * (3.0 * kActBytes + (eager ? eb.norm_fwd : kActBytes + norm_out) + mask));
    if (p_.host_sync_layer) {
        // Megatron-DeepSpeed's two torch.tensor(0.0, device=...) before the MLP: two 2-byte
        // host-to-device copies on the compute stream, each a launch on the host, after which
        // the host waits until the stream has drained (Parallel::host_sync_layer).
        L.scalar_sync = memory("layer_scalar_sync", 2.0 * kActBytes);
        g_.protos[L.scalar_sync].launches = 2;
        g_.protos[L.scalar_sync].host_sync = true;
    }
    L.fc1 = gemm("fc1", T, fc1_n, h, gp);
    L.act = memory(gated ? "swiglu" : (m_.ffn_type == FfnType::gelu ? "gelu" : "relu2"),
                   Td * fd * (eager ? eb.act_fwd : (gated ? 2.0 : 1.0) * kActBytes + norm_out));
    L.fc2 = gemm("fc2", T, h, f, gp);
    L.residual = memory("residual", Ts * hd * (3.0 * kActBytes + mask));
    // Backward GEMMs: dgrad dX = dY W^T, wgrad dW = X^T dY (k = tokens).
    L.qkv_dgrad = gemm("qkv_dgrad", T, h, qkv_n, gp);
    L.qkv_wgrad = gemm("qkv_wgrad", qkv_n, h, T, gp);
    L.out_dgrad = gemm("attn_out_dgrad", T, attn_n, h, gp);
    L.out_wgrad = gemm("attn_out_wgrad", h, attn_n, T, gp);
    L.fc1_dgrad = gemm("fc1_dgrad", T, h, fc1_n, gp);
    L.fc1_wgrad = gemm("fc1_wgrad", fc1_n, h, T, gp);
    L.fc2_dgrad = gemm("fc2_dgrad", T, f, h, gp);
    L.fc2_wgrad = gemm("fc2_wgrad", h, f, T, gp);
    // Transformer Engine runs FP8 dgrad and wgrad GEMMs with split accumulation
    // (use_split_accumulator for the backward pass; fast accumulation only in fprop).
    for (auto id : {L.qkv_dgrad, L.qkv_wgrad, L.out_dgrad, L.out_wgrad, L.fc1_dgrad, L.fc1_wgrad, L.fc2_dgrad,
                    L.fc2_wgrad})
        g_.protos[id].split_accumulate = gp == Precision::fp8;
    // Norm backward: read x, dy, residual grad; write dx. Activation backward reads its
    // inputs and the output gradient and writes the input gradients.
    L.ln1_bwd = memory("ln1_bwd", Ts * hd * ((eager ? eb.norm_bwd : 4.0 * kActBytes) + mask));
    L.ln2_bwd = memory("ln2_bwd", Ts * hd * ((eager ? eb.norm_bwd : 4.0 * kActBytes) + mask));
    L.act_bwd = memory("act_bwd", Td * fd * (eager ? eb.act_bwd : kActBytes * (gated ? 5.0 : 3.0)));
    L.rope_bwd = memory("rope_bwd", (eager ? eb.rope : 2.0 * kActBytes) * qk_elems + repeat_kv);
    if (plan_.precision == Precision::fp8) {
        // Transformer Engine FP8: the out-proj and fc2 inputs are cast (read BF16, write FP8 and
        // its transpose); the LN outputs are cast inside the fused LN. Backward: every GEMM's
        // output gradient is cast-transposed (read BF16, write E5M2 and its transpose).
        const double fwd_elems = Td * (attnd + fd) + 2.0 * Td * hd;
        L.fp8_cast_fwd = memory("fp8_cast_transpose", fwd_elems * (kActBytes + 2.0) - 2.0 * Td * hd * kActBytes);
        const double bwd_elems = Td * (qkvd + hd + fc1d + hd);
        L.fp8_cast_bwd = memory("fp8_cast_transpose_grad", bwd_elems * (kActBytes + 2.0));
    }
    if (p_.cp > 1) {
        // Ring attention: every rank receives the K and V of the other cp-1 ranks (an
        // all-gather in traffic terms) and, in backward, sends back their gradients.
        const double kv = kActBytes * static_cast<double>(plan_.training.micro_batch) * plan_.training.seq_len *
                          2.0 * m_.kv_heads * m_.head_dim / p_.tp;
        L.cp_kv_gather = collective("cp_kv_ag", CollectiveOp::all_gather, Group::cp, kv);
        L.cp_dkv_reduce = collective("cp_dkv_rs", CollectiveOp::reduce_scatter, Group::cp, kv);
    }
    if (p_.sequence_parallel) {
        L.sp_input_regather = collective("sp_input_ag_wgrad", CollectiveOp::all_gather, Group::tp,
                                         kActBytes * Td * hd);
    }
    L.attn_comm = sublayer_comm("attn");
    L.mlp_comm = sublayer_comm("mlp");
    if (frozen_) make_lora_protos();
    if (p_.tp_comm_overlap && p_.sequence_parallel && p_.tp > 1) {
        // Transformer Engine userbuffers (initialize_ub defaults): ring exchange for the GEMMs
        // fed by an all-gather (qkv_fprop, fc1_fprop, proj_dgrad, fc2_dgrad) computes one
        // rank's chunk of rows at a time, tp chunks; the pipelined GEMM + reduce-scatter
        // (proj_fprop, fc2_fprop) splits its GEMM into num_splits = 4. The rest are "bulk":
        // a whole collective beside a whole other GEMM.
        for (auto id : {L.qkv, L.fc1, L.out_dgrad, L.fc2_dgrad}) g_.protos[id].splits = p_.tp;
        for (auto id : {L.out, L.fc2}) g_.protos[id].splits = kTpOverlapPipelineSplits;
    }
}

void Builder::make_lora_protos() {
    const Precision gp = plan_.precision;
    const std::int64_t T = tokens_;
    const int tp = p_.tp;
    const std::int64_t r = plan_.training.lora_rank;
    const auto groups = lora_groups(m_, plan_.training.lora_targets);
    const auto weights = layer_gemm_weights(m_);
    static constexpr std::array<const char*, 4> names{"qkv", "attn_out", "fc1", "fc2"};
    for (std::size_t i = 0; i < 4; ++i) {
        const std::string n = names[i];
        if (plan_.training.base_format == BaseFormat::nf4) {
            // bitsandbytes dequantize_4bit: read the NF4 weight and its constants, write BF16.
            lp_.dequant[i] = memory("nf4_dequant_" + n, weights[i] / tp * (base_gemm_bytes_per_weight(BaseFormat::nf4) + 2.0));
        }
        const auto& g = groups[i];
        if (g.count == 0) continue;
        // Column-parallel GEMMs (QKV, FC1) split B's columns over TP, row-parallel ones (output,
        // FC2) A's rows; the partial x A of a row-parallel group is T x r, whose TP reduction is
        // left out (r / h of the layer's own).
        const bool column = i == 0 || i == 2;
        const auto k = static_cast<std::int64_t>(column ? g.in : g.in / tp);
        const auto out = static_cast<std::int64_t>(column ? g.out / tp : g.out);
        const std::int64_t rc = r * g.count;
        lp_.lora_fwd[i] = {gemm("lora_a_" + n, T, rc, k, gp), gemm("lora_b_" + n, T, out, r, gp)};
        // B's input gradient: each target's dY_i B_i^T (T x r from n_i), 2 T r n_i FLOPs, as one
        // T x r x sum(n) GEMM; B's weight gradient likewise r x sum(n) x T.
        lp_.lora_bwd[i] = {gemm("lora_b_dgrad_" + n, T, r, out, gp), gemm("lora_b_wgrad_" + n, r, out, T, gp),
                           gemm("lora_a_dgrad_" + n, T, k, rc, gp), gemm("lora_a_wgrad_" + n, k, rc, T, gp)};
    }
}

// Kernels launched per op on the plan's dispatch path (layer_launches).
void Builder::assign_launches() {
    auto l = layer_launches(p_.host_dispatch, p_.cross_entropy);
    // The PyTorch fallback of Megatron's softmax launches float, mul, masked_fill_, softmax
    // and half (and their five backward kernels) instead of one fused kernel each way.
    if (p_.attention == AttentionImpl::unfused && !fused_softmax_) l.attn_softmax += 4, l.attn_softmax_bwd += 4;
    auto set = [&](ProtoId id, int n) {
        if (id != 0) g_.protos[id].launches = n;
    };
    const auto& L = lp_;
    set(L.ln1, l.ln1), set(L.qkv, l.qkv), set(L.rope, l.rope), set(L.attn_fwd, l.attn_fwd);
    set(L.out, l.attn_out), set(L.res_ln2, l.res_ln2), set(L.fc1, l.fc1), set(L.act, l.act);
    set(L.fc2, l.fc2), set(L.residual, l.residual);
    set(L.fc2_dgrad, l.fc2_dgrad), set(L.fc2_wgrad, l.fc2_wgrad), set(L.act_bwd, l.act_bwd);
    set(L.fc1_dgrad, l.fc1_dgrad), set(L.fc1_wgrad, l.fc1_wgrad), set(L.ln2_bwd, l.ln2_bwd);
    set(L.out_dgrad, l.out_dgrad), set(L.out_wgrad, l.out_wgrad), set(L.attn_bwd, l.attn_bwd);
    set(L.rope_bwd, l.rope_bwd), set(L.qkv_dgrad, l.qkv_dgrad), set(L.qkv_wgrad, l.qkv_wgrad);
    set(L.ln1_bwd, l.ln1_bwd), set(L.fp8_cast_fwd, l.fp8_cast), set(L.fp8_cast_bwd, l.fp8_cast);
    if (L.attn_fwd_ops.size() == 3) {
        set(L.attn_fwd_ops[0], l.attn_qk), set(L.attn_fwd_ops[1], l.attn_softmax),
            set(L.attn_fwd_ops[2], l.attn_pv);
    }
    if (L.attn_bwd_ops.size() == 5) {
        set(L.attn_bwd_ops[0], l.attn_dv), set(L.attn_bwd_ops[1], l.attn_dp);
        set(L.attn_bwd_ops[2], l.attn_softmax_bwd), set(L.attn_bwd_ops[3], l.attn_dq);
        set(L.attn_bwd_ops[4], l.attn_dk);
    }
    const auto& H = hp_;
    set(H.embed_fwd, l.embed_fwd), set(H.embed_bwd, l.embed_bwd), set(H.final_ln, l.final_ln);
    set(H.loss, l.loss), set(H.loss_bwd, l.loss_bwd), set(H.loss_comm, l.loss_calls);
}

void Builder::make_head_protos() {
    const std::int64_t T = tokens_;
    const double Ts = static_cast<double>(sp_tokens_);
    const std::int64_t h = m_.hidden;
    const std::int64_t v = (m_.vocab + p_.tp - 1) / p_.tp;  // vocab-parallel, padded
    const auto Td = static_cast<double>(T), hd = static_cast<double>(h), vd = static_cast<double>(v);
    auto& H = hp_;
    H.embed_fwd = memory("embedding", Td * hd * 2.0 * kActBytes);
    H.embed_bwd = memory("embedding_bwd", Td * hd * (kActBytes + 2.0 * 4.0));
    if (p_.tp > 1) {
        const double full = kActBytes * Td * hd;
        H.embed_comm_fwd = collective(p_.sequence_parallel ? "embed_sp_rs" : "embed_tp_ar",
                                      p_.sequence_parallel ? CollectiveOp::reduce_scatter : CollectiveOp::all_reduce,
                                      Group::tp, full);
        if (p_.sequence_parallel)
            H.embed_comm_bwd = collective("embed_sp_ag_grad", CollectiveOp::all_gather, Group::tp, full);
        H.head_gather = p_.sequence_parallel
                            ? collective("head_sp_ag", CollectiveOp::all_gather, Group::tp, full)
                            : 0;
        H.head_reduce = collective(p_.sequence_parallel ? "head_sp_rs_grad" : "head_tp_ar_grad",
                                   p_.sequence_parallel ? CollectiveOp::reduce_scatter : CollectiveOp::all_reduce,
                                   Group::tp, full);
        // Vocab-parallel cross-entropy: all-reduce of the max, the sum of exponentials and
        // the target logit per token (3 x FP32).
        H.loss_comm = collective("loss_tp_ar", CollectiveOp::all_reduce, Group::tp, 3.0 * 4.0 * Td);
    }
    H.final_ln = memory("final_ln", Ts * hd * 2.0 * kActBytes);
    // Megatron's output layer is a plain ColumnParallelLinear: BF16 even in FP8 recipes.
    const Precision hp = plan_.precision == Precision::fp8 ? Precision::bf16 : plan_.precision;
    H.head = gemm("lm_head", T, v, h, hp);
    H.head_dgrad = gemm("lm_head_dgrad", T, h, v, hp);
    H.head_wgrad = gemm("lm_head_wgrad", v, h, T, hp);
    const LossBytes lb = loss_bytes_per_logit(p_.cross_entropy);
    H.loss = memory("cross_entropy", Td * vd * lb.fwd);
    H.loss_bwd = memory("cross_entropy_bwd", Td * vd * lb.bwd);
}

} // namespace trainsim::model::workload_detail
