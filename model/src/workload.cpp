// Plan -> per-stage op programs. Shapes follow Megatron-Core / Transformer Engine (docs/model.md):
// tokens per rank T = micro_batch * seq_len / cp; with sequence parallelism norms, residuals and
// dropout-free elementwise ops work on T / tp tokens; column-parallel GEMMs see all T tokens.
#include "trainsim/model/workload.hpp"
#include "trainsim/model/memory_model.hpp"

#include "trainsim/model/flops.hpp"
#include "trainsim/model/layout.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <map>
#include <span>
#include <stdexcept>
#include <tuple>

namespace trainsim::model {

std::size_t OpGraph::op_count() const {
    std::size_t n = 0;
    for (const auto& s : stages) n += s.ops.size();
    return n;
}

namespace {
// Forward passes a stage runs before its first backward (Megatron-LM schedules.py:
// forward_backward_pipelining_with(out)_interleaving).
int warmup_forwards(int stage, int pp, int vp, int microbatches) {
    const int total = microbatches * vp;
    if (vp == 1) return std::min(pp - stage - 1, microbatches);
    if (microbatches == pp) return total; // "all warm-up" case of the interleaved schedule
    return std::min((pp - stage - 1) * 2 + (vp - 1) * pp, total);
}
} // namespace

std::vector<ScheduleItem> pipeline_schedule(int stage, int pp, int vp, int microbatches) {
    std::vector<ScheduleItem> out;
    const int total = microbatches * vp;
    out.reserve(static_cast<std::size_t>(2 * total));
    const int warmup = warmup_forwards(stage, pp, vp, microbatches);
    auto item = [&](int k, bool fwd) {
        const int group = k / pp;
        const int chunk_in_order = group % vp;
        ScheduleItem it;
        it.forward = fwd;
        it.chunk = fwd ? chunk_in_order : vp - 1 - chunk_in_order;
        it.microbatch = (k / (pp * vp)) * pp + k % pp;
        return it;
    };
    for (int k = 0; k < warmup; ++k) out.push_back(item(k, true));
    for (int i = 0; i < total - warmup; ++i) {
        out.push_back(item(warmup + i, true));
        out.push_back(item(i, false));
    }
    for (int k = total - warmup; k < total; ++k) out.push_back(item(k, false));
    return out;
}

int peak_inflight_chunks(int stage, int pp, int vp, int microbatches) {
    // pipeline_schedule: `warmup` forwards, then (forward, backward) pairs, then backwards only.
    const int warmup = warmup_forwards(stage, pp, vp, microbatches);
    return microbatches * vp > warmup ? warmup + 1 : warmup;
}

int peak_inflight_chunks(const std::vector<ScheduleItem>& schedule) {
    int live = 0, peak = 0;
    for (const auto& it : schedule) {
        live += it.forward ? 1 : -1;
        peak = std::max(peak, live);
    }
    return peak;
}

namespace {

constexpr double kActBytes = 2.0;  // BF16 activations and activation gradients
// Transformer Engine userbuffers: chunks of the pipelined GEMM + reduce-scatter overlap
// (num_splits = 4 for method "pipeline", transformer_engine/pytorch/module/base.py initialize_ub).
constexpr int kTpOverlapPipelineSplits = 4;

// Bytes per element of a GEMM operand in the plan's precision (FP8 GEMMs read 1-byte operands).
double operand_bytes(Precision p) { return p == Precision::fp8 ? 1.0 : 2.0; }

// Index of a proto within OpGraph::protos.
using ProtoId = std::uint32_t;

struct SublayerComm {
    ProtoId fwd_gather = 0;   // SP: all-gather before the column-parallel GEMM
    ProtoId fwd_reduce = 0;   // all-reduce (no SP) / reduce-scatter (SP) after the row-parallel GEMM
    ProtoId fwd_reduce_tail = 0; // TP overlap: the reduce-scatter of the GEMM's last chunk, exposed
    ProtoId bwd_gather = 0;   // SP: all-gather of the output gradient before the row-parallel dgrad
    ProtoId bwd_reduce = 0;   // all-reduce / reduce-scatter of the column-parallel input gradient
};

// Bytes per element moved by a layer's element-wise ops in PyTorch eager, one kernel per op
// (docs/model.md, "Element-wise ops"):
// - RMSNorm (torch.nn.RMSNorm / torchtitan's, computed in FP32): x.float() 2+4, pow 4+4, mean 4,
//   x * rsqrt 4+4, back to BF16 4+2, * weight 2+2 = 36. Its autograd backward: grad * weight and
//   the weight's reduction 12, to FP32 6, the two products with rsqrt and x 8+16, the pow
//   backward ~10, summing the two paths into dx 12, back to BF16 6 = 70; plus the residual
//   branch's gradient added in (2+2+2).
// - RoPE as a complex multiply in FP32 (Llama reference code): x.float() 2+4, complex multiply
//   4+4, back to BF16 4+2 = 20 per query / key element, forward and backward alike.
// - SwiGLU silu(w1 x) * w3 x: silu 2+2, multiply 2+2+2 = 10; backward: two products 12, silu
//   backward 6 = 18. GELU: one kernel each way, 4 and 6. Squared ReLU: relu and square, 8 and 12.
struct ElementwiseBytes {
    double norm_fwd = 0, norm_bwd = 0, rope = 0, act_fwd = 0, act_bwd = 0;
};
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

// Kernels each op of a layer launches on each dispatch path (docs/model.md "Host"), read from the
// stacks' model code. Forward entries also count for recompute. Communication protos are one
// call each unless said.
struct LayerLaunches {
    int ln1, qkv, rope, attn_fwd, attn_qk, attn_softmax, attn_pv, attn_out, res_ln2, fc1, act, fc2, residual;
    int fc2_dgrad, fc2_wgrad, act_bwd, fc1_dgrad, fc1_wgrad, ln2_bwd, out_dgrad, out_wgrad, attn_bwd;
    int attn_dv, attn_dp, attn_softmax_bwd, attn_dq, attn_dk, rope_bwd, qkv_dgrad, qkv_wgrad, ln1_bwd;
    int fp8_cast; // per FP8 cast-transpose op (amax, scale update, cast-transpose of each tensor)
    int embed_fwd, embed_bwd, final_ln, loss, loss_calls, loss_bwd;
};
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

// Every proto one transformer layer needs, made once (all layers are identical).
struct LayerProtos {
    ProtoId ln1, rope, attn_fwd, attn_bwd, qkv, qkv_dgrad, qkv_wgrad, out, out_dgrad, out_wgrad;
    ProtoId res_ln2, act, fc1, fc1_dgrad, fc1_wgrad, fc2, fc2_dgrad, fc2_wgrad, residual;
    ProtoId scalar_sync = 0; // parallel.host_sync_layer: the blocking scalar copies before the MLP
    ProtoId ln1_bwd, ln2_bwd, act_bwd, rope_bwd;
    ProtoId fp8_cast_fwd = 0, fp8_cast_bwd = 0;
    // Selective recompute of alternate matmuls: the rebuilt wk and w3 (fc2 without a gate).
    ProtoId recompute_wk = 0, recompute_w3 = 0;
    ProtoId cp_kv_gather = 0, cp_dkv_reduce = 0;
    ProtoId sp_input_regather = 0;  // SP: all-gather of a saved input for the wgrad GEMM
    // Unfused attention (Megatron-LM 2021/2022): batched GEMMs around a softmax over s x s scores.
    std::vector<ProtoId> attn_fwd_ops, attn_bwd_ops;
    SublayerComm attn_comm, mlp_comm;
};

struct HeadProtos {
    ProtoId embed_fwd, embed_bwd, embed_comm_fwd = 0, embed_comm_bwd = 0;
    ProtoId final_ln, head_gather = 0, head, loss, loss_comm = 0, loss_bwd, head_dgrad, head_wgrad, head_reduce = 0;
};

// A contiguous set of parameters reduced / gathered together (Megatron DDP bucket).
struct Bucket {
    double params = 0;
    int chunk = 0;
    std::vector<int> units;  // unit ids in backward order (layers, embedding, head)
};

class Builder {
public:
    explicit Builder(const Plan& plan) : plan_(plan), m_(plan.model), p_(plan.parallel) {
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

    OpGraph build() {
        for (int stage = 0; stage < p_.pp; ++stage) g_.stages.push_back(build_stage(stage));
        return std::move(g_);
    }

private:
    // ---------- protos ----------
    ProtoId add_proto(OpProto p) {
        g_.protos.push_back(std::move(p));
        return static_cast<ProtoId>(g_.protos.size() - 1);
    }
    ProtoId gemm(std::string name, std::int64_t m, std::int64_t n, std::int64_t k, Precision prec) {
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
    ProtoId batched_gemm(std::string name, std::int64_t batch, std::int64_t m, std::int64_t n, std::int64_t k) {
        const ProtoId id = gemm(std::move(name), m, n, k, Precision::bf16);
        auto& p = g_.protos[id];
        p.batch = batch;
        p.flops = p.flops * static_cast<double>(batch);
        p.bytes = p.bytes * static_cast<double>(batch);
        return id;
    }
    ProtoId memory(std::string name, double bytes) {
        OpProto p;
        p.kind = OpKind::memory;
        p.name = std::move(name);
        p.bytes = Bytes(bytes);
        return add_proto(std::move(p));
    }
    ProtoId collective(std::string name, CollectiveOp op, Group group, double bytes) {
        // Per-bucket and per-unit collectives repeat with few distinct sizes: share protos.
        const auto key = std::make_tuple(name, op, group, bytes);
        if (auto it = collective_cache_.find(key); it != collective_cache_.end()) return it->second;
        const ProtoId id = make_collective(std::move(name), op, group, bytes);
        collective_cache_.emplace(key, id);
        return id;
    }
    ProtoId make_collective(std::string name, CollectiveOp op, Group group, double bytes) {
        OpProto p;
        p.kind = OpKind::collective;
        p.name = std::move(name);
        p.collective = op;
        p.group = group;
        p.bytes = Bytes(bytes);
        return add_proto(std::move(p));
    }
    ProtoId p2p(std::string name, OpKind kind, double bytes) {
        OpProto p;
        p.kind = kind;
        p.name = std::move(name);
        p.collective = CollectiveOp::send_recv;
        p.group = Group::pp;
        p.bytes = Bytes(bytes);
        return add_proto(std::move(p));
    }
    ProtoId attention(std::string name, bool fwd) {
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

    SublayerComm sublayer_comm(const std::string& name) {
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

    void make_layer_protos() {
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

    // Kernels launched per op on the plan's dispatch path (layer_launches).
    void assign_launches() {
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

    void make_head_protos() {
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

    // ---------- per-stage program ----------
    struct StageState {
        StageProgram prog;
        std::vector<std::uint32_t> pending;  // deps for the next op added
        std::vector<std::uint32_t> blocking_sends;  // deps for the next compute-stream op
    };

    std::uint32_t emit(StageState& st, ProtoId proto, Stream stream, Category cat, int mb, int chunk,
                       std::initializer_list<std::uint32_t> extra = {}) {
        return emit(st, proto, stream, cat, mb, chunk, std::span(extra.begin(), extra.size()));
    }
    std::uint32_t emit(StageState& st, ProtoId proto, Stream stream, Category cat, int mb, int chunk,
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
        op.dep_begin = dep_begin;
        op.dep_count = static_cast<std::uint32_t>(deps.size()) - dep_begin;
        return static_cast<std::uint32_t>(st.prog.ops.size() - 1);
    }
    // A compute-stream op; TP collectives go here too unless TP comm overlap is on.
    std::uint32_t compute(StageState& st, ProtoId proto, Category cat, int mb, int chunk) {
        return emit(st, proto, Stream::compute, cat, mb, chunk);
    }
    enum class Side { before_gemm, after_gemm };
    // A TP collective next to a GEMM. Without TP comm overlap it blocks the compute stream
    // (Megatron's default). With overlap (TE userbuffers) it runs on the TP stream alongside
    // that GEMM, and the op after the GEMM waits for both.
    void tp_collective(StageState& st, ProtoId proto, int mb, int chunk, Side side) {
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
    void tp_tail(StageState& st, ProtoId proto, int mb, int chunk) {
        if (proto == 0) return;
        st.pending.push_back(emit_after(st, proto, Stream::tp_comm, Category::tp_comm, mb, chunk, last_compute_));
    }
    // An op beside the compute stream, after `deps` only: the ops waiting to be attached to the
    // next kernel stay pending for it.
    std::uint32_t emit_aside(StageState& st, ProtoId proto, Stream stream, Category cat, int mb, int chunk,
                             std::span<const std::uint32_t> deps) {
        auto saved = std::move(st.pending);
        st.pending.clear();
        const auto id = emit(st, proto, stream, cat, mb, chunk, deps);
        st.pending = std::move(saved);
        return id;
    }
    std::uint32_t emit_after(StageState& st, ProtoId proto, Stream stream, Category cat, int mb, int chunk,
                             std::uint32_t after) {
        if (after == kNone) return emit_aside(st, proto, stream, cat, mb, chunk, {});
        return emit_aside(st, proto, stream, cat, mb, chunk, std::span(&after, 1));
    }

    std::uint32_t compute_tracked(StageState& st, ProtoId proto, Category cat, int mb, int chunk) {
        const auto id = compute(st, proto, cat, mb, chunk);
        prev_compute_ = last_compute_;
        last_compute_ = id;
        for (auto d : deferred_) st.pending.push_back(d);
        deferred_.clear();
        return id;
    }

    void attention_forward(StageState& st, Category cat, int mb, int chunk) {
        if (lp_.attn_fwd_ops.empty()) {
            compute_tracked(st, lp_.attn_fwd, cat, mb, chunk);
            return;
        }
        for (auto op : lp_.attn_fwd_ops) compute_tracked(st, op, cat, mb, chunk);
    }

    // `own_segment`: the forward pass of the layer, which fetches its 4 weights module by module
    // (fsdp_fetch: module); false for a recompute, whose fetches layer_backward lays out.
    void layer_forward(StageState& st, int mb, int chunk, Category cat, std::uint32_t gather_dep,
                       bool own_segment = true) {
        const auto& L = lp_;
        if (own_segment && module_fetch()) begin_segment({0, 1, 2, 3});
        if (gather_dep != kNone) st.pending.push_back(gather_dep);
        compute_tracked(st, L.ln1, cat, mb, chunk);
        if (L.fp8_cast_fwd) compute_tracked(st, L.fp8_cast_fwd, cat, mb, chunk);
        tp_collective(st, L.attn_comm.fwd_gather, mb, chunk, Side::before_gemm);
        fetch_module(st, 0, mb, chunk);
        compute_tracked(st, L.qkv, cat, mb, chunk);
        compute_tracked(st, L.rope, cat, mb, chunk);
        std::uint32_t kv = kNone;
        if (L.cp_kv_gather) kv = emit(st, L.cp_kv_gather, Stream::cp_comm, Category::cp_comm, mb, chunk, {last_compute_});
        attention_forward(st, cat, mb, chunk);
        if (kv != kNone) st.pending.push_back(kv);
        fetch_module(st, 1, mb, chunk);
        compute_tracked(st, L.out, cat, mb, chunk);
        tp_collective(st, L.attn_comm.fwd_reduce, mb, chunk, Side::after_gemm);
        tp_tail(st, L.attn_comm.fwd_reduce_tail, mb, chunk);
        compute_tracked(st, L.res_ln2, cat, mb, chunk);
        if (L.scalar_sync != 0) compute_tracked(st, L.scalar_sync, cat, mb, chunk);
        tp_collective(st, L.mlp_comm.fwd_gather, mb, chunk, Side::before_gemm);
        fetch_module(st, 2, mb, chunk);
        compute_tracked(st, L.fc1, cat, mb, chunk);
        compute_tracked(st, L.act, cat, mb, chunk);
        fetch_module(st, 3, mb, chunk);
        compute_tracked(st, L.fc2, cat, mb, chunk);
        tp_collective(st, L.mlp_comm.fwd_reduce, mb, chunk, Side::after_gemm);
        tp_tail(st, L.mlp_comm.fwd_reduce_tail, mb, chunk);
        compute_tracked(st, L.residual, cat, mb, chunk);
    }

    // Returns the index of the op that completes this layer's weight gradients.
    // `layer`: the layer's index within its model chunk (block recompute covers the first ones).
    std::uint32_t layer_backward(StageState& st, int mb, int chunk, int layer, std::uint32_t gather_dep) {
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
        compute_tracked(st, L.fc2_dgrad, cat, mb, chunk);
        compute_tracked(st, L.fc2_wgrad, cat, mb, chunk);
        compute_tracked(st, L.act_bwd, cat, mb, chunk);
        std::uint32_t regather = kNone;
        if (L.sp_input_regather)
            regather = emit(st, L.sp_input_regather, Stream::tp_comm, Category::tp_comm, mb, chunk, {last_compute_});
        fetch_module(st, 2, mb, chunk);
        compute_tracked(st, L.fc1_dgrad, cat, mb, chunk);
        if (regather != kNone) st.pending.push_back(regather);
        compute_tracked(st, L.fc1_wgrad, cat, mb, chunk);
        tp_collective(st, L.mlp_comm.bwd_reduce, mb, chunk, Side::after_gemm);
        compute_tracked(st, L.ln2_bwd, cat, mb, chunk);
        // attention block
        tp_collective(st, L.attn_comm.bwd_gather, mb, chunk, Side::before_gemm);
        fetch_module(st, 1, mb, chunk);
        compute_tracked(st, L.out_dgrad, cat, mb, chunk);
        compute_tracked(st, L.out_wgrad, cat, mb, chunk);
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
        if (L.sp_input_regather)
            regather = emit(st, L.sp_input_regather, Stream::tp_comm, Category::tp_comm, mb, chunk, {last_compute_});
        fetch_module(st, 0, mb, chunk);
        compute_tracked(st, L.qkv_dgrad, cat, mb, chunk);
        if (regather != kNone && L.sp_input_regather) st.pending.push_back(regather);
        const auto wgrad_done = compute_tracked(st, L.qkv_wgrad, cat, mb, chunk);
        tp_collective(st, L.attn_comm.bwd_reduce, mb, chunk, Side::after_gemm);
        compute_tracked(st, L.ln1_bwd, cat, mb, chunk);
        return std::max(wgrad_done, last_compute_);
    }

    [[nodiscard]] bool alternate_matmuls() const {
        return p_.recompute == Recompute::selective && p_.selective_recompute == SelectiveRecompute::alternate_matmuls;
    }
    // torchtitan's op-level selective checkpointing replays the layer's forward at the start of
    // its backward: the saved outputs (attention, wq, wv, w1, w2, the TP reductions) are reused,
    // every other op runs again: the norms, RoPE, the activation, the residual adds and the
    // even-numbered matmuls wk, wo and w3 (fc2 of a 2-matrix MLP).
    void recompute_alternate(StageState& st, int mb, int chunk) {
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

    // ---------- sharding helpers ----------
    // ZeRO-3 module-by-module fetch (fsdp_fetch: module): a layer pass fetches the weights of
    // `seg_` (0 QKV, 1 projection, 2 FC1, 3 FC2) in that order, each before its GEMM; with
    // prefetch, the next one's gather is issued as the current module starts, so it runs beside
    // it, and the first of the next layer pass beside this pass's last module.
    [[nodiscard]] bool module_fetch() const {
        return per_layer_sharding() && shard_size() > 1 && p_.fsdp_fetch == FsdpFetch::module;
    }
    void begin_segment(std::vector<int> modules) {
        seg_ = std::move(modules);
        seg_pos_ = 0;
        seg_prefetched_ = !seg_.empty() && next_first_module_ == seg_.front() ? next_first_ : kNone;
        next_first_ = kNone;
    }
    std::uint32_t emit_module_gather(StageState& st, int module, int mb, int chunk, std::uint32_t after) {
        const auto w = layer_gemm_weights(m_);
        const auto proto = collective("fsdp_ag", CollectiveOp::all_gather, shard_group(),
                                      2.0 * w[static_cast<std::size_t>(module)] / p_.tp);
        mark_list_collective(proto);
        return emit_aside(st, proto, Stream::dp_gather, Category::dp_comm, mb, chunk, gather_gates(after));
    }
    void fetch_module(StageState& st, int module, int mb, int chunk) {
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
    void prefetch_first_module(StageState& st, int module, int mb, int chunk) {
        next_first_ = kNone;
        if (!module_fetch() || !p_.fsdp_prefetch || last_module_gate_ == kNone) return;
        next_first_ = emit_module_gather(st, module, mb, chunk, last_module_gate_);
        next_first_module_ = module;
    }
    // ZeRO-3 / FSDP weights released after a layer's recompute and gathered again for its backward
    // (fsdp_reuse_distance_params): they start once the recompute is done, the backward waits for them.
    void regather_after_recompute(StageState& st, int mb, int chunk) {
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
    [[nodiscard]] std::vector<std::uint32_t> gather_gates(std::uint32_t after) const {
        std::vector<std::uint32_t> deps;
        if (after != kNone) deps.push_back(after);
        if (p_.fsdp_gather_sync && last_reduce_ != kNone) deps.push_back(last_reduce_);
        return deps;
    }
    [[nodiscard]] bool per_layer_sharding() const { return gathers_per_layer(p_); }
    // Without P2P overlap the rank waits for its send before computing on (Megatron-LM 2021-22:
    // batch_isend_irecv, wait, torch.cuda.synchronize()).
    void blocking_p2p(StageState& st) {
        if (!p_.overlap_p2p) st.blocking_sends.push_back(static_cast<std::uint32_t>(st.prog.ops.size() - 1));
    }
    // ZeRO-3 / FSDP collectives through PyTorch's list API copy one slice per shard rank.
    void mark_list_collective(ProtoId id) {
        if (p_.list_collectives) g_.protos[id].copy_slices = shard_size();
    }
    [[nodiscard]] Group shard_group() const { return p_.sharding == Sharding::hsdp ? Group::dp_shard : Group::dp_cp; }
    [[nodiscard]] int shard_size() const { return p_.sharding == Sharding::hsdp ? g_.hsdp_shard : p_.dp * p_.cp; }
    [[nodiscard]] double grad_bytes() const { return grad_bytes_per_param(plan_); }

    // Bytes the distributed optimizer gathers for a bucket: BF16 parameters, or with FP8 primary
    // weights 1 B for the layers' (GEMM) weights and 2 B for the embedding and head.
    [[nodiscard]] double gather_bytes(const Bucket& b) const {
        double bytes = 0;
        for (int u : b.units) bytes += unit_params(u) * (p_.fp8_params && u >= 0 ? 1.0 : 2.0);
        return bytes;
    }

    // Parameters of one "unit" on this TP rank: a layer, the embedding, or the LM head.
    [[nodiscard]] double unit_params(int unit) const {
        if (unit == kEmbedUnit) return params_.embedding / p_.tp;
        if (unit == kHeadUnit) return (m_.tied_embeddings ? params_.embedding : params_.lm_head) / p_.tp;
        return params_.per_layer / p_.tp;
    }

    StageProgram build_stage(int stage) {
        StageState st;
        const int pp = p_.pp, vp = p_.vp, mbs = g_.microbatches;
        const int dp_group = p_.dp * p_.cp;
        const bool first_stage = stage == 0;
        const bool last_stage = stage == pp - 1;
        const bool has_head = last_stage;
        const bool has_embed = first_stage;
        const auto schedule = pipeline_schedule(stage, pp, vp, mbs);
        deferred_.clear();
        last_compute_ = kNone;
        prev_compute_ = kNone;
        last_reduce_ = kNone;
        seg_.clear();
        seg_pos_ = 0;
        seg_prefetched_ = next_first_ = last_module_gate_ = kNone;

        // Units per chunk in backward order: [head], layers last..first, [embedding].
        std::vector<std::vector<int>> chunk_units(static_cast<std::size_t>(vp));
        for (int c = 0; c < vp; ++c) {
            const int vs = c * pp + stage;
            auto& u = chunk_units[static_cast<std::size_t>(c)];
            if (vs == pp * vp - 1 && has_head) u.push_back(kHeadUnit);
            for (int l = chunk_layers(m_.layers, pp, vp, stage, c) - 1; l >= 0; --l) u.push_back(l);
            if (vs == 0 && has_embed) u.push_back(kEmbedUnit);
        }
        double local_params = 0, layer_params = 0; // layer_params: the FP8 GEMMs' weights
        for (const auto& u : chunk_units)
            for (int unit : u) {
                local_params += unit_params(unit);
                if (unit >= 0) layer_params += unit_params(unit);
            }

        // DP buckets (Megatron DDP): per chunk, filled in backward order.
        std::vector<Bucket> buckets;
        std::vector<std::vector<int>> unit_bucket(static_cast<std::size_t>(vp));  // indexed by unit slot
        if (!per_layer_sharding() && dp_group > 1) {
            for (int c = 0; c < vp; ++c) {
                Bucket cur;
                cur.chunk = c;
                for (int unit : chunk_units[static_cast<std::size_t>(c)]) {
                    cur.params += unit_params(unit);
                    cur.units.push_back(unit);
                    if (cur.params >= p_.dp_bucket_params) {
                        buckets.push_back(cur);
                        cur = Bucket{};
                        cur.chunk = c;
                    }
                }
                if (!cur.units.empty()) buckets.push_back(cur);
            }
        }
        auto bucket_of = [&](int chunk, int unit) -> int {
            for (std::size_t b = 0; b < buckets.size(); ++b)
                if (buckets[b].chunk == chunk &&
                    std::find(buckets[b].units.begin(), buckets[b].units.end(), unit) != buckets[b].units.end())
                    return static_cast<int>(b);
            return -1;
        };

        const bool sharded_opt = p_.sharding == Sharding::dist_opt || p_.sharding == Sharding::zero1 ||
                                 p_.sharding == Sharding::zero2 ||
                                 (p_.sharding != Sharding::none && !per_layer_sharding());
        // Parameter all-gathers of the distributed optimizer (for this step, issued at its start).
        std::vector<std::uint32_t> bucket_gather(buckets.size(), kNone);
        if (sharded_opt && dp_group > 1) {
            // Forward order: chunks ascending, buckets within a chunk reversed.
            for (int c = 0; c < vp; ++c) {
                for (int b = static_cast<int>(buckets.size()) - 1; b >= 0; --b) {
                    if (buckets[static_cast<std::size_t>(b)].chunk != c) continue;
                    const auto proto = collective("param_ag", CollectiveOp::all_gather, Group::dp_cp,
                                                  gather_bytes(buckets[static_cast<std::size_t>(b)]));
                    bucket_gather[static_cast<std::size_t>(b)] =
                        emit(st, proto, Stream::dp_gather, Category::dp_comm, 0, c);
                }
            }
            if (!p_.overlap_param_gather) {
                for (auto gop : bucket_gather) st.pending.push_back(gop);
            }
        }
        if (plan_.precision == Precision::fp8) {
            // FP8 weight cast + transpose once per step (TE caches it across micro-batches) of the
            // layers' GEMM weights (the embedding and the head stay BF16): read the BF16 weight,
            // write the FP8 weight and its transpose; with FP8 primary weights only the transpose
            // (read 1 B, write 1 B).
            compute(st, memory("fp8_weight_cast", layer_params * (p_.fp8_params ? 1.0 + 1.0 : 2.0 + 2.0)),
                    Category::forward, 0, 0);
        }

        // FSDP / ZeRO-3 / HSDP per-unit gathers and reduce-scatters.
        const double shard = shard_size();
        // `prefetched`: the op after which a prefetched gather may start (the unit two back);
        // `current`: the op after which any gather may start (the previous unit). Without
        // prefetch both are the previous unit.
        // `first_module`: with fsdp_fetch: module, the weight a layer unit's pass fetches first.
        auto unit_gather = [&](int unit, int mb, int chunk, std::uint32_t prefetched, std::uint32_t current,
                               int first_module) -> std::uint32_t {
            if (!per_layer_sharding() || shard <= 1) return kNone;
            if (unit >= 0 && module_fetch()) {
                prefetch_first_module(st, first_module, mb, chunk);
                return kNone;
            }
            // A layer's parameters arrive in fsdp_gathers_per_layer collectives (each paying the
            // ring latency); the embedding and the head are one tensor each.
            const int pieces = unit >= 0 ? std::max(1, p_.fsdp_gathers_per_layer) : 1;
            const double piece_params = unit_params(unit) / pieces;
            const auto proto = collective("fsdp_ag", CollectiveOp::all_gather, shard_group(), 2.0 * piece_params);
            mark_list_collective(proto);
            // The pieces run in order on the gather stream. The prefetch budget covers the first
            // ones; the rest also wait for the unit in use. As DeepSpeed's prefetcher, a piece is
            // taken while the budget is not yet reached, so at least one.
            std::uint32_t last = kNone;
            for (int i = 0; i < pieces; ++i) {
                const bool ahead = p_.fsdp_prefetch && (p_.fsdp_prefetch_bucket_params <= 0 ||
                                                        i * piece_params < p_.fsdp_prefetch_bucket_params);
                last = emit(st, proto, Stream::dp_gather, Category::dp_comm, mb, chunk,
                            gather_gates(ahead ? prefetched : current));
            }
            return last;
        };

        std::vector<std::uint32_t> dp_reduce_ops;
        std::vector<int> remaining_units_in_bucket(buckets.size());
        for (std::size_t b = 0; b < buckets.size(); ++b)
            remaining_units_in_bucket[b] = static_cast<int>(buckets[b].units.size());
        // The last micro-batch's backward of each chunk triggers the grad sync (or every
        // micro-batch with ZeRO-2).
        std::vector<int> bwd_count(static_cast<std::size_t>(vp), 0);

        // A stage boundary's activation (and gradient): split over the TP ranks by sequence
        // parallelism or by the scatter/gather optimisation, else sent whole by every TP rank.
        const double act_bytes = kActBytes * static_cast<double>(tokens_) * m_.hidden;
        const bool scatter_gather = p_.tp > 1 && !p_.sequence_parallel && p_.pp_scatter_gather;
        const double act_bytes_p2p = p_.sequence_parallel || scatter_gather ? act_bytes / p_.tp : act_bytes;
        const ProtoId send_act = p2p("send_act", OpKind::send, act_bytes_p2p);
        const ProtoId recv_act = p2p("recv_act", OpKind::recv, act_bytes_p2p);
        const ProtoId send_grad = p2p("send_grad", OpKind::send, act_bytes_p2p);
        const ProtoId recv_grad = p2p("recv_grad", OpKind::recv, act_bytes_p2p);
        // Megatron-LM 2021-22 synchronizes the device after each batched transfer: the host waits
        // for the receive (the send it was batched with goes first in program order).
        if (p_.host_sync_p2p) g_.protos[recv_act].host_sync = g_.protos[recv_grad].host_sync = true;
        // The receiver reassembles a scattered tensor with an all-gather over the TP group
        // (gather_split_1d_tensor) before the stage computes with it.
        const ProtoId p2p_gather =
            scatter_gather ? collective("pp_gather", CollectiveOp::all_gather, Group::tp, act_bytes) : 0;
        const int nvs = pp * vp;
        auto tag = [&](bool fwd, int chunk_dst, int mb) {
            return static_cast<std::uint32_t>(((fwd ? 0 : 1) * vp + chunk_dst) * mbs + mb);
        };

        for (const auto& it : schedule) {
            const int vs = it.chunk * pp + stage;
            const int mb = it.microbatch;
            const int c = it.chunk;
            const auto& units = chunk_units[static_cast<std::size_t>(c)];
            if (it.forward) {
                if (vs > 0) {
                    const int src = (vs - 1) % pp;
                    Op& r = st.prog.ops[emit(st, recv_act, Stream::pp_recv_fwd, Category::pp_comm, mb, c)];
                    r.peer_stage = src;
                    r.tag = tag(true, c, mb);
                    st.pending.push_back(static_cast<std::uint32_t>(st.prog.ops.size() - 1));
                    if (p2p_gather != 0) last_compute_ = compute(st, p2p_gather, Category::pp_comm, mb, c);
                }
                // forward order = reverse of backward-order units
                std::uint32_t prev2_done = kNone, prev_done = kNone;
                for (auto ui = units.rbegin(); ui != units.rend(); ++ui) {
                    const int unit = *ui;
                    std::uint32_t gdep = kNone;
                    if (mb == 0 && sharded_opt && dp_group > 1 && p_.overlap_param_gather) {
                        const int b = bucket_of(c, unit);
                        if (b >= 0) gdep = bucket_gather[static_cast<std::size_t>(b)];
                    }
                    if (per_layer_sharding()) {
                        // Prefetch: the gather for this unit may start once the unit two back has
                        // finished (one gathered unit ahead); without prefetch once the previous one has.
                        gdep = unit_gather(unit, mb, c, prev2_done, prev_done, 0);
                    }
                    if (unit == kEmbedUnit) {
                        if (gdep != kNone) st.pending.push_back(gdep);
                        compute_tracked(st, hp_.embed_fwd, Category::forward, mb, c);
                        tp_collective(st, hp_.embed_comm_fwd, mb, c, Side::after_gemm);
                    } else if (unit == kHeadUnit) {
                        if (gdep != kNone) st.pending.push_back(gdep);
                        compute_tracked(st, hp_.final_ln, Category::forward, mb, c);
                        tp_collective(st, hp_.head_gather, mb, c, Side::before_gemm);
                        compute_tracked(st, hp_.head, Category::forward, mb, c);
                        compute_tracked(st, hp_.loss, Category::forward, mb, c);
                        tp_collective(st, hp_.loss_comm, mb, c, Side::after_gemm);
                    } else {
                        layer_forward(st, mb, c, Category::forward, gdep);
                    }
                    flush_deferred(st);
                    prev2_done = prev_done;
                    prev_done = last_compute_;
                }
                if (vs < nvs - 1) {
                    const int dst = (vs + 1) % pp;
                    const int dst_chunk = (vs + 1) / pp;
                    Op& s = st.prog.ops[emit(st, send_act, Stream::pp_send_fwd, Category::pp_comm, mb, c, {last_compute_})];
                    s.peer_stage = dst;
                    s.tag = tag(true, dst_chunk, mb);
                    blocking_p2p(st);
                }
            } else {
                if (vs < nvs - 1) {
                    const int src = (vs + 1) % pp;
                    Op& r = st.prog.ops[emit(st, recv_grad, Stream::pp_recv_bwd, Category::pp_comm, mb, c)];
                    r.peer_stage = src;
                    r.tag = tag(false, c, mb);
                    st.pending.push_back(static_cast<std::uint32_t>(st.prog.ops.size() - 1));
                    if (p2p_gather != 0) last_compute_ = compute(st, p2p_gather, Category::pp_comm, mb, c);
                }
                ++bwd_count[static_cast<std::size_t>(c)];
                current_bwd_count_ = bwd_count[static_cast<std::size_t>(c)];
                std::uint32_t prev2_done = kNone, prev_done = kNone;
                for (int unit : units) {
                    std::uint32_t gdep = kNone;
                    if (per_layer_sharding())
                        gdep = unit_gather(unit, mb, c, prev2_done, prev_done, unit < full_recompute_layers_ ? 0 : 3);
                    std::uint32_t done = kNone;
                    if (unit == kHeadUnit) {
                        if (gdep != kNone) st.pending.push_back(gdep);
                        compute_tracked(st, hp_.loss_bwd, Category::backward, mb, c);
                        compute_tracked(st, hp_.head_dgrad, Category::backward, mb, c);
                        done = compute_tracked(st, hp_.head_wgrad, Category::backward, mb, c);
                        tp_collective(st, hp_.head_reduce, mb, c, Side::after_gemm);
                    } else if (unit == kEmbedUnit) {
                        if (gdep != kNone) st.pending.push_back(gdep);
                        tp_collective(st, hp_.embed_comm_bwd, mb, c, Side::before_gemm);
                        done = compute_tracked(st, hp_.embed_bwd, Category::backward, mb, c);
                    } else {
                        done = layer_backward(st, mb, c, unit, gdep);
                    }
                    flush_deferred(st);
                    done = std::max(done, last_compute_);
                    grads_done(st, unit, mb, c, done, buckets, remaining_units_in_bucket, dp_reduce_ops, bucket_of);
                    prev2_done = prev_done;
                    prev_done = last_compute_;
                }
                if (vs > 0) {
                    const int dst = (vs - 1) % pp;
                    const int dst_chunk = (vs - 1) / pp;
                    Op& s = st.prog.ops[emit(st, send_grad, Stream::pp_send_bwd, Category::pp_comm, mb, c, {last_compute_})];
                    s.peer_stage = dst;
                    s.tag = tag(false, dst_chunk, mb);
                    blocking_p2p(st);
                }
            }
        }

        // Non-overlapped gradient sync: every bucket after the last backward op.
        for (const auto& d : deferred_grad_protos_) {
            dp_reduce_ops.push_back(emit(st, d.proto, Stream::dp_reduce, Category::dp_comm, d.mb, d.chunk, {last_compute_}));
        }
        deferred_grad_protos_.clear();

        // Optimizer step on this rank's shard. Fused Adam: read grad, master, m, v (4 B each),
        // write master, m, v and the BF16 parameter (14 B). PyTorch's foreach AdamW
        // (torch/optim/adamw.py, _multi_tensor_adamw) makes a pass per step of the update: weight
        // decay (8), lerp of m (12), scale of v (8), addcmul into v (12), sqrt (8), bias-correction
        // divide (8), add eps (8), addcdiv into the parameter (16) = 80 B; plus the gradient-norm
        // pass over the shard (4 B) and zeroing the local gradient buffer (4 B per local parameter).
        // With BF16 state (parallel.optimizer_state) master, m and v move 2 B each: fused, read
        // grad 4 + 3 x 2, write 3 x 2 + the BF16 parameter 2; the foreach passes move half.
        const bool bf16_state = p_.optimizer_state == OptimizerState::bf16;
        const double update_bytes =
            p_.fused_optimizer ? (bf16_state ? 10.0 + 8.0 : 16.0 + 14.0) : (bf16_state ? 40.0 : 80.0);
        const bool shards_optimizer = p_.sharding != Sharding::none;
        const double opt_shard = shards_optimizer ? (per_layer_sharding() ? shard : dp_group) : 1.0;
        const double shard_params = local_params / opt_shard;
        const double grad_buffer = per_layer_sharding() ? shard_params : local_params;
        for (auto d : dp_reduce_ops) st.pending.push_back(d);
        // The gradient norm for clipping (4 B per gradient; multi_tensor_l2norm and the norm's
        // all-reduce), which every Megatron / DeepSpeed / FSDP trainer reads back on the host
        // (clip_grad_norm: total_norm.item(); FP16 adds the overflow check found_inf.item()): the
        // host waits for the whole backward before it issues the update.
        const ProtoId norm = memory("grad_norm", shard_params * 4.0);
        g_.protos[norm].launches = 2;
        g_.protos[norm].host_sync = true;
        compute(st, norm, Category::optimizer, 0, 0);
        const ProtoId adam = memory("optimizer_adam", shard_params * update_bytes + grad_buffer * grad_bytes());
        // Multi-tensor launches: fused Adam walks the tensor lists in chunks (Apex multi_tensor_apply,
        // ~110 tensors per launch: a few launches plus the FP16 / BF16 copy-back); foreach AdamW makes
        // a pass per step of the update over every list (12 foreach ops, a launch per chunk of each).
        g_.protos[adam].launches = p_.fused_optimizer ? 10 : 40;
        compute(st, adam, Category::optimizer, 0, 0);
        return std::move(st.prog);
    }

    struct DeferredGrad {
        ProtoId proto;
        int mb;
        int chunk;
    };

    template <class BucketOf>
    void grads_done(StageState& st, int unit, int mb, int chunk, std::uint32_t done_op, const std::vector<Bucket>& buckets,
                    std::vector<int>& remaining, std::vector<std::uint32_t>& dp_reduce_ops, BucketOf&& bucket_of) {
        const double shard = shard_size();
        const bool last_mb = current_bwd_count_ == g_.microbatches;
        if (per_layer_sharding()) {
            if (shard > 1) {
                // A layer's gradients in fsdp_reduce_scatters_per_layer collectives, in order on the
                // reduce stream; the embedding and the head are one tensor each.
                const int pieces = unit >= 0 ? std::max(1, p_.fsdp_reduce_scatters_per_layer) : 1;
                const auto rs = collective("fsdp_rs", CollectiveOp::reduce_scatter, shard_group(),
                                           grad_bytes() * unit_params(unit) / pieces);
                mark_list_collective(rs);
                for (int i = 0; i < pieces; ++i)
                    dp_reduce_ops.push_back(emit(st, rs, Stream::dp_reduce, Category::dp_comm, mb, chunk, {done_op}));
                last_reduce_ = dp_reduce_ops.back();
            }
            const int replicas = p_.dp * p_.cp / g_.hsdp_shard;
            if (p_.sharding == Sharding::hsdp && replicas > 1 && last_mb) {
                const auto ar = collective("hsdp_replica_ar", CollectiveOp::all_reduce, Group::dp_replica,
                                           grad_bytes() * unit_params(unit) / shard);
                const std::uint32_t after = shard > 1 ? dp_reduce_ops.back() : done_op;
                dp_reduce_ops.push_back(emit(st, ar, Stream::dp_reduce, Category::dp_comm, mb, chunk, {after}));
            }
            return;
        }
        const int b = bucket_of(chunk, unit);
        if (b < 0) return;
        const bool sync_now = p_.sharding == Sharding::zero2 || last_mb;
        if (!sync_now) return;
        auto& left = remaining[static_cast<std::size_t>(b)];
        if (--left > 0) return;
        left = static_cast<int>(buckets[static_cast<std::size_t>(b)].units.size());
        const bool all_reduce = p_.sharding == Sharding::none;
        const double bytes = grad_bytes() * buckets[static_cast<std::size_t>(b)].params;
        const auto proto = collective(all_reduce ? "grad_ar" : "grad_rs",
                                      all_reduce ? CollectiveOp::all_reduce : CollectiveOp::reduce_scatter,
                                      Group::dp_cp, bytes);
        if (p_.overlap_grad_reduce) {
            dp_reduce_ops.push_back(emit(st, proto, Stream::dp_reduce, Category::dp_comm, mb, chunk, {done_op}));
        } else {
            deferred_grad_protos_.push_back({proto, mb, chunk});
        }
    }

    void flush_deferred(StageState& st) {
        for (auto d : deferred_) st.pending.push_back(d);
        deferred_.clear();
    }


    static constexpr std::uint32_t kNone = 0xffffffffu;
    static constexpr int kEmbedUnit = -1;
    static constexpr int kHeadUnit = -2;

    const Plan& plan_;
    const ModelArch& m_;
    const Parallel& p_;
    OpGraph g_;
    std::int64_t tokens_ = 0;
    std::int64_t sp_tokens_ = 0;
    int full_recompute_layers_ = 0;
    bool fused_softmax_ = true;  // unfused attention: Megatron's fused softmax kernel applies
    std::uint32_t last_reduce_ = kNone; // this stage's latest ZeRO-3 / FSDP gradient reduce-scatter
    // fsdp_fetch: module state (module_fetch() and the functions after it).
    std::vector<int> seg_;
    std::size_t seg_pos_ = 0;
    std::uint32_t seg_prefetched_ = kNone;
    std::uint32_t next_first_ = kNone;
    int next_first_module_ = -1;
    std::uint32_t last_module_gate_ = kNone;
    ParamCounts params_;
    LayerProtos lp_{};
    HeadProtos hp_{};
    std::vector<std::uint32_t> deferred_;
    std::uint32_t last_compute_ = kNone;
    std::uint32_t prev_compute_ = kNone;
    int current_bwd_count_ = 0;
    std::vector<DeferredGrad> deferred_grad_protos_;
    std::map<std::tuple<std::string, CollectiveOp, Group, double>, ProtoId> collective_cache_;
};

} // namespace

bool unfused_softmax_fuses(std::int64_t micro_batch, std::int64_t heads_per_rank, std::int64_t sq, std::int64_t sk) {
    return sk > 16 && sk <= 2048 && sq % 4 == 0 && (micro_batch * heads_per_rank) % 4 == 0;
}

LossBytes loss_bytes_per_logit(CrossEntropy kind) {
    switch (kind) {
    case CrossEntropy::pytorch:
        // F.cross_entropy on FP32 logits: .float() (read 2, write 4), log-softmax (the row read
        // for its max, for its sum of exponentials and to write the output: 12 + 4) = 22 B;
        // backward: the loss's dense gradient (write 4), the log-softmax backward (read the
        // gradient and the output, write 4 + 4 + 4) and the cast back (read 4, write 2) = 22 B.
        // Held at the backward's peak: BF16 logits, the FP32 log-softmax kept for backward, the
        // loss's dense FP32 gradient and the log-softmax input gradient (2 + 4 + 4 + 4 B).
        return {22.0, 22.0, 14.0};
    case CrossEntropy::fused:
        // A fused kernel on the BF16 logits (flash-attn's CrossEntropyLoss, flash_attn/ops/triton/
        // cross_entropy.py; apex xentropy before it): forward reads each logit once for the
        // log-sum-exp and the loss (2 B), backward reads it and writes its gradient (4 B). Held:
        // the BF16 logits and, in backward, their BF16 gradient (2 + 2 B).
        return {2.0, 4.0, 4.0};
    case CrossEntropy::megatron:
        break;
    }
    // Megatron's vocab-parallel cross-entropy (megatron/core/tensor_parallel/cross_entropy.py),
    // element-wise passes: .float() (read 2, write 4), max (read 4), subtract max in place (8),
    // exp in place (8), sum (4), divide into the softmax kept for backward (8) = 38 B; backward:
    // scale the softmax by the incoming gradient in place (8) and cast back to BF16 (read 4,
    // write 2) = 14 B. Held: the BF16 logits and the one FP32 softmax (2 + 4 B).
    return {38.0, 14.0, 6.0};
}

OpGraph build_workload(const Plan& plan) {
    // Proto id 0 is reserved as "none" for optional collectives.
    Builder b(plan);
    return b.build();
}

std::string to_string(OpKind v) {
    static constexpr std::array<const char*, 7> k{"gemm", "attention_fwd", "attention_bwd", "memory", "collective",
                                                 "send", "recv"};
    return k[static_cast<std::size_t>(v)];
}
std::string to_string(Stream v) {
    static constexpr std::array<const char*, kNumStreams> k{
        "compute", "tp_comm", "cp_comm", "dp_gather", "dp_reduce", "pp_send_fwd", "pp_recv_fwd", "pp_send_bwd",
        "pp_recv_bwd"};
    return k[static_cast<std::size_t>(v)];
}
std::string to_string(Category v) {
    static constexpr std::array<const char*, kNumCategories> k{"forward", "backward", "recompute", "optimizer",
                                                              "tp_comm", "cp_comm", "dp_comm", "pp_comm"};
    return k[static_cast<std::size_t>(v)];
}
std::string to_string(Group v) {
    static constexpr std::array<const char*, kNumGroups> k{"tp", "cp", "dp_cp", "dp_shard", "dp_replica", "pp"};
    return k[static_cast<std::size_t>(v)];
}
std::string to_string(CollectiveOp v) {
    static constexpr std::array<const char*, 5> k{"all_reduce", "all_gather", "reduce_scatter", "all_to_all",
                                                 "send_recv"};
    return k[static_cast<std::size_t>(v)];
}

} // namespace trainsim::model
