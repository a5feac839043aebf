// The op-graph builder (Plan -> per-stage op programs), one class in parts a reader can name:
//   layer_ops.cpp      the ops of a layer, the embedding and the head: GEMM shapes, attention,
//                      element-wise bytes, FP8 casts, the kernels each stack launches per op;
//   layer_program.cpp  one layer's forward, recompute and backward as ops on the stage's streams,
//                      with its TP collectives;
//   sharding.cpp       data-parallel and sharding traffic: ZeRO / FSDP gathers, gradient
//                      reductions in buckets, list-API collectives;
//   stage_program.cpp  a stage's program along its pipeline schedule (1F1B, interleaved, ZB-H1,
//                      ZB-V, DualPipeV), its pipeline transfers, the optimizer.
// Shapes follow Megatron-Core / Transformer Engine (docs/model.md): tokens per rank
// T = micro_batch * seq_len / cp; with sequence parallelism norms, residuals and dropout-free
// elementwise ops work on T / tp tokens; column-parallel GEMMs see all T tokens.
// Internal to model/src/workload.
#pragma once

#include "trainsim/model/accounting/finetune.hpp"
#include "trainsim/model/accounting/flops.hpp"
#include "trainsim/model/accounting/layout.hpp"
#include "trainsim/model/accounting/memory_model.hpp"
#include "trainsim/model/workload/workload.hpp"
#include <algorithm>
#include <array>
#include <cmath>
#include <map>
#include <span>
#include <stdexcept>
#include <tuple>
#include <cstdint>
#include <initializer_list>
#include <string>
#include <vector>

namespace trainsim::model::workload_detail {

constexpr double kActBytes = 2.0;  // BF16 activations and activation gradients
// Transformer Engine userbuffers: chunks of the pipelined GEMM + reduce-scatter overlap
// (num_splits = 4 for method "pipeline", transformer_engine/pytorch/module/base.py initialize_ub).
constexpr int kTpOverlapPipelineSplits = 4;

// Bytes per element of a GEMM operand in the plan's precision (FP8 GEMMs read 1-byte operands).
inline double operand_bytes(Precision p) { return p == Precision::fp8 ? 1.0 : 2.0; }

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
ElementwiseBytes eager_bytes(FfnType ffn);

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
LayerLaunches layer_launches(HostDispatch d, CrossEntropy ce);

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
    // LoRA / QLoRA, per GEMM group (QKV, attention output, FC1, FC2; docs/model.md "Fine-tuning"):
    // QLoRA's NF4-to-BF16 dequantisation before the forward GEMM and its input-gradient GEMM
    // (0: none), the adapters' forward GEMMs (x A, then (x A) B) and their backward GEMMs (B's input
    // and weight gradients, A's input and weight gradients). Empty: no adapter on the group.
    std::array<ProtoId, 4> dequant{};
    std::array<std::vector<ProtoId>, 4> lora_fwd, lora_bwd;
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
    explicit Builder(const Plan& plan, WorkloadOrder order = WorkloadOrder::schedule);

    OpGraph build();

private:
    // ---------- protos ----------
    ProtoId add_proto(OpProto p);
    ProtoId gemm(std::string name, std::int64_t m, std::int64_t n, std::int64_t k, Precision prec);
    ProtoId batched_gemm(std::string name, std::int64_t batch, std::int64_t m, std::int64_t n, std::int64_t k);
    ProtoId memory(std::string name, double bytes);
    ProtoId collective(std::string name, CollectiveOp op, Group group, double bytes);
    ProtoId make_collective(std::string name, CollectiveOp op, Group group, double bytes);
    ProtoId p2p(std::string name, OpKind kind, double bytes);
    ProtoId attention(std::string name, bool fwd);

    SublayerComm sublayer_comm(const std::string& name);

    void make_layer_protos();
    // LoRA / QLoRA: the adapters' GEMMs and QLoRA's dequantisation kernels (LayerProtos).
    void make_lora_protos();

    // Kernels launched per op on the plan's dispatch path (layer_launches).
    void assign_launches();

    void make_head_protos();

    // ---------- per-stage program ----------
    struct StageState {
        StageProgram prog;
        std::vector<std::uint32_t> pending;  // deps for the next op added
        std::vector<std::uint32_t> blocking_sends;  // deps for the next compute-stream op
    };

