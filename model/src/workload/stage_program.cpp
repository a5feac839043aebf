// A stage's program along its pipeline schedule, its pipeline transfers and the optimizer
// (builder.hpp).
#include "builder.hpp"

namespace trainsim::model::workload_detail {

OpGraph Builder::build() {
    for (int stage = 0; stage < p_.pp; ++stage) g_.stages.push_back(build_stage(stage));
    return std::move(g_);
}

namespace {
// WorkloadOrder::depth_first: each micro-batch's forwards, chunks ascending, then its backwards,
// chunks descending.
std::vector<ScheduleItem> depth_first_schedule(int vp, int microbatches) {
    std::vector<ScheduleItem> out;
    out.reserve(static_cast<std::size_t>(2 * vp * microbatches));
    for (int mb = 0; mb < microbatches; ++mb) {
        for (int c = 0; c < vp; ++c) {
            ScheduleItem it;
            it.microbatch = mb;
            it.chunk = c;
            out.push_back(it);
        }
        for (int c = vp - 1; c >= 0; --c) {
            ScheduleItem it;
            it.forward = false;
            it.pass = PipelinePass::backward;
            it.microbatch = mb;
            it.chunk = c;
            out.push_back(it);
        }
    }
    return out;
}
} // namespace

StageProgram Builder::build_stage(int stage) {
    StageState st;
    const int pp = p_.pp, vp = p_.vp, mbs = g_.microbatches;
    const int dp_group = p_.dp * p_.cp;
    // The schedule places the chunks: along the stages (1F1B, interleaved) or in a V (ZB-V,
    // DualPipeV: chunk 1 of stage s is virtual stage 2 pp - 1 - s, so stage 0 holds the first and
    // the last, the embedding and the loss).
    const PpSchedule sched = effective_schedule(p_.pp_schedule, vp);
    const bool depth_first = order_ == WorkloadOrder::depth_first && !v_shape(sched) && !splits_backward(sched);
    const auto schedule = depth_first ? depth_first_schedule(vp, mbs) : pipeline_schedule(sched, stage, pp, vp, mbs);
    const int nvs = pp * vp;
    const bool has_head = stage_chunk(sched, pp, vp, nvs - 1).stage == stage;
    const bool has_embed = stage == 0;
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
        const int vs = virtual_stage(sched, pp, vp, stage, c);
        auto& u = chunk_units[static_cast<std::size_t>(c)];
        if (vs == pp * vp - 1 && has_head) u.push_back(kHeadUnit);
        for (int l = chunk_layers(m_.layers, pp, vp, stage, c, sched) - 1; l >= 0; --l) u.push_back(l);
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

    // A sharded optimizer (distributed optimizer, ZeRO-1/2, DeepSpeed's BF16_Optimizer even at
    // ZeRO stage 0) gathers the updated weights; ZeRO-3 / FSDP gather per unit instead.
    const bool sharded_opt = optimizer_sharded(plan_) && !per_layer_sharding();
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
    // The host's waits around a micro-batch (Parallel::host_sync_microbatch, host_sync_batch): a
    // device synchronize has no kernel; loading a batch launches its copies and the few kernels
    // that build the labels, loss mask, causal mask and position ids (10 launches: three
    // blocking copies, two TP broadcasts, five mask and slice kernels; megatron/mpu/data.py
    // broadcast_data and pretrain_gpt.py get_batch) on 2 x 8 B per token, and waits.
    ProtoId timer_sync = 0, batch_load = 0;
    // With a pipeline these waits fall next to the transfers' own (Megatron: forward-recv before
    // forward-compute and get_batch, forward-send after them; DeepSpeed: RecvActivation before
    // LoadMicroBatch), which already hold the host (host_sync_p2p, blocking sends); and the
    // program order of a stage's sends and receives is not its host's (Megatron batches them),
    // so a wait placed between them could wait for a peer that waits for us. They are emitted
    // only without a pipeline.
    if (p_.host_sync_microbatch != MicrobatchSync::none && pp == 1) {
        timer_sync = memory("timer_sync", 0.0);
        g_.protos[timer_sync].launches = 0;
        g_.protos[timer_sync].host_sync = true;
    }
    if (p_.host_sync_batch && pp == 1) {
        batch_load = memory("batch_load", 2.0 * 8.0 * static_cast<double>(tokens_));
        g_.protos[batch_load].launches = 10;
        g_.protos[batch_load].plain_ops = true; // no-grad tensor ops and copies, not the model's layer code
        g_.protos[batch_load].host_sync = true;
    }
    // Megatron's timers wait on both sides of the forward and of the backward; DeepSpeed's only
    // before the forward.
    const bool both_sides = p_.host_sync_microbatch == MicrobatchSync::forward_backward;
    // Gradient accumulation as a pass of its own (accumulation_pass): after each unit's weight
    // gradients, or once after each micro-batch's backward over the chunk's tensors, two bare ops
    // each (DeepSpeed BF16_Optimizer: .to(float32), .add_). A unit's adds launch one kernel per
    // tensor; the legacy path already counts them among the unit's backward kernels (its
    // AccumulateGrad adds). A head tied to the embedding on the same stage is one tensor: the
    // BF16_Optimizer's loop visits it once, while autograd adds it twice (the two contributions
    // summed in the engine's input buffer, then into .grad), as the per-unit adds charge it.
    const AccumulationPass accum = accumulation_pass();
    std::map<int, ProtoId> unit_accum;  // per unit kind (layer 0, embedding, head)
    std::vector<ProtoId> chunk_accum(static_cast<std::size_t>(vp), 0);
    if (accum.bytes_per_param > 0) {
        const bool legacy = p_.host_dispatch == HostDispatch::legacy;
        for (int c = 0; c < vp; ++c) {
            double params = 0;
            int tensors = 0;
            for (int unit : chunk_units[static_cast<std::size_t>(c)]) {
                const bool tied_here = unit == kHeadUnit && m_.tied_embeddings && has_embed;
                if (!tied_here) params += unit_params(unit);
                tensors += unit_tensors(unit, has_embed);
                const int kind = std::min(unit, 0);
                if (!accum.after_backward && !unit_accum.contains(kind)) {
                    const ProtoId id = memory("grad_accum", unit_params(unit) * accum.bytes_per_param);
                    g_.protos[id].launches = legacy ? 0 : unit_tensors(unit, has_embed);
                    unit_accum[kind] = id;
                }
            }
            if (accum.after_backward) {
                const ProtoId id = memory("grad_accum_fp32", params * accum.bytes_per_param);
                g_.protos[id].launches = 2 * tensors;
                g_.protos[id].plain_ops = true;
                chunk_accum[static_cast<std::size_t>(c)] = id;
            }
        }
    }
    auto tag = [&](bool fwd, int chunk_dst, int mb) {
        return static_cast<std::uint32_t>(((fwd ? 0 : 1) * vp + chunk_dst) * mbs + mb);
    };
    // DualPipeV waits for its sends with its receives before the next compute
    // (DualPipeV._commit_and_wait_comm), whatever the stack's P2P overlap.
    const bool dualpipe = sched == PpSchedule::dualpipe_v;
    // The receive an item's input arrives by, posted once: before the item, or earlier where
    // DualPipeV's compute waits for a later item's input too (waits_input_of). None for the
    // first chunk's forward, the last chunk's first backward and the V's turn on the last stage
    // (the other chunk's output, on this stage).
    std::vector<bool> posted(schedule.size(), false);
    // The stream of a transfer: Megatron's one per pass (activations, gradients), which for the
    // 1F1B family is one per direction. In a V the second chunk's activations travel down and its
    // gradients up: its transfers take the stream of their direction of travel, so that each
    // stream pair carries the messages of one ordered pair of stages (with one FIFO per pass, a
    // stage's chunk-1 receive from s + 1 would wait behind a chunk-0 send to it, and deadlock).
    const bool v_transfers = v_shape(sched);
    auto upward_of = [&](bool fwd, int from, int to) { return v_transfers ? from < to : fwd; };
    // Where the item's input comes from: none (-1) for the first chunk's forward, the last
    // chunk's first backward and the V's turn on the last stage (the other chunk's output).
    auto source = [&](const ScheduleItem& it) -> int {
        if (it.pass == PipelinePass::weight_grad) return -1;
        const int vs = virtual_stage(sched, pp, vp, stage, it.chunk);
        if (it.forward ? vs == 0 : vs == nvs - 1) return -1;
        const int src = stage_chunk(sched, pp, vp, it.forward ? vs - 1 : vs + 1).stage;
        return src == stage ? -1 : src;
    };
    std::vector<std::uint32_t> recv_id(schedule.size(), kNone);
    auto emit_recv = [&](std::size_t i, int src) {
        const auto& it = schedule[i];
        const bool fwd = it.forward;
        const auto stream = upward_of(fwd, src, stage) ? Stream::pp_recv_fwd : Stream::pp_recv_bwd;
        const auto id = emit(st, fwd ? recv_act : recv_grad, stream, Category::pp_comm, it.microbatch, it.chunk);
        Op& r = st.prog.ops[id];
        r.peer_stage = src;
        r.tag = tag(fwd, it.chunk, it.microbatch);
        posted[i] = true;
        recv_id[i] = id;
    };
    // In a V each receive stream carries one neighbour's messages, which that neighbour sends in
    // its program order; the receives are posted in the same order (earlier than needed where the
    // neighbour sends ahead, as a pre-posted irecv), so that no receive waits behind one whose
    // message is sent later (the Zero Bubble runtime and DualPipe batch their receives likewise).
    std::map<int, std::vector<std::size_t>> sent_order;  // neighbour -> my items, in its send order
    std::map<int, std::size_t> sent_next;
    if (v_transfers) {
        std::map<std::tuple<bool, int, int>, std::size_t> mine;  // (activation, chunk, mb) -> my item
        for (std::size_t i = 0; i < schedule.size(); ++i)
            if (schedule[i].pass != PipelinePass::weight_grad)
                mine[{schedule[i].forward, schedule[i].chunk, schedule[i].microbatch}] = i;
        for (int peer : {stage - 1, stage + 1}) {
            if (peer < 0 || peer >= pp) continue;
            for (const auto& it : pipeline_schedule(sched, peer, pp, vp, mbs)) {
                if (it.pass == PipelinePass::weight_grad) continue;
                const int vs = virtual_stage(sched, pp, vp, peer, it.chunk);
                if (it.forward ? vs == nvs - 1 : vs == 0) continue;
                const auto dst = stage_chunk(sched, pp, vp, it.forward ? vs + 1 : vs - 1);
                if (dst.stage != stage) continue;
                sent_order[peer].push_back(mine.at({it.forward, dst.chunk, it.microbatch}));
            }
        }
    }
    // Posts item i's receive (and, in a V, those its neighbour sends before it) and makes the
    // next op wait for it.
    auto post_recv = [&](std::size_t i) {
        const int src = source(schedule[i]);
        if (src < 0) return;
        if (!posted[i]) {
            if (v_transfers) {
                auto& order = sent_order[src];
                auto& next = sent_next[src];
                while (!posted[i] && next < order.size()) {
                    const std::size_t j = order[next++];
                    if (!posted[j]) emit_recv(j, src);
                }
            }
            if (!posted[i]) emit_recv(i, src);
        }
        if (recv_id[i] == kNone) return;
        st.pending.push_back(recv_id[i]);
        recv_id[i] = kNone;  // waited once
        const auto& it = schedule[i];
        if (p2p_gather != 0) last_compute_ = compute(st, p2p_gather, Category::pp_comm, it.microbatch, it.chunk);
    };
    auto send_output = [&](const ScheduleItem& it) {
        const bool fwd = it.forward;
        const int vs = virtual_stage(sched, pp, vp, stage, it.chunk);
        if (fwd ? vs == nvs - 1 : vs == 0) return;
        const auto dst = stage_chunk(sched, pp, vp, fwd ? vs + 1 : vs - 1);
        if (dst.stage == stage) return;
        const auto stream = upward_of(fwd, stage, dst.stage) ? Stream::pp_send_fwd : Stream::pp_send_bwd;
        const auto id = emit(st, fwd ? send_act : send_grad, stream, Category::pp_comm, it.microbatch, it.chunk,
                             {last_compute_});
        Op& s = st.prog.ops[id];
        s.peer_stage = dst.stage;
        s.tag = tag(fwd, dst.chunk, it.microbatch);
        if (dualpipe) st.blocking_sends.push_back(id);
        else blocking_p2p(st);
    };
    // Per chunk: backward (or B) passes run, and W passes run (the layers' gradients complete).
    std::vector<int> w_count(static_cast<std::size_t>(vp), 0);
    const ScheduleItem* paired_send = nullptr;  // DualPipeV F&B: the forward's output goes after the pair

    for (std::size_t i = 0; i < schedule.size(); ++i) {
        const auto& it = schedule[i];
        const int mb = it.microbatch;
        const int c = it.chunk;
        const auto& units = chunk_units[static_cast<std::size_t>(c)];
        current_pass_ = it.pass;
        post_recv(i);
        if (it.waits_input_of >= 0) post_recv(static_cast<std::size_t>(it.waits_input_of));
        if (it.pass == PipelinePass::forward) {
            if (timer_sync != 0) host_wait(st, timer_sync, Category::forward, mb, c);
            if (batch_load != 0) host_wait(st, batch_load, Category::forward, mb, c);
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
            if (timer_sync != 0 && both_sides) host_wait(st, timer_sync, Category::forward, mb, c);
        } else if (it.pass == PipelinePass::weight_grad) {
            // The W pass: the layers' weight-gradient GEMMs of an earlier B pass of (mb, chunk);
            // the layers' gradients are complete after it (accumulation, DP reduction).
            current_bwd_count_ = ++w_count[static_cast<std::size_t>(c)];
            for (int unit : units) {
                if (unit < 0) continue;
                std::uint32_t done = layer_weight_grad(st, mb, c);
                flush_deferred(st);
                done = std::max(done, last_compute_);
                if (const auto acc = unit_accum.find(0);
                    acc != unit_accum.end() && (accum.first_microbatch || current_bwd_count_ > 1))
                    done = compute_tracked(st, acc->second, Category::backward, mb, c);
                grads_done(st, unit, mb, c, done, buckets, remaining_units_in_bucket, dp_reduce_ops, bucket_of);
            }
        } else {
            const bool split = it.pass == PipelinePass::input_grad;
            if (timer_sync != 0 && both_sides) host_wait(st, timer_sync, Category::backward, mb, c);
            ++bwd_count[static_cast<std::size_t>(c)];
            current_bwd_count_ = bwd_count[static_cast<std::size_t>(c)];
            std::uint32_t prev2_done = kNone, prev_done = kNone;
            // With the BF16_Optimizer's loop the gradients are complete only after it: the units'
            // reductions wait for it.
            const ProtoId chunk_pass = chunk_accum[static_cast<std::size_t>(c)];
            if (split && chunk_pass != 0)
                throw std::logic_error("a split backward with an after-backward accumulation pass (check_layout)");
            std::vector<int> awaiting_pass;
            for (int unit : units) {
                std::uint32_t gdep = kNone;
                if (per_layer_sharding())
                    gdep = unit_gather(unit, mb, c, prev2_done, prev_done, unit < full_recompute_layers_ ? 0 : 3);
                std::uint32_t done = kNone;
                if (unit == kHeadUnit) {
                    if (gdep != kNone) st.pending.push_back(gdep);
                    compute_tracked(st, hp_.loss_bwd, Category::backward, mb, c);
                    done = compute_tracked(st, hp_.head_dgrad, Category::backward, mb, c);
                    if (!frozen_) done = compute_tracked(st, hp_.head_wgrad, Category::backward, mb, c);
                    tp_collective(st, hp_.head_reduce, mb, c, Side::after_gemm);
                } else if (unit == kEmbedUnit && frozen_) {
                    // A frozen embedding needs no gradient: its backward is nothing.
                    done = last_compute_;
                } else if (unit == kEmbedUnit) {
                    if (gdep != kNone) st.pending.push_back(gdep);
                    tp_collective(st, hp_.embed_comm_bwd, mb, c, Side::before_gemm);
                    done = compute_tracked(st, hp_.embed_bwd, Category::backward, mb, c);
                } else {
                    done = layer_backward(st, mb, c, unit, gdep, split);
                }
                flush_deferred(st);
                // A split backward's layers complete their gradients in their W pass.
                if (!split || unit < 0) {
                    done = std::max(done, last_compute_);
                    if (const auto acc = unit_accum.find(std::min(unit, 0));
                        acc != unit_accum.end() && (accum.first_microbatch || current_bwd_count_ > 1))
                        done = compute_tracked(st, acc->second, Category::backward, mb, c);
                    if (chunk_pass != 0)
                        awaiting_pass.push_back(unit);
                    else
                        grads_done(st, unit, mb, c, done, buckets, remaining_units_in_bucket, dp_reduce_ops, bucket_of);
                }
                prev2_done = prev_done;
                prev_done = last_compute_;
            }
            if (chunk_pass != 0) {
                const auto pass = compute_tracked(st, chunk_pass, Category::backward, mb, c);
                for (int unit : awaiting_pass)
                    grads_done(st, unit, mb, c, pass, buckets, remaining_units_in_bucket, dp_reduce_ops, bucket_of);
            }
            if (timer_sync != 0 && both_sides) host_wait(st, timer_sync, Category::backward, mb, c);
        }
        if (it.pass == PipelinePass::weight_grad) continue;
        if (it.paired) {
            paired_send = &it;
            continue;
        }
        if (paired_send != nullptr) {
            send_output(*paired_send);
            paired_send = nullptr;
        }
        send_output(it);
    }
    current_pass_ = PipelinePass::forward;

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
    double update_bytes =
        p_.fused_optimizer ? (bf16_state ? 10.0 + 8.0 : 16.0 + 14.0) : (bf16_state ? 40.0 : 80.0);
    if (frozen_ || !p_.master_weights || p_.optimizer_state == OptimizerState::int8) {
        // Fine-tuning's optimizers (docs/model.md "Fine-tuning"): read the gradient, read and write
        // the weight the step updates (FP32 adapters, BF16 weights without a master, else the
        // master copy) and the moments, and write the BF16 copy where a master feeds one. The
        // foreach implementation moves about 2.7x the fused kernel's bytes (80 against 30 above).
        const double weight = frozen_ ? 4.0 : (p_.master_weights ? master_bytes_per_param(p_) : 2.0);
        const double copy = !frozen_ && p_.master_weights ? 2.0 : 0.0;
        const double fused = 2.0 * (weight + moment_bytes_per_param(p_)) + copy;
        update_bytes = p_.fused_optimizer ? fused : fused * 80.0 / 30.0;
    }
    const double opt_shard = optimizer_sharded(plan_) ? (per_layer_sharding() ? shard : dp_group) : 1.0;
    const double shard_params = local_params / opt_shard;
    const double grad_buffer = per_layer_sharding() ? shard_params : local_params;
    for (auto d : dp_reduce_ops) st.pending.push_back(d);
    // The gradient norm for clipping (4 B per gradient; multi_tensor_l2norm and the norm's
    // all-reduce), which every Megatron / DeepSpeed / FSDP trainer reads back on the host
    // (clip_grad_norm: total_norm.item(); FP16 adds the overflow check found_inf.item()): the
    // host waits for the whole backward before it issues the update.
    // DeepSpeed's FP16_Optimizer (Parallel::optimizer_per_tensor; without ZeRO, in FP16): per
    // parameter tensor, the overflow check's FP32 copy and sum (2 + 4 B written and 4 B read per
    // element) and the read of the sum to the host (3 bare ops), serially: one wait per tensor,
    // taken here per unit (a layer's tensors together); then every gradient copied to FP32
    // (2 + 4 B) and the copies flattened into one buffer (4 + 4 B). Bare ops from a Python loop
    // (OpProto::plain_ops), over the tensors of unit_tensors.
    const bool per_tensor = per_tensor_fp16_optimizer(plan_);
    int tensors = 0;
    if (per_tensor) {
        for (const auto& u : chunk_units)
            for (int unit : u) {
                const int n = unit_tensors(unit, has_embed);
                tensors += n;
                const ProtoId check = memory("overflow_check", unit_params(unit) * 10.0);
                g_.protos[check].launches = 3 * n;
                g_.protos[check].plain_ops = true;
                g_.protos[check].host_sync = true;
                compute(st, check, Category::optimizer, 0, 0);
            }
        const ProtoId flat = memory("grads_to_fp32_flat", local_params * 14.0);
        g_.protos[flat].launches = tensors + 1;
        g_.protos[flat].plain_ops = true;
        compute(st, flat, Category::optimizer, 0, 0);
    }
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
    if (per_tensor) {
        // The updated weights copied back one tensor at a time from the flat FP32 master (4 + 2 B).
        const ProtoId back = memory("params_copy_back", local_params * 6.0);
        g_.protos[back].launches = tensors;
        g_.protos[back].plain_ops = true;
        compute(st, back, Category::optimizer, 0, 0);
    }
    return std::move(st.prog);
}

template <class BucketOf>
void Builder::grads_done(StageState& st, int unit, int mb, int chunk, std::uint32_t done_op, const std::vector<Bucket>& buckets,
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
    // DeepSpeed's BF16_Optimizer all-reduces its FP32 gradients (PipelineEngine._bf16_reduce_grads,
    // buffered_allreduce_fallback over get_grads_for_reduction), ZeRO-1 or not.
    const bool all_reduce = p_.sharding == Sharding::none || deepspeed_bf16_optimizer(plan_);
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

} // namespace trainsim::model::workload_detail
