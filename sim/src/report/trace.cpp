#include "trainsim/sim/report/trace.hpp"

#include "trainsim/model/accounting/layout.hpp"
#include "trainsim/model/accounting/pipeline_schedule.hpp"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <array>
#include <map>
#include <ostream>

namespace trainsim::sim {

using nlohmann::ordered_json;

namespace {

// Trace Event Format timestamps are microseconds; the engine's picoseconds fit a double exactly
// up to 2^53 ps (about 2.5 hours of simulated time).
double micros(Time t) {
    return static_cast<double>(t.count_ps()) / 1e6;
}

ordered_json op_args(const model::OpProto& p, const model::Op& op, bool chunks) {
    ordered_json a;
    a["kind"] = model::to_string(p.kind);
    a["microbatch"] = op.microbatch;
    if (chunks) a["chunk"] = op.chunk; // virtual pipeline chunk, only with vp > 1
    // The schedule pass of a compute op: F (forward, and a backward's recompute), B (a full
    // backward, or a split backward's input-gradient pass), W (a split backward's weight-gradient
    // pass), so that a stage's F / B / W order can be read off the trace.
    if (op.category == model::Category::forward || op.category == model::Category::backward ||
        op.category == model::Category::recompute) {
        switch (op.pass) {
            case model::PipelinePass::forward: a["pass"] = "F"; break;
            case model::PipelinePass::backward:
            case model::PipelinePass::input_grad: a["pass"] = "B"; break;
            case model::PipelinePass::weight_grad: a["pass"] = "W"; break;
        }
    }
    switch (p.kind) {
        case model::OpKind::gemm:
            a["m"] = p.m;
            a["n"] = p.n;
            a["k"] = p.k;
            if (p.batch > 1) a["batch"] = p.batch;
            a["precision"] = model::to_string(p.precision);
            break;
        case model::OpKind::attention_fwd:
        case model::OpKind::attention_bwd:
            a["batch_heads"] = p.batch_heads;
            a["seq_q"] = p.seq_q;
            a["seq_kv"] = p.seq_kv;
            a["head_dim"] = p.head_dim;
            a["causal"] = p.causal;
            break;
        case model::OpKind::collective:
            a["collective"] = model::to_string(p.collective);
            a["group"] = model::to_string(p.group);
            break;
        case model::OpKind::send:
        case model::OpKind::recv:
            a["group"] = model::to_string(model::Group::pp);
            a["peer_stage"] = op.peer_stage;
            break;
        case model::OpKind::memory:
            break;
    }
    if (p.flops.value() > 0) a["flops"] = p.flops.value();
    if (p.bytes.value() > 0) a["bytes"] = p.bytes.value();
    return a;
}

} // namespace

// The host thread's track, after the streams.
constexpr int kHostTid = model::kNumStreams;

void write_chrome_trace(std::ostream& os, const model::Plan& plan, const model::OpGraph& graph, const StepResult& step,
                        const std::string& scenario_file) {
    const auto strides = model::rank_strides(plan.parallel);
    const int pp = plan.parallel.pp;
    auto stage_of = [&](int rank) { return (rank / strides.pp) % pp; };

    // Tracks that carry at least one op, per rank (ordered: deterministic output).
    std::map<int, std::array<bool, model::kNumStreams>> tracks;
    for (const auto& ev : step.trace) tracks[ev.rank][static_cast<std::size_t>(ev.stream)] = true;

    const auto& q = plan.parallel;
    ordered_json other;
    other["tool"] = "trainsim";
    other["scenario"] = scenario_file;
    other["plan"] = plan.name;
    other["model"] = plan.model.name;
    other["gpu"] = plan.hardware.id;
    other["precision"] = model::to_string(plan.precision);
    other["num_gpus"] = plan.num_gpus();
    other["layout"] = {{"tp", q.tp},
                       {"pp", q.pp},
                       {"vp", q.vp},
                       {"cp", q.cp},
                       {"dp", q.dp},
                       {"micro_batch", plan.training.micro_batch},
                       {"grad_accum", plan.grad_accum()}};
    // The pipeline schedule and each stage's order of passes: F / B / W, micro-batch, and the
    // chunk after a dot when there are several ("F3 B0 W0", "F3.1").
    const auto schedule = model::effective_schedule(q.pp_schedule, q.vp);
    other["pp_schedule"] = model::to_string(schedule);
    if (q.pp > 1) {
        ordered_json orders = ordered_json::array();
        for (int s = 0; s < q.pp; ++s) {
            std::string order;
            for (const auto& it : model::pipeline_schedule(schedule, s, q.pp, q.vp, plan.grad_accum())) {
                const char pass = it.pass == model::PipelinePass::forward       ? 'F'
                                  : it.pass == model::PipelinePass::weight_grad ? 'W'
                                                                                : 'B';
                if (!order.empty()) order += ' ';
                order += q.vp > 1 ? fmt::format("{}{}.{}", pass, it.microbatch, it.chunk)
                                  : fmt::format("{}{}", pass, it.microbatch);
            }
            orders.push_back(order);
        }
        other["pipeline_order"] = orders;
    }
    other["step_time_s"] = step.step_time.seconds();
    other["critical_stage"] = step.critical_stage;
    other["simulated_ranks"] = step.simulated_ranks;
    other["all_ranks"] = step.simulated_ranks == static_cast<std::size_t>(plan.num_gpus());
    other["time_unit"] = "us";
    // No PCIe peer-to-peer on this GPU (GeForce): collectives between GPUs of a node that are not on
    // NVLink go GPU -> host memory -> GPU (NCCL SHM; docs/network.md "No peer-to-peer").
    if (plan.hardware.pcie_p2p_disabled) other["intra_node_path"] = "host_memory";

    os << "{\"displayTimeUnit\": \"ms\",\n\"otherData\": " << other.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) << ",\n\"traceEvents\": [\n";
    bool first = true;
    auto emit = [&](const ordered_json& j) {
        if (!first) os << ",\n";
        first = false;
        os << j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
    };
    auto meta = [&](const char* name, int pid, int tid, ordered_json args) {
        ordered_json j;
        j["name"] = name;
        j["ph"] = "M";
        j["pid"] = pid;
        j["tid"] = tid;
        j["args"] = std::move(args);
        emit(j);
    };
    for (const auto& [rank, streams] : tracks) {
        meta("process_name", rank, 0, {{"name", fmt::format("rank {} (stage {})", rank, stage_of(rank))}});
        meta("process_sort_index", rank, 0, {{"sort_index", rank}});
        for (int s = 0; s < model::kNumStreams; ++s) {
            if (!streams[static_cast<std::size_t>(s)]) continue;
            meta("thread_name", rank, s, {{"name", model::to_string(static_cast<model::Stream>(s))}});
            meta("thread_sort_index", rank, s, {{"sort_index", s}});
        }
        // The host thread that issues the rank's ops (docs/model.md "Host").
        meta("thread_name", rank, kHostTid, {{"name", "host"}});
        meta("thread_sort_index", rank, kHostTid, {{"sort_index", -1}});
    }
    for (const auto& ev : step.trace) {
        const auto& prog = graph.stages[static_cast<std::size_t>(stage_of(ev.rank))];
        const auto& op = prog.ops[ev.op];
        const auto& p = graph.protos[op.proto];
        ordered_json j;
        j["name"] = p.name;
        j["cat"] = model::to_string(op.category);
        j["ph"] = "X";
        j["ts"] = micros(ev.start);
        j["dur"] = micros(ev.end - ev.start);
        j["pid"] = ev.rank;
        j["tid"] = static_cast<int>(ev.stream);
        j["args"] = op_args(p, op, plan.parallel.vp > 1);
        emit(j);
        if (ev.host_end > ev.host_start) {
            ordered_json h;
            h["name"] = p.name;
            h["cat"] = "host";
            h["ph"] = "X";
            h["ts"] = micros(ev.host_start);
            h["dur"] = micros(ev.host_end - ev.host_start);
            h["pid"] = ev.rank;
            h["tid"] = kHostTid;
            h["args"] = {{"kind", "host"}, {"launches", p.launches}, {"host_sync", p.host_sync}};
            emit(h);
        }
    }
    os << "\n]}\n";
}

} // namespace trainsim::sim