    std::uint32_t emit(StageState& st, ProtoId proto, Stream stream, Category cat, int mb, int chunk,
                       std::initializer_list<std::uint32_t> extra = {});
    std::uint32_t emit(StageState& st, ProtoId proto, Stream stream, Category cat, int mb, int chunk,
                       std::span<const std::uint32_t> extra);
    // A compute-stream op; TP collectives go here too unless TP comm overlap is on.
    std::uint32_t compute(StageState& st, ProtoId proto, Category cat, int mb, int chunk);
    enum class Side { before_gemm, after_gemm };
    // A TP collective next to a GEMM. Without TP comm overlap it blocks the compute stream
    // (Megatron's default). With overlap (TE userbuffers) it runs on the TP stream alongside
    // that GEMM, and the op after the GEMM waits for both.
    void tp_collective(StageState& st, ProtoId proto, int mb, int chunk, Side side);
    // The part of an overlapped TP collective that can only start once its GEMM is done; the
    // next op waits for it.
    void tp_tail(StageState& st, ProtoId proto, int mb, int chunk);
    // An op beside the compute stream, after `deps` only: the ops waiting to be attached to the
    // next kernel stay pending for it.
    std::uint32_t emit_aside(StageState& st, ProtoId proto, Stream stream, Category cat, int mb, int chunk,
                             std::span<const std::uint32_t> deps);
    std::uint32_t emit_after(StageState& st, ProtoId proto, Stream stream, Category cat, int mb, int chunk,
                             std::uint32_t after);

    std::uint32_t compute_tracked(StageState& st, ProtoId proto, Category cat, int mb, int chunk);
    // A host wait on the compute stream (a device synchronize, a blocking copy): it follows the
    // kernels queued so far; the transfers the next kernel waits for stay attached to it (the
    // program order of sends and receives is not the host's, so waiting for them here could
    // wait for a peer that waits for us).
    std::uint32_t host_wait(StageState& st, ProtoId proto, Category cat, int mb, int chunk);

    void attention_forward(StageState& st, Category cat, int mb, int chunk);

    // `own_segment`: the forward pass of the layer, which fetches its 4 weights module by module
    // (fsdp_fetch: module); false for a recompute, whose fetches layer_backward lays out.
    void layer_forward(StageState& st, int mb, int chunk, Category cat, std::uint32_t gather_dep,
                       bool own_segment = true);

    // Returns the index of the op that completes this layer's weight gradients.
    // `layer`: the layer's index within its model chunk (block recompute covers the first ones).
    std::uint32_t layer_backward(StageState& st, int mb, int chunk, int layer, std::uint32_t gather_dep,
                                 bool split = false);
    std::uint32_t layer_weight_grad(StageState& st, int mb, int chunk);

    // Before a frozen GEMM of group `g` (forward or input gradient): its dequantisation; after it,
    // the adapters' ops of that direction.
    void dequantise(StageState& st, int g, Category cat, int mb, int chunk);
    void adapters(StageState& st, int g, bool forward, Category cat, int mb, int chunk);
    [[nodiscard]] bool alternate_matmuls() const;
    // torchtitan's op-level selective checkpointing replays the layer's forward at the start of
    // its backward: the saved outputs (attention, wq, wv, w1, w2, the TP reductions) are reused,
    // every other op runs again: the norms, RoPE, the activation, the residual adds and the
    // even-numbered matmuls wk, wo and w3 (fc2 of a 2-matrix MLP).
    void recompute_alternate(StageState& st, int mb, int chunk);

