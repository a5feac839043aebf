// The workload is data: a pure, deterministic function turns a Plan into per-pipeline-stage
// programs of ops (docs/model.md). The simulator executes programs it did not build.
//
// Every rank of a pipeline stage runs the same program (TP, CP and DP peers are symmetric); the
// executor instantiates a stage program once per simulated rank. Ops on one stream run in
// program order; `deps` add cross-stream edges inside a program. Cross-rank coupling happens
// only through collectives (matched by group and order) and send/recv pairs (matched by tag).
#pragma once

#include "trainsim/model/accounting/pipeline_schedule.hpp"
#include "trainsim/model/core/scenario.hpp"
#include "trainsim/model/core/units.hpp"

#include <cstdint>
#include <string>
#include <vector>

namespace trainsim::model {

enum class OpKind : std::uint8_t { gemm, attention_fwd, attention_bwd, memory, collective, send, recv };

// Streams of one rank. The compute stream also carries TP collectives that block the math
// (Megatron without TP comm overlap); others run concurrently with compute.
// Pipeline sends and receives have one stream per direction so that activations and gradients
// do not queue behind each other (Megatron batches them per direction).
enum class Stream : std::uint8_t {
    compute, tp_comm, cp_comm, dp_gather, dp_reduce, pp_send_fwd, pp_recv_fwd, pp_send_bwd, pp_recv_bwd
};
inline constexpr int kNumStreams = 9;

enum class CollectiveOp : std::uint8_t { all_reduce, all_gather, reduce_scatter, all_to_all, send_recv };

// Communication groups of the Megatron rank order (tp innermost, then cp, dp, pp).
// dp_cp: data-parallel ranks times context-parallel ranks (gradients are reduced over both).
// dp_shard / dp_replica: HSDP's intra-node shard group and its cross-node replica group.
enum class Group : std::uint8_t { tp, cp, dp_cp, dp_shard, dp_replica, pp };
inline constexpr int kNumGroups = 6;

// What time is accounted to in the step breakdown.
enum class Category : std::uint8_t {
    forward, backward, recompute, optimizer, tp_comm, cp_comm, dp_comm, pp_comm
};
inline constexpr int kNumCategories = 8;

// What an op does, shared by every instance with the same shape (costed once).
struct OpProto {
    OpKind kind = OpKind::memory;
    std::string name;                   // "qkv", "attn_fwd", "ln1", "tp_ar"...
    Precision precision = Precision::bf16;
    // GEMM C[m,n] = A[m,k] B[k,n], `batch` independent products (batched / strided GEMM)
    std::int64_t m = 0, n = 0, k = 0;
    std::int64_t batch = 1;
    bool split_accumulate = false;  // FP8 backward GEMM with FP32-promoted accumulation
    // The GEMM runs as `splits` back-to-back GEMMs over m / splits rows each (Transformer Engine's
    // userbuffers TP overlap computes one chunk while the next is communicated).
    std::int32_t splits = 1;
    // attention: batch*heads (local), query/key lengths, head dim, causal mask
    std::int64_t batch_heads = 0, seq_q = 0, seq_kv = 0, head_dim = 0;
    bool causal = true;
    AttentionImpl attention_impl = AttentionImpl::flash;
    // memory-bound op: bytes read + written; collective: the buffer size in nccl-tests terms
    // (all_reduce: in = out; all_gather: output; reduce_scatter: input); send/recv: payload.
    Bytes bytes;
    Flops flops;  // arithmetic work (for FLOP accounting and rate reporting)
    CollectiveOp collective = CollectiveOp::all_reduce;
    Group group = Group::tp;
    // A collective issued through PyTorch's list-of-tensors API (all_gather(list, t) /
    // reduce_scatter(t, list), before the flat *_base variants of PyTorch 1.10): the NCCL buffer
    // is copied out to (or in from) one tensor per rank, one copy kernel each. 0: a flat collective.
    std::int32_t copy_slices = 0;
    // Host side (docs/model.md "Host"): the kernels the stack launches for this op (the host pays
    // each one's launch cost before the GPU can start the op; a collective or a transfer is one
    // communication call besides), and whether the host then waits for the op to finish
    // (`.item()` on its result, torch.cuda.synchronize()).
    std::int32_t launches = 1;
    bool host_sync = false;
    // Its launches are bare tensor ops from a Python loop (an optimizer's per-tensor copies),
    // not the model code's: each costs HostCosts::plain_op, whatever the dispatch path.
    bool plain_ops = false;
};

struct Op {
    std::uint32_t proto = 0;
    Stream stream = Stream::compute;
    Category category = Category::forward;
    std::uint32_t dep_begin = 0;  // into StageProgram::deps
    std::uint32_t dep_count = 0;
    // send/recv: peer pipeline stage and a tag unique per (src stage, dst stage) pair.
    std::int32_t peer_stage = -1;
    std::uint32_t tag = 0;
    std::uint16_t microbatch = 0;
    std::uint16_t chunk = 0;  // virtual pipeline chunk
    // The schedule item the op belongs to: forward, backward, or a split backward's B or W pass
    // (the trace names a stage's passes F / B / W by it).
    PipelinePass pass = PipelinePass::forward;
};

struct StageProgram {
    std::vector<Op> ops;
    std::vector<std::uint32_t> deps;  // op indices (earlier in program order)
};

struct OpGraph {
    std::vector<OpProto> protos;
    std::vector<StageProgram> stages;  // one per pipeline stage
    int tp = 1, pp = 1, vp = 1, cp = 1, dp = 1;
    int microbatches = 1;
    int hsdp_shard = 1;  // HSDP shard group size (within a node)
    [[nodiscard]] std::size_t op_count() const;
};

// Builds the step's op graph. Pure and deterministic. Precondition: check_layout(plan) is empty.
[[nodiscard]] OpGraph build_workload(const Plan& plan);

// The order a stage's schedule items are laid out in. `schedule`: the plan's pipeline schedule,
// the step as it runs. `depth_first`: each micro-batch's forward of every chunk, then its backward
// of every chunk, for any count of micro-batches: the same ops, protos and transfer peers as the
// schedule's (each schedule runs every (micro-batch, chunk) forward and backward once; the
// gradient reductions follow each chunk's last backward either way), in an order no pipeline could
// run: for sums over the ops only (the plan search's stream bounds build it for 1 and 2
// micro-batches where the interleaved schedule needs pp and 2 pp). The V schedules and the split
// backward keep their own order.
enum class WorkloadOrder { schedule, depth_first };
[[nodiscard]] OpGraph build_workload(const Plan& plan, WorkloadOrder order);

// Whether Megatron's fused scale-mask-softmax kernel runs for unfused attention over
// micro_batch x heads_per_rank score matrices of sq x sk (FusedScaleMaskSoftmax in Megatron-LM
// 2021-22 megatron/model/fused_softmax.py and Megatron-DeepSpeed: 16 < sk <= 2048, sq % 4 == 0
// and b * np % 4 == 0, the warp kernel's batches per block); otherwise it falls back to PyTorch
// ops in FP32 (forward_torch_softmax).
[[nodiscard]] bool unfused_softmax_fuses(std::int64_t micro_batch, std::int64_t heads_per_rank, std::int64_t sq,
                                         std::int64_t sk);

[[nodiscard]] std::string to_string(OpKind v);
[[nodiscard]] std::string to_string(Stream v);
[[nodiscard]] std::string to_string(Category v);
[[nodiscard]] std::string to_string(Group v);
[[nodiscard]] std::string to_string(CollectiveOp v);

} // namespace trainsim::model
