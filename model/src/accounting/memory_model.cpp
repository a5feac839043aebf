#include "trainsim/model/accounting/memory_model.hpp"

#include "trainsim/model/accounting/finetune.hpp"
#include "trainsim/model/accounting/flops.hpp"
#include "trainsim/model/accounting/layout.hpp"
#include "trainsim/model/accounting/pipeline_schedule.hpp"

#include <algorithm>

namespace trainsim::model {

Bytes layer_activation_bytes(const ModelArch& m, int seq_len, int micro_batch, int tp, bool sp, int cp,
                             Recompute recompute, Precision precision, const ActivationOptions& opt) {
    const double T = static_cast<double>(micro_batch) * seq_len / cp;  // tokens on this rank
    const double h = m.hidden, a = m.heads, g = m.kv_heads, d = m.head_dim, f = m.ffn;
    const double t = tp;
    const double rep = sp ? 1.0 / t : 1.0;  // parts replicated across TP ranks unless SP splits them
    if (recompute == Recompute::full) return Bytes(2.0 * T * h * rep);  // only the layer input
    const bool gated = m.ffn_type == FfnType::swiglu;
    if (recompute == Recompute::selective && opt.selective == SelectiveRecompute::alternate_matmuls) {
        // torchtitan's op-level policy saves the outputs of the attention kernel and of every
        // other matmul of the layer, counted in call order (wq, wk, wv, wo, w1, w3, w2: wq, wv,
        // w1, w2 are saved; fc1 of a 2-matrix MLP), and rebuilds the rest from the layer input.
        double saved = 2.0 * T * h * rep;               // layer input
        saved += 2.0 * T * (a + g) * d / t;             // wq and wv outputs
        saved += 2.0 * T * f / t;                       // w1 (fc1) output
        if (gated) saved += 2.0 * T * h;                // w2 output, before the TP reduction
        saved += 2.0 * T * a * d / t + 4.0 * T * a / t; // attention output and its log-sum-exp
        return Bytes(saved);
    }

    // GEMM inputs saved for the weight gradient: FP8 recipes keep the FP8 copy (1 byte).
    const double gemm_in = precision == Precision::fp8 ? 1.0 : 2.0;
    const double mask = opt.dropout ? 1.0 : 0.0;
    double replicated = 0;
    replicated += 2.0 * T * h;      // LN1 input (residual stream)
    replicated += gemm_in * T * h;  // QKV input (LN1 output)
    replicated += mask * T * h;     // attention-output dropout mask
    replicated += 2.0 * T * h;      // LN2 input
    replicated += gemm_in * T * h;  // FC1 input (LN2 output)
    replicated += mask * T * h;     // MLP dropout mask

    double sharded = 0;
    sharded += 2.0 * T * (a + 2.0 * g) * d / t;  // Q, K, V
    sharded += 2.0 * T * a * d / t;              // attention output = out-proj input
    sharded += (gated ? 4.0 : 2.0) * T * f / t;  // activation-function input(s)
    sharded += gemm_in * T * f / t;              // FC2 input (activation output)

    // Attention core: with flash attention only the FP32 log-sum-exp per query and head;
    // otherwise the softmax output (2 B), and with dropout its mask (1 B) and output (2 B),
    // over s/cp queries x s keys — unless selective recompute rebuilds them.
    if (opt.frozen) {
        const auto groups = lora_groups(m, opt.lora_targets);
        if (groups[0].count == 0) replicated -= gemm_in * T * h;  // QKV input (LN1 output)
        if (groups[2].count == 0) replicated -= gemm_in * T * h;  // FC1 input (LN2 output)
        if (groups[3].count == 0) sharded -= gemm_in * T * f / t; // FC2 input (activation output)
        // A's outputs, kept for B's weight gradient (whole on each TP rank: counted unsharded).
        double targets = 0;
        for (const auto& group : groups) targets += group.count;
        sharded += 2.0 * T * opt.lora_rank * targets;
    }

    double core = 0;
    if (opt.flash_attention) {
        core = 4.0 * T * a / t;
    } else if (recompute != Recompute::selective) {
        const double scores = a / t * static_cast<double>(micro_batch) * (seq_len / static_cast<double>(cp)) * seq_len;
        core = scores * (2.0 + (opt.dropout ? 3.0 : 0.0));
    }
    return Bytes(replicated * rep + sharded + core);
}

namespace {

bool per_layer_sharding(Sharding s) { return s == Sharding::zero3 || s == Sharding::fsdp || s == Sharding::hsdp; }

} // namespace

bool gathers_per_layer(const Parallel& p) {
    return p.sharding == Sharding::zero3 ||
           ((p.sharding == Sharding::fsdp || p.sharding == Sharding::hsdp) && p.pp == 1);
}

double master_bytes_per_param(const Parallel& p) {
    if (!p.master_weights) return 0.0;
    if (p.optimizer_state == OptimizerState::bf16) return 2.0;
    return p.master_param_remainders ? 2.0 : 4.0;
}

double moment_bytes_per_param(const Parallel& p) {
    switch (p.optimizer_state) {
    case OptimizerState::bf16: return 4.0;
    case OptimizerState::int8: return kAdam8bitBytesPerParam;
    case OptimizerState::fp32: break;
    }
    return 8.0;
}

double optimizer_bytes_per_param(const Parallel& p) { return master_bytes_per_param(p) + moment_bytes_per_param(p); }

ActivationOptions activation_options(const Plan& plan) {
    const auto& p = plan.parallel;
    ActivationOptions opt;
    opt.flash_attention = p.attention != AttentionImpl::unfused;
    opt.dropout = p.dropout;
    opt.selective = p.selective_recompute;
    if (frozen_base(plan.training)) {
        opt.frozen = true;
        opt.lora_targets = plan.training.lora_targets;
        opt.lora_rank = plan.training.lora_rank;
    }
    return opt;
}

double grad_bytes_per_param(const Plan& plan) {
    // Megatron reduces FP32 main gradients with BF16 parameters (arguments.py forces
    // accumulate_allreduce_grads_in_fp32 for --bf16; FP8 recipes keep BF16 parameters) and
    // FP16 gradients with --fp16. DeepSpeed ZeRO and PyTorch FSDP mixed precision reduce in
    // the 16-bit compute dtype, as does a 16-bit gradient sync (parallel.main_grads_fp32 false).
    const auto& p = plan.parallel;
    // LoRA adapters are FP32 (PEFT's get_peft_model autocast_adapter_dtype casts them up from a
    // 16-bit base), and so are their gradients. Pure BF16 training has BF16 gradients.
    if (frozen_base(plan.training)) return 4.0;
    if (!p.master_weights) return 2.0;
    const bool megatron = p.sharding == Sharding::none || p.sharding == Sharding::dist_opt;
    if (per_layer_sharding(p.sharding) && p.fsdp_reduce_fp32) return 4.0;
    if (deepspeed_bf16_optimizer(plan)) return 4.0;
    return megatron && p.main_grads_fp32 && plan.precision != Precision::fp16 ? 4.0 : 2.0;
}

MemoryBreakdown stage_memory(const Plan& plan, int stage) {
    const auto& m = plan.model;
    const auto& p = plan.parallel;
    const auto pc = count_params(m);
    const int layers_per_stage = stage_layers(plan, stage);
    // A V schedule (ZB-V, DualPipeV) places the last chunk, with the loss, on stage 0.
    const PpSchedule schedule = effective_schedule(p.pp_schedule, p.vp);
    const bool first = stage == 0;
    const bool last = stage_chunk(schedule, p.pp, p.vp, p.pp * p.vp - 1).stage == stage;

    MemoryBreakdown mb;
    mb.stage = stage;
    double local = layers_per_stage * pc.per_layer / p.tp;
    if (first) local += pc.embedding / p.tp;
    // A tied head is the embedding's tensor where both sit on one stage, a copy elsewhere.
    if (last) local += (m.tied_embeddings ? (!first ? pc.embedding : 0.0) : pc.lm_head) / p.tp + pc.final_norm;
    mb.local_params = local;

    const int dp_group = p.dp * p.cp;
    const int gpn_tp = std::max(1, plan.cluster.gpus_per_node / p.tp);
    const double shard = p.sharding == Sharding::hsdp ? std::min(dp_group, gpn_tp) : dp_group;
    const double unit = pc.per_layer / p.tp;  // one FSDP unit (a layer)

    // Bytes per parameter (Megatron-LM docs/distrib_optimizer.md table; ZeRO paper Sec. 3):
    // BF16 weights 2, gradients 4 (FP32 main grads, Megatron) or 2 (ZeRO/FSDP), FP32 master 4 + Adam 8.
    // Megatron's main-gradient buffer is FP32 (also under --fp16: the optimizer copies to FP32
    // main gradients); a 16-bit gradient sync (parallel.main_grads_fp32 false) halves it.
    const double main_grad = p.main_grads_fp32 && p.master_weights ? 4.0 : 2.0;
    // FP8 primary weights keep the layers' GEMM weights in 1 B (embeddings and the head stay
    // BF16); 16-bit master remainders make the FP32 master copy 2 B of the 12.
    const double layer_local = layers_per_stage * pc.per_layer / p.tp;
    const double weights16 = 2.0 * local - (p.fp8_params ? layer_local : 0.0);
    const double optimizer = optimizer_bytes_per_param(p);
    if (deepspeed_bf16_optimizer(plan)) {
        // BF16 weights 2, BF16 gradients 2 beside the FP32 ones 4, the optimizer's 1/dp shard.
        mb.weights = Bytes(weights16);
        mb.gradients = Bytes((2.0 + 4.0) * local);
        mb.optimizer = Bytes(optimizer * local / dp_group);
    } else switch (p.sharding) {
    case Sharding::none:
        mb.weights = Bytes(weights16);
        mb.gradients = Bytes(main_grad * local);
        mb.optimizer = Bytes(optimizer * local);
        break;
    case Sharding::dist_opt:
        mb.weights = Bytes(weights16);
        mb.gradients = Bytes(main_grad * local);
        mb.optimizer = Bytes(optimizer * local / dp_group);
        break;
    case Sharding::zero1:
        mb.weights = Bytes(weights16);
        mb.gradients = Bytes(2.0 * local);
        mb.optimizer = Bytes(optimizer * local / dp_group);
        break;
    case Sharding::zero2:
        mb.weights = Bytes(weights16);
        mb.gradients = Bytes(2.0 * local / dp_group);
        mb.optimizer = Bytes(optimizer * local / dp_group);
        break;
    case Sharding::zero3:
    case Sharding::fsdp:
    case Sharding::hsdp:
        if (!gathers_per_layer(p)) { // FSDP / HSDP under pp: gathered through the step
            mb.weights = Bytes(weights16);
            mb.gradients = Bytes(grad_bytes_per_param(plan) * local);
            mb.optimizer = Bytes(optimizer * local / shard);
            break;
        }
        // Shards plus the gathered working copies: the unit in use and what is prefetched of the next
        // (a bucket takes at least one of the unit's gathers, as the workload's prefetch does), with
        // their unsharded gradients before the reduce-scatter.
        // Module by module (fsdp_fetch: module) the working copy is one weight, the largest, and
        // the one prefetched beside it.
        double in_use = unit, piece = unit / std::max(1, p.fsdp_gathers_per_layer);
        if (p.fsdp_fetch == FsdpFetch::module) {
            const auto w = layer_gemm_weights(plan.model);
            in_use = piece = *std::max_element(w.begin(), w.end()) / p.tp;
        }
        const double ahead = !p.fsdp_prefetch ? 0.0
                             : p.fsdp_prefetch_bucket_params > 0
                                 ? std::min(in_use, std::max(piece, p.fsdp_prefetch_bucket_params))
                                 : in_use;
        mb.weights = Bytes(2.0 * local / shard + 2.0 * (in_use + ahead));
        mb.gradients = Bytes(2.0 * local / shard + 2.0 * in_use);
        mb.optimizer = Bytes(optimizer * local / shard);
        break;
    }
    if (frozen_base(plan.training)) {
        // LoRA / QLoRA: the frozen weights (the layers' GEMM weights in the base format, norms,
        // embedding and head in BF16, as bitsandbytes quantises nn.Linear layers but not the LM head:
        // transformers' get_keys_to_not_convert) carry no gradient and no optimizer state. The
        // adapters are FP32 (PEFT), their own master: FP32 gradients and the optimizer's moments,
        // sharded as the plan shards them.
        const auto w = layer_gemm_weights(m);
        const double gemm_local = layers_per_stage * (w[0] + w[1] + w[2] + w[3]) / p.tp;
        const double adapters = layers_per_stage * trainable_params_per_layer(plan) / p.tp;
        const double opt_shard = p.sharding == Sharding::none ? 1.0 : dp_group;
        mb.weights = Bytes(base_gemm_bytes_per_weight(plan.training.base_format) * gemm_local +
                           2.0 * (local - gemm_local) + 4.0 * adapters);
        mb.gradients = Bytes(4.0 * adapters / (p.sharding == Sharding::zero2 ? dp_group : 1.0));
        mb.optimizer = Bytes(moment_bytes_per_param(p) * adapters / opt_shard);
        if (p.optimizer_in_backward && layers_per_stage > 0) mb.gradients = Bytes(4.0 * adapters / layers_per_stage);
    } else if (p.optimizer_in_backward) {
        // The step runs per parameter as its gradient is ready and frees it (torchtune
        // optimizer_in_bwd): at most one unit's gradients live at once, the largest of a layer,
        // the embedding (first stage) and the head (last stage).
        double unit_params = layers_per_stage > 0 ? pc.per_layer / p.tp : 0.0;
        if (first) unit_params = std::max(unit_params, pc.embedding / p.tp);
        if (last) unit_params = std::max(unit_params, (m.tied_embeddings ? pc.embedding : pc.lm_head) / p.tp);
        mb.gradients = Bytes(grad_bytes_per_param(plan) * unit_params);
    }
    if (p.offload != Offload::none) {
        // The optimizer state (and FP32 gradients) live in host memory; with parameter offload the
        // GPU keeps only the gathered working copies of the layers in use and their gradients.
        mb.optimizer = Bytes(0);
        if (p.offload == Offload::params && gathers_per_layer(p)) {
            mb.weights = mb.weights - Bytes(2.0 * local / shard);
            mb.gradients = mb.gradients - Bytes(2.0 * local / shard);
        }
        const double per_param = optimizer_bytes_per_param(p) + 4.0 + (p.offload == Offload::params ? 2.0 : 0.0);
        mb.host = Bytes(per_param * local / optimizer_shard_degree(plan) * plan.cluster.gpus_per_node);
    }
    if (per_tensor_fp16_optimizer(plan)) {
        // DeepSpeed's FP16_Optimizer (deepspeed/runtime/fp16/fused_optimizer.py, step) keeps
        // no FP32 main-gradient buffer: backward accumulates the FP16 .grad tensors (2 B). The
        // step then makes an FP32 copy of every gradient (p.grad.to(float32), 4 B), flattens the
        // copies into one buffer (_flatten_dense_tensors, 4 B) and only then drops the FP16
        // gradients: 8 B per parameter on top of them, after the activations are gone.
        mb.gradients = Bytes(2.0 * local);
        mb.step_transient = Bytes(8.0 * local);
    }
    if (plan.precision == Precision::fp8) {
        // TE keeps an FP8 copy of every GEMM weight and its transpose (1 B each); with FP8
        // primary weights the copy is the weight itself (counted above) and only the transpose
        // is extra.
        mb.fp8_buffers = Bytes((p.fp8_params ? 1.0 : 2.0) * layer_local / (gathers_per_layer(p) ? shard / 2.0 : 1.0));
    }

    // Activations: the layers of every (micro-batch, chunk) forward pass held at the peak of this
    // stage's schedule (1F1B: pp - stage for the first chunk), plus under full recompute the one
    // layer being recomputed, plus the loss buffers of one micro-batch on the last stage.
    // A split backward (ZB-H1, ZB-V, DualPipeV) holds a forward's activations until its W pass.
    mb.inflight_microbatches = peak_inflight_chunks(schedule, stage, p.pp, p.vp, plan.grad_accum());
    int layers_per_chunk = 0; // the stage's largest chunk
    for (int c = 0; c < p.vp; ++c)
        layers_per_chunk = std::max(layers_per_chunk, chunk_layers(m.layers, p.pp, p.vp, stage, c, schedule));
    const auto& t = plan.training;
    const ActivationOptions opt = activation_options(plan);
    const Bytes per_layer = layer_activation_bytes(m, t.seq_len, t.micro_batch, p.tp, p.sequence_parallel, p.cp,
                                                   p.recompute, plan.precision, opt);
    double act = per_layer.value() * layers_per_chunk * mb.inflight_microbatches;
    if (p.recompute == Recompute::selective && p.selective_recompute == SelectiveRecompute::alternate_matmuls) {
        // The layer being rebuilt holds its full activations once.
        act += layer_activation_bytes(m, t.seq_len, t.micro_batch, p.tp, p.sequence_parallel, p.cp, Recompute::none,
                                      plan.precision, opt)
                   .value();
    } else if (p.recompute == Recompute::full) {
        // The recomputed layers keep only their input; under block recompute the others of the
        // chunk keep everything. The layer being recomputed holds its full activations once.
        const int recomputed = std::min(full_recompute_layers(plan), layers_per_chunk);
        const double whole = layer_activation_bytes(m, t.seq_len, t.micro_batch, p.tp, p.sequence_parallel, p.cp,
                                                    Recompute::none, plan.precision, opt)
                                 .value();
        act = (per_layer.value() * recomputed + whole * (layers_per_chunk - recomputed)) * mb.inflight_microbatches +
              whole;
    }
    const double tokens = static_cast<double>(t.micro_batch) * t.seq_len / p.cp;
    // The loss on the last stage: the bytes per logit it holds at the backward's peak.
    const double loss_bytes = loss_bytes_per_logit(p.cross_entropy).held;
    if (last) act += tokens * (m.vocab / static_cast<double>(p.tp)) * loss_bytes;
    if (first) act += 2.0 * tokens * m.hidden * mb.inflight_microbatches / (p.sequence_parallel ? p.tp : 1);
    mb.activations = Bytes(act);

    // cuBLAS(Lt) workspace: 32 MiB on Hopper, as Transformer Engine sets it. Gradient buckets
    // live inside the contiguous gradient buffer counted above.
    mb.workspace = mib(32.0);
    if (plan.training.base_format == BaseFormat::nf4) {
        // bitsandbytes dequantises one NF4 weight to BF16 before its GEMM and frees it after
        // (bnb.functional.dequantize_4bit in MatMul4Bit): the largest layer weight, once.
        const auto w = layer_gemm_weights(m);
        mb.workspace = mb.workspace + Bytes(2.0 * *std::max_element(w.begin(), w.end()) / p.tp);
    }
    if (p.paged_optimizer) {
        // Paged out while the activations need the GPU, paged in for the step (QLoRA Sec. 3).
        mb.step_transient = std::max(mb.step_transient, mb.optimizer);
        mb.optimizer = Bytes(0);
    }
    mb.reserved = plan.hardware.reserved_memory;
    return mb;
}

bool deepspeed_bf16_optimizer(const Plan& plan) {
    const auto& p = plan.parallel;
    // ZeRO-Offload takes the ZeRO optimizer instead (engine.py: stage 1 "and not self.zero_cpu_offload()").
    return p.grad_accumulation == GradAccumulation::deepspeed && plan.precision == Precision::bf16 &&
           (p.sharding == Sharding::none || p.sharding == Sharding::zero1) && p.offload == Offload::none;
}

bool optimizer_sharded(const Plan& plan) {
    return plan.parallel.sharding != Sharding::none || deepspeed_bf16_optimizer(plan);
}

bool per_tensor_fp16_optimizer(const Plan& plan) {
    return plan.parallel.optimizer_per_tensor && plan.parallel.sharding == Sharding::none &&
           plan.precision == Precision::fp16;
}

int full_recompute_layers(const Plan& plan) {
    const auto& p = plan.parallel;
    if (p.recompute != Recompute::full) return 0;
    const int per_chunk = max_chunk_layers(plan);
    return p.recompute_layers <= 0 ? per_chunk : std::min(p.recompute_layers, per_chunk);
}

bool block_recompute(const Plan& plan) {
    const auto& p = plan.parallel;
    return p.recompute == Recompute::full && full_recompute_layers(plan) < max_chunk_layers(plan);
}

int fewest_recompute_layers(const Plan& plan, std::optional<Bytes> capacity) {
    const Bytes limit = capacity.value_or(plan.hardware.hbm_capacity);
    Plan q = plan;
    q.parallel.recompute = Recompute::full;
    const int per_chunk = max_chunk_layers(plan);
    auto fits = [&](int n) {
        q.parallel.recompute_layers = n;
        return peak_memory(q).total() <= limit;
    };
    if (per_chunk < 1 || !fits(per_chunk)) return 0;
    // Memory falls as more layers are recomputed: the smallest count that fits, by bisection.
    int lo = 1, hi = per_chunk;
    while (lo < hi) {
        const int mid = lo + (hi - lo) / 2;
        if (fits(mid))
            hi = mid;
        else
            lo = mid + 1;
    }
    return lo == per_chunk ? 0 : lo;
}

double optimizer_shard_degree(const Plan& plan) {
    const auto& p = plan.parallel;
    const int dp_group = p.dp * p.cp;
    const int gpn_tp = std::max(1, plan.cluster.gpus_per_node / p.tp);
    if (!optimizer_sharded(plan)) return 1.0;
    return p.sharding == Sharding::hsdp ? std::min(dp_group, gpn_tp) : dp_group;
}

Bytes host_memory_per_node(const Plan& plan) {
    return plan.cluster.host_memory.value_or(plan.hardware.default_host_memory);
}

Bytes host_offload_bytes_per_node(const Plan& plan) {
    if (plan.parallel.offload == Offload::none) return Bytes(0);
    Bytes most(0);
    for (int s = 0; s < plan.parallel.pp; ++s)
        if (const Bytes h = stage_memory(plan, s).host; h > most) most = h;
    return most;
}

bool fits_in_memory(const Plan& plan, const MemoryBreakdown& peak, std::optional<Bytes> capacity) {
    if (peak.total() > capacity.value_or(plan.hardware.hbm_capacity)) return false;
    return plan.parallel.offload == Offload::none || host_offload_bytes_per_node(plan) <= host_memory_per_node(plan);
}

MemoryBreakdown peak_memory(const Plan& plan) {
    MemoryBreakdown best = stage_memory(plan, 0);
    for (int s = 1; s < plan.parallel.pp; ++s) {
        auto b = stage_memory(plan, s);
        if (b.total() > best.total()) best = b;
    }
    return best;
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

} // namespace trainsim::model