    // ---------- sharding helpers ----------
    // ZeRO-3 module-by-module fetch (fsdp_fetch: module): a layer pass fetches the weights of
    // `seg_` (0 QKV, 1 projection, 2 FC1, 3 FC2) in that order, each before its GEMM; with
    // prefetch, the next one's gather is issued as the current module starts, so it runs beside
    // it, and the first of the next layer pass beside this pass's last module.
    [[nodiscard]] bool module_fetch() const;
    void begin_segment(std::vector<int> modules);
    std::uint32_t emit_module_gather(StageState& st, int module, int mb, int chunk, std::uint32_t after);
    void fetch_module(StageState& st, int module, int mb, int chunk);
    // Before a layer pass: with prefetch, its first weight's gather beside the previous pass's
    // last module.
    void prefetch_first_module(StageState& st, int module, int mb, int chunk);
    // ZeRO-3 / FSDP weights released after a layer's recompute and gathered again for its backward
    // (fsdp_reuse_distance_params): they start once the recompute is done, the backward waits for them.
    void regather_after_recompute(StageState& st, int mb, int chunk);
    // What a ZeRO-3 / FSDP parameter gather waits for: `after` (kNone: nothing), and with
    // fsdp_gather_sync every gradient reduce-scatter issued before it too (a device-wide
    // torch.cuda.synchronize() before the gather).
    [[nodiscard]] std::vector<std::uint32_t> gather_gates(std::uint32_t after) const;
    [[nodiscard]] bool per_layer_sharding() const;
    // Without P2P overlap the rank waits for its send before computing on (Megatron-LM 2021-22:
    // batch_isend_irecv, wait, torch.cuda.synchronize()).
    void blocking_p2p(StageState& st);
    // ZeRO-3 / FSDP collectives through PyTorch's list API copy one slice per shard rank.
    void mark_list_collective(ProtoId id);
    [[nodiscard]] Group shard_group() const;
    [[nodiscard]] int shard_size() const;
    [[nodiscard]] double grad_bytes() const;

    // Bytes the distributed optimizer gathers for a bucket: BF16 parameters, or with FP8 primary
    // weights 1 B for the layers' (GEMM) weights and 2 B for the embedding and head.
    [[nodiscard]] double gather_bytes(const Bucket& b) const;

    // Parameters of one "unit" on this TP rank: a layer, the embedding, or the LM head.
    [[nodiscard]] double unit_params(int unit) const;
    // Parameter tensors of a unit as Megatron-LM 2021's GPT code builds them: a layer's 12 (two
    // LayerNorms, QKV, projection, FC1, FC2: weight and bias each), the embedding's 2 (words,
    // positions), the head's final LayerNorm 2 and its output weight unless that is the
    // embedding's own tensor on this stage (tied, no pipeline).
    [[nodiscard]] int unit_tensors(int unit, bool stage_has_embedding) const;

    // The pass of its own that accumulating one micro-batch's weight gradients takes
    // (Parallel::grad_accumulation, docs/model.md "Gradient accumulation"): bytes moved per
    // parameter, whether the first micro-batch of the step pays it too, and whether it runs once
    // after the micro-batch's backward as a loop over the stage's tensors (DeepSpeed's
    // BF16_Optimizer) rather than after each unit's gradients. No pass: bytes_per_param 0.
    struct AccumulationPass {
        double bytes_per_param = 0;
        bool first_microbatch = false;
        bool after_backward = false;
    };
    [[nodiscard]] AccumulationPass accumulation_pass() const;

    StageProgram build_stage(int stage);

    struct DeferredGrad {
        ProtoId proto;
        int mb;
        int chunk;
    };

    template <class BucketOf>
    void grads_done(StageState& st, int unit, int mb, int chunk, std::uint32_t done_op, const std::vector<Bucket>& buckets,
                    std::vector<int>& remaining, std::vector<std::uint32_t>& dp_reduce_ops, BucketOf&& bucket_of);

    void flush_deferred(StageState& st);


    static constexpr std::uint32_t kNone = 0xffffffffu;
    static constexpr int kEmbedUnit = -1;
    static constexpr int kHeadUnit = -2;

    const Plan& plan_;
    WorkloadOrder order_ = WorkloadOrder::schedule;
    const ModelArch& m_;
    const Parallel& p_;
    // LoRA / QLoRA: the base weights are frozen (no weight-gradient GEMMs, no embedding backward).
    bool frozen_ = false;
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
    PipelinePass current_pass_ = PipelinePass::forward;  // the schedule item being emitted
    std::vector<DeferredGrad> deferred_grad_protos_;
    std::map<std::tuple<std::string, CollectiveOp, Group, double>, ProtoId> collective_cache_;
};

} // namespace trainsim::model::workload_detail
