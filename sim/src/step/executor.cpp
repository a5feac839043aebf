#include "trainsim/sim/step/executor.hpp"

#include "trainsim/model/accounting/layout.hpp"
#include "trainsim/model/framework/framework_profile.hpp"
#include "trainsim/sim/engine/engine.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <limits>
#include <map>
#include <unordered_map>

namespace trainsim::sim {

using model::Category;
using model::OpKind;
using model::Stream;

namespace {

constexpr std::uint32_t kNone = std::numeric_limits<std::uint32_t>::max();

bool is_compute_kind(OpKind k) {
    return k == OpKind::gemm || k == OpKind::attention_fwd || k == OpKind::attention_bwd || k == OpKind::memory;
}

// Per-stage data shared by every rank that runs the stage's program.
struct StageStatic {
    std::array<std::vector<std::uint32_t>, model::kNumStreams> queue;  // op indices per stream, in order
    std::vector<std::uint32_t> pos_in_stream;
    std::vector<std::uint32_t> rdep_begin;  // CSR of dependents
    std::vector<std::uint32_t> rdeps;
};

struct RankState {
    int id = 0;     // global rank (Megatron order)
    int stage = 0;
    int tp_i = 0, cp_i = 0, dp_i = 0;
    // Per-op state, one record per op so the fields the executor touches together share a cache
    // line (one array per field: BM_Llama70B_1024xH100_Step 19.8 ms; one record: 17.0 ms).
    // The host thread issues the program's ops in order: op i can start on the GPU from
    // state[i].issue. Ops before host_pos have their issue times; the host stops after an op it must
    // wait for (host_wait) until that op completes. `waiting`: ready ops the host has not issued yet.
    struct OpState {
        Time start, end, issue;
        std::uint32_t deps_left = 0;
        bool completed = false;
    };
    std::vector<OpState> state;
    std::uint32_t host_pos = 0;
    std::uint32_t host_wait = kNone;
    Time host_clock;
    Time host_busy;
    std::vector<std::uint32_t> waiting;
    model::Stream last_stream = model::Stream::compute;  // stream of the op that finished last
    std::array<std::uint32_t, model::kNumStreams> head{};
    std::array<std::uint32_t, model::kNumGroups> coll_seq{};
    std::size_t done = 0;
    Time compute_free;
    int active_comm = 0;
    // The compute kernel in flight, progressed as a fluid so concurrent communication can slow it.
    std::uint32_t running = kNone;
    double work_left_ps = 0;  // at full speed
    double rate = 1.0;
    Time last_update;
    Time nominal;
    EventId completion;
    StepBreakdown bd;
    Time finish;
    std::vector<Time> proto_busy;  // compute-stream time per proto
    // Communication in flight per link domain (0: inside the node, 1: across nodes). Transfers
    // that share a domain share its bandwidth equally (processor sharing).
    struct RunningComm {
        std::uint32_t op;
        double work_left_ps;  // at the full bandwidth of the link
        EventId completion;
    };
    std::array<std::vector<RunningComm>, 2> comm_domain;
    std::array<Time, 2> comm_updated;
};

struct PendingCollective {
    int arrived = 0;
    std::vector<std::pair<int, std::uint32_t>> members;  // (rank slot, op)
};

struct PendingP2P {
    int slot = -1;
    std::uint32_t op = kNone;
};

// The executor's two kinds of event: an issued op starts (its host issue time had not come when
// it became ready), or an op completes.
struct ExecEvent {
    enum class Kind : std::uint8_t { start, complete };
    Kind kind = Kind::start;
    int slot = 0;
    std::uint32_t op = 0;
};

class Executor {
public:
    Executor(const model::Plan& plan, const model::OpGraph& graph, const ComputeCost& compute,
             const AnalyticNetwork& network, const ExecOptions& opt)
        : plan_(plan), g_(graph), net_(network), opt_(opt) {
        slowdown_rate_ = 1.0 / (1.0 + plan.hardware.comm_compute_slowdown);
        strides_ = model::rank_strides(plan.parallel);
        // Costs per proto, computed once.
        proto_time_.resize(g_.protos.size());
        proto_domain_.assign(g_.protos.size(), 0);
        for (std::size_t i = 1; i < g_.protos.size(); ++i) {
            const auto& p = g_.protos[i];
            proto_time_[i] = nominal_op_time(plan_, g_, p, compute, net_);
            if (p.kind == OpKind::collective) proto_domain_[i] = placement_of(p.group, plan_, g_.hsdp_shard).nodes > 1 ? 1 : 0;
        }
        // The host costs are the reference CPU's; the node's own CPU issues them at its speed.
        auto hc = model::host_costs(plan.parallel.host_dispatch);
        for (Time* t : {&hc.forward_launch, &hc.backward_launch, &hc.collective_call, &hc.p2p_call, &hc.plain_op})
            *t = Time::from_seconds(t->seconds() / plan.hardware.host_cpu_speed);
        host_cost_.assign(2 * g_.protos.size(), Time());
        for (std::size_t i = 1; i < g_.protos.size(); ++i) {
            const auto& p = g_.protos[i];
            const bool comm = !is_compute_kind(p.kind);
            const auto calls = static_cast<std::int64_t>(std::max(1, p.launches));
            if (comm) {
                const Time call = p.kind == OpKind::collective ? hc.collective_call : hc.p2p_call;
                host_cost_[2 * i] = host_cost_[2 * i + 1] = call * calls;
            } else {
                const auto n = static_cast<std::int64_t>(std::max(0, p.launches));
                host_cost_[2 * i] = (p.plain_ops ? hc.plain_op : hc.forward_launch) * n;
                host_cost_[2 * i + 1] = (p.plain_ops ? hc.plain_op : hc.backward_launch) * n;
            }
        }
        for (const auto& st : g_.stages) stages_.push_back(make_static(st));
        make_ranks();
    }

    StepResult run() {
        for (std::size_t slot = 0; slot < ranks_.size(); ++slot) advance_host(static_cast<int>(slot));
        for (std::size_t slot = 0; slot < ranks_.size(); ++slot) {
            auto& r = ranks_[slot];
            const auto& ss = stages_[static_cast<std::size_t>(r.stage)];
            for (int s = 0; s < model::kNumStreams; ++s) {
                const auto& q = ss.queue[static_cast<std::size_t>(s)];
                if (!q.empty() && r.state[q.front()].deps_left == 0) try_start(static_cast<int>(slot), q.front());
            }
        }
        StepResult res;
        res.events = engine_.run([this](const ExecEvent& e) {
            if (e.kind == ExecEvent::Kind::complete)
                complete(e.slot, e.op);
            else
                start_issued(e.slot, e.op);
        });
        check_finished();
        for (auto& r : ranks_) account_tail(r);
        res.simulated_ranks = ranks_.size();
        res.ops = g_.op_count();
        res.stage_finish.assign(static_cast<std::size_t>(g_.pp), Time());
        res.stage_host_busy.assign(static_cast<std::size_t>(g_.pp), Time());
        res.stage_stream_busy.assign(static_cast<std::size_t>(g_.pp), {});
        const RankState* crit = &ranks_.front();
        for (const auto& r : ranks_) {
            auto& sf = res.stage_finish[static_cast<std::size_t>(r.stage)];
            sf = model::max(sf, r.finish);
            auto& hb = res.stage_host_busy[static_cast<std::size_t>(r.stage)];
            hb = model::max(hb, r.host_busy);
            std::array<Time, model::kNumStreams> busy{};
            const auto& prog = g_.stages[static_cast<std::size_t>(r.stage)];
            for (std::uint32_t i = 0; i < prog.ops.size(); ++i)
                busy[static_cast<std::size_t>(prog.ops[i].stream)] += r.state[i].end - r.state[i].start;
            auto& sb = res.stage_stream_busy[static_cast<std::size_t>(r.stage)];
            for (std::size_t k = 0; k < busy.size(); ++k) sb[k] = model::max(sb[k], busy[k]);
            if (r.finish > crit->finish) crit = &r;
        }
        res.step_time = crit->finish;
        res.critical_stage = crit->stage;
        res.breakdown = crit->bd;
        res.host_busy = crit->host_busy;
        std::map<std::string, Time> by_name;
        for (std::size_t i = 1; i < g_.protos.size(); ++i)
            if (crit->proto_busy[i] > Time()) by_name[g_.protos[i].name] += crit->proto_busy[i];
        res.kernel_time.assign(by_name.begin(), by_name.end());
        std::sort(res.kernel_time.begin(), res.kernel_time.end(),
                  [](const auto& a, const auto& b) { return a.second > b.second; });
        if (opt_.record_passes) record_passes(res);
        if (opt_.record_trace) {
            for (std::size_t slot = 0; slot < ranks_.size(); ++slot) {
                const auto& r = ranks_[slot];
                const auto& prog = g_.stages[static_cast<std::size_t>(r.stage)];
                for (std::uint32_t i = 0; i < prog.ops.size(); ++i) {
                    const Time h = host_cost(prog.ops[i]);
                    res.trace.push_back(
                        {r.id, prog.ops[i].stream, i, r.state[i].start, r.state[i].end, r.state[i].issue - h, r.state[i].issue});
                }
            }
        }
        return res;
    }

private:
    // Each schedule item's span on the compute stream of the first simulated rank of each stage:
    // the builder emits an item's kernels together, in program order, so a run of consecutive
    // compute kernels with the same (pass, micro-batch, chunk) is one item (PassSpan).
    void record_passes(StepResult& res) const {
        std::vector<bool> seen(g_.stages.size(), false);
        for (const auto& r : ranks_) {
            const auto stage = static_cast<std::size_t>(r.stage);
            if (seen[stage]) continue;
            seen[stage] = true;
            const auto& prog = g_.stages[stage];
            const std::size_t first = res.passes.size();
            for (std::uint32_t i = 0; i < prog.ops.size(); ++i) {
                const auto& op = prog.ops[i];
                if (op.stream != model::Stream::compute ||
                    g_.protos[op.proto].kind == model::OpKind::collective ||
                    (op.category != model::Category::forward && op.category != model::Category::backward &&
                     op.category != model::Category::recompute))
                    continue;
                const auto& t = r.state[i];
                if (res.passes.size() > first) {
                    auto& last = res.passes.back();
                    if (last.pass == op.pass && last.microbatch == op.microbatch && last.chunk == op.chunk) {
                        last.start = std::min(last.start, t.start);
                        last.end = std::max(last.end, t.end);
                        continue;
                    }
                }
                res.passes.push_back({r.stage, op.pass, op.microbatch, op.chunk, t.start, t.end});
            }
        }
        std::stable_sort(res.passes.begin(), res.passes.end(),
                         [](const PassSpan& a, const PassSpan& b) { return a.stage < b.stage; });
    }

    static StageStatic make_static(const model::StageProgram& prog) {
        StageStatic s;
        const auto n = static_cast<std::uint32_t>(prog.ops.size());
        s.pos_in_stream.resize(n);
        std::vector<std::uint32_t> count(n + 1, 0);
        for (std::uint32_t i = 0; i < n; ++i) {
            const auto& op = prog.ops[i];
            auto& q = s.queue[static_cast<std::size_t>(op.stream)];
            s.pos_in_stream[i] = static_cast<std::uint32_t>(q.size());
            q.push_back(i);
            for (std::uint32_t d = 0; d < op.dep_count; ++d) ++count[prog.deps[op.dep_begin + d] + 1];
        }
        for (std::uint32_t i = 0; i < n; ++i) count[i + 1] += count[i];
        s.rdep_begin = count;
        s.rdeps.resize(count[n]);
        auto fill = count;
        for (std::uint32_t i = 0; i < n; ++i) {
            const auto& op = prog.ops[i];
            for (std::uint32_t d = 0; d < op.dep_count; ++d) s.rdeps[fill[prog.deps[op.dep_begin + d]]++] = i;
        }
        return s;
    }

    void make_ranks() {
        const int tp = g_.tp, cp = g_.cp, dp = g_.dp, pp = g_.pp;
        auto add = [&](int tp_i, int cp_i, int dp_i, int stage) {
            RankState r;
            r.tp_i = tp_i;
            r.cp_i = cp_i;
            r.dp_i = dp_i;
            r.stage = stage;
            r.id = tp_i * strides_.tp + cp_i * strides_.cp + dp_i * strides_.dp + stage * strides_.pp;
            const auto& prog = g_.stages[static_cast<std::size_t>(stage)];
            r.state.resize(prog.ops.size());
            for (std::size_t i = 0; i < prog.ops.size(); ++i) r.state[i].deps_left = prog.ops[i].dep_count;
            r.proto_busy.assign(g_.protos.size(), Time());
            ranks_.push_back(std::move(r));
        };
        if (opt_.all_ranks) {
            for (int s = 0; s < pp; ++s)
                for (int d = 0; d < dp; ++d)
                    for (int c = 0; c < cp; ++c)
                        for (int t = 0; t < tp; ++t) add(t, c, d, s);
        } else {
            for (int s = 0; s < pp; ++s) add(0, 0, 0, s);
        }
    }

    [[nodiscard]] const model::StageProgram& prog_of(const RankState& r) const {
        return g_.stages[static_cast<std::size_t>(r.stage)];
    }

    // ---- group bookkeeping (full mode) ----
    [[nodiscard]] std::pair<std::uint64_t, int> group_key(const RankState& r, model::Group grp) const {
        const std::uint64_t tp = static_cast<std::uint64_t>(g_.tp), cp = static_cast<std::uint64_t>(g_.cp);
        const std::uint64_t dp = static_cast<std::uint64_t>(g_.dp);
        const std::uint64_t ti = static_cast<std::uint64_t>(r.tp_i), ci = static_cast<std::uint64_t>(r.cp_i);
        const std::uint64_t di = static_cast<std::uint64_t>(r.dp_i), si = static_cast<std::uint64_t>(r.stage);
        const std::uint64_t q = ci + cp * di;  // flattened data-parallel x context-parallel index
        const std::uint64_t shard = static_cast<std::uint64_t>(g_.hsdp_shard);
        switch (grp) {
        case model::Group::tp: return {ci + cp * (di + dp * si), g_.tp};
        case model::Group::cp: return {ti + tp * (di + dp * si), g_.cp};
        case model::Group::dp_cp: return {ti + tp * si, g_.cp * g_.dp};
        case model::Group::dp_shard: return {(ti + tp * si) * 4096 + q / shard, g_.hsdp_shard};
        case model::Group::dp_replica:
            return {(ti + tp * si) * 4096 + q % shard, g_.cp * g_.dp / g_.hsdp_shard};
        case model::Group::pp: return {ti + tp * (ci + cp * di), g_.pp};
        }
        return {0, 1};
    }

    // ---- the host thread ----
    [[nodiscard]] Time host_cost(const model::Op& o) const {
        return host_cost_[2 * o.proto + (o.category == Category::backward ? 1 : 0)];
    }
    // Issues ops in program order from the host's clock until one the host must wait for.
    void advance_host(int slot) {
        auto& r = ranks_[static_cast<std::size_t>(slot)];
        const auto& prog = prog_of(r);
        const auto n = static_cast<std::uint32_t>(prog.ops.size());
        while (r.host_pos < n && r.host_wait == kNone) {
            const auto& o = prog.ops[r.host_pos];
            const Time c = host_cost(o);
            r.host_clock += c;
            r.host_busy += c;
            r.state[r.host_pos].issue = r.host_clock;
            if (g_.protos[o.proto].host_sync) r.host_wait = r.host_pos;
            ++r.host_pos;
        }
        if (r.waiting.empty()) return;
        auto ready = std::move(r.waiting);
        r.waiting.clear();
        for (const auto op : ready) try_start(slot, op);
    }
    // The op the host waited for is done: it goes on from now.
    void host_resume(int slot, std::uint32_t op) {
        auto& r = ranks_[static_cast<std::size_t>(slot)];
        if (r.host_wait != op) return;
        r.host_wait = kNone;
        r.host_clock = model::max(r.host_clock, engine_.now());
        advance_host(slot);
    }

    // ---- starting ops ----
    // Starts a ready op (its dependencies done, first in its stream) once the host has issued it.
    void try_start(int slot, std::uint32_t op) {
        auto& r = ranks_[static_cast<std::size_t>(slot)];
        if (op >= r.host_pos) {
            r.waiting.push_back(op);
            return;
        }
        if (r.state[op].issue > engine_.now()) {
            engine_.schedule_at(r.state[op].issue, ExecEvent{ExecEvent::Kind::start, slot, op});
            return;
        }
        start_issued(slot, op);
    }
    void start_issued(int slot, std::uint32_t op) {
        auto& r = ranks_[static_cast<std::size_t>(slot)];
        const auto& o = prog_of(r).ops[op];
        const auto& p = g_.protos[o.proto];
        if (is_compute_kind(p.kind)) {
            start_compute(slot, op);
        } else if (p.kind == OpKind::collective) {
            arrive(slot, op, p.group);
        } else {
            post_p2p(slot, op, p.kind == OpKind::send);
        }
    }

    // Accounts the idle gap before a compute-stream op to what it waited for.
    void account_gap(RankState& r, std::uint32_t op) {
        const Time now = engine_.now();
        if (now <= r.compute_free) return;
        const auto& prog = prog_of(r);
        const auto& o = prog.ops[op];
        std::uint32_t blocker = kNone;
        Time latest;
        for (std::uint32_t d = 0; d < o.dep_count; ++d) {
            const auto dep = prog.deps[o.dep_begin + d];
            if (blocker == kNone || r.state[dep].end > latest) {
                latest = r.state[dep].end;
                blocker = dep;
            }
        }
        // The GPU was ready (idle, the op's inputs done) before the host issued the op: that
        // wait is host-bound; what came before it is accounted to what the op waited for.
        const Time ready = model::max(r.compute_free, blocker == kNone ? r.compute_free : latest);
        const Time host = model::max(model::min(now, r.state[op].issue) - ready, Time());
        r.bd.host_bound += host;
        const Time gap = now - r.compute_free - host;
        if (gap <= Time()) return;
        Time* bucket = &r.bd.bubble;
        if (blocker != kNone) {
            switch (prog.ops[blocker].stream) {
            case Stream::tp_comm: bucket = &r.bd.tp_exposed; break;
            case Stream::cp_comm: bucket = &r.bd.cp_exposed; break;
            case Stream::dp_gather:
            case Stream::dp_reduce: bucket = &r.bd.dp_exposed; break;
            case Stream::pp_recv_fwd:
            case Stream::pp_recv_bwd: {
                // The transfer itself is pipeline communication; waiting before it began is bubble.
                const Time transfer = r.state[blocker].end - model::max(r.state[blocker].start, r.compute_free);
                const Time pp = model::min(gap, model::max(transfer, Time()));
                r.bd.pp_exposed += pp;
                r.bd.bubble += gap - pp;
                return;
            }
            default: break;
            }
        }
        *bucket += gap;
    }

    // Time after the compute stream's last kernel until the rank's last op (a pipeline send
    // waiting for its receiver, a trailing collective) belongs to what that op was.
    static void account_tail(RankState& r) {
        if (r.finish <= r.compute_free) return;
        const Time tail = r.finish - r.compute_free;
        switch (r.last_stream) {
        case Stream::tp_comm: r.bd.tp_exposed += tail; break;
        case Stream::cp_comm: r.bd.cp_exposed += tail; break;
        case Stream::dp_gather:
        case Stream::dp_reduce: r.bd.dp_exposed += tail; break;
        default: r.bd.pp_exposed += tail; break;
        }
    }

    void start_compute(int slot, std::uint32_t op) {
        auto& r = ranks_[static_cast<std::size_t>(slot)];
        account_gap(r, op);
        const auto& o = prog_of(r).ops[op];
        const Time now = engine_.now();
        r.state[op].start = now;
        r.running = op;
        r.nominal = proto_time_[o.proto];
        r.work_left_ps = static_cast<double>(r.nominal.count_ps());
        r.rate = r.active_comm > 0 ? slowdown_rate_ : 1.0;
        r.last_update = now;
        schedule_compute_end(slot);
    }

    void schedule_compute_end(int slot) {
        auto& r = ranks_[static_cast<std::size_t>(slot)];
        const auto left = static_cast<std::int64_t>(r.work_left_ps / r.rate + 0.5);
        const std::uint32_t op = r.running;
        r.completion = engine_.schedule_after(Time::ps(left), ExecEvent{ExecEvent::Kind::complete, slot, op});
    }

    // Communication started or ended on this rank: re-rate the running compute kernel.
    void comm_changed(int slot, int delta) {
        auto& r = ranks_[static_cast<std::size_t>(slot)];
        const bool was = r.active_comm > 0;
        r.active_comm += delta;
        const bool is = r.active_comm > 0;
        if (was == is || r.running == kNone || slowdown_rate_ == 1.0) return;
        const Time now = engine_.now();
        r.work_left_ps -= static_cast<double>((now - r.last_update).count_ps()) * r.rate;
        r.work_left_ps = std::max(r.work_left_ps, 0.0);
        r.last_update = now;
        r.rate = is ? slowdown_rate_ : 1.0;
        engine_.cancel(r.completion);
        schedule_compute_end(slot);
    }

    void arrive(int slot, std::uint32_t op, model::Group grp) {
        auto& r = ranks_[static_cast<std::size_t>(slot)];
        const auto seq = r.coll_seq[static_cast<std::size_t>(grp)]++;
        if (!opt_.all_ranks) {
            start_comm(slot, op);
            return;
        }
        const auto [gidx, size] = group_key(r, grp);
        if (size <= 1) {
            start_comm(slot, op);
            return;
        }
        const std::uint64_t key = (gidx * model::kNumGroups + static_cast<std::uint64_t>(grp)) * (1ull << 24) + seq;
        auto& pend = collectives_[key];
        pend.members.emplace_back(slot, op);
        if (++pend.arrived < size) return;
        auto members = std::move(pend.members);
        collectives_.erase(key);
        for (auto [s, o] : members) start_comm(s, o);
    }

    void post_p2p(int slot, std::uint32_t op, bool is_send) {
        auto& r = ranks_[static_cast<std::size_t>(slot)];
        const auto& o = prog_of(r).ops[op];
        const int peer_id = r.tp_i * strides_.tp + r.cp_i * strides_.cp + r.dp_i * strides_.dp + o.peer_stage * strides_.pp;
        const int peer_global = opt_.all_ranks ? peer_id : o.peer_stage;
        const int self_global = opt_.all_ranks ? r.id : r.stage;
        const int src = is_send ? self_global : peer_global;
        const int dst = is_send ? peer_global : self_global;
        const std::uint64_t key =
            ((static_cast<std::uint64_t>(src) << 20 | static_cast<std::uint64_t>(dst)) << 24) | o.tag;
        auto it = p2p_.find(key);
        if (it == p2p_.end()) {
            p2p_.emplace(key, PendingP2P{slot, op});
            return;
        }
        const PendingP2P other = it->second;
        p2p_.erase(it);
        const int gpn = plan_.cluster.gpus_per_node;
        const bool cross = (r.id / gpn) != (peer_id / gpn);
        const auto& proto = g_.protos[o.proto];
        const Time dur = net_.p2p(cross, proto.bytes);
        start_comm(slot, op, dur, cross ? 1 : 0);
        start_comm(other.slot, other.op, dur, cross ? 1 : 0);
    }

    void start_comm(int slot, std::uint32_t op, Time dur_override = Time::ps(-1), int domain = -1) {
        auto& r = ranks_[static_cast<std::size_t>(slot)];
        const auto& o = prog_of(r).ops[op];
        const Time dur = dur_override >= Time() ? dur_override : proto_time_[o.proto];
        if (o.stream == Stream::compute) {
            account_gap(r, op);  // blocks the compute stream; a collective is not slowed
        } else {
            comm_changed(slot, +1);
        }
        r.state[op].start = engine_.now();
        const auto d = static_cast<std::size_t>(domain >= 0 ? domain : proto_domain_[o.proto]);
        settle_domain(r, d);
        r.comm_domain[d].push_back({op, static_cast<double>(dur.count_ps()), EventId{}});
        reschedule_domain(slot, d);
    }

    // Progress every transfer of a domain up to now at the rate it had (1/k of the link each).
    void settle_domain(RankState& r, std::size_t d) {
        auto& run = r.comm_domain[d];
        const Time now = engine_.now();
        if (!run.empty()) {
            const double done = static_cast<double>((now - r.comm_updated[d]).count_ps()) / static_cast<double>(run.size());
            for (auto& c : run) c.work_left_ps = std::max(0.0, c.work_left_ps - done);
        }
        r.comm_updated[d] = now;
    }

    void reschedule_domain(int slot, std::size_t d) {
        auto& r = ranks_[static_cast<std::size_t>(slot)];
        auto& run = r.comm_domain[d];
        const double k = static_cast<double>(run.size());
        for (auto& c : run) {
            engine_.cancel(c.completion);
            const auto left = static_cast<std::int64_t>(c.work_left_ps * k + 0.5);
            const std::uint32_t op = c.op;
            c.completion = engine_.schedule_after(Time::ps(left), ExecEvent{ExecEvent::Kind::complete, slot, op});
        }
    }

    // A transfer finished: the others of its domain speed up.
    void leave_domain(int slot, std::uint32_t op) {
        auto& r = ranks_[static_cast<std::size_t>(slot)];
        for (std::size_t d = 0; d < r.comm_domain.size(); ++d) {
            auto& run = r.comm_domain[d];
            auto it = std::find_if(run.begin(), run.end(), [op](const RankState::RunningComm& c) { return c.op == op; });
            if (it == run.end()) continue;
            settle_domain(r, d);
            run.erase(it);
            reschedule_domain(slot, d);
            return;
        }
    }

    void complete(int slot, std::uint32_t op) {
        auto& r = ranks_[static_cast<std::size_t>(slot)];
        const auto& prog = prog_of(r);
        const auto& o = prog.ops[op];
        const Time now = engine_.now();
        if (r.state[op].completed) {
            throw InternalError(fmt::format("op {} '{}' of rank {} completed twice", op, g_.protos[o.proto].name, r.id));
        }
        r.state[op].completed = true;
        r.state[op].end = now;
        if (now >= r.finish) {
            r.finish = now;
            r.last_stream = o.stream;
        }
        ++r.done;
        if (o.stream == Stream::compute) {
            const Time took = now - r.state[op].start;
            r.proto_busy[o.proto] += took;
            const auto& p = g_.protos[o.proto];
            if (is_compute_kind(p.kind)) {
                if (took > r.nominal) r.bd.slowdown += took - r.nominal;
                switch (o.category) {
                case Category::forward: r.bd.forward += took; break;
                case Category::backward: r.bd.backward += took; break;
                case Category::recompute: r.bd.recompute += took; break;
                case Category::optimizer: r.bd.optimizer += took; break;
                default: r.bd.forward += took; break;
                }
            } else {
                // A blocking collective on the compute stream: a TP collective, or the TP
                // all-gather that reassembles a scattered pipeline activation.
                if (o.category == Category::pp_comm)
                    r.bd.pp_exposed += took;
                else
                    r.bd.tp_exposed += took;
                leave_domain(slot, op);
            }
            r.compute_free = now;
            r.running = kNone;
        } else {
            comm_changed(slot, -1);
            leave_domain(slot, op);
        }
        if (r.host_wait == op) host_resume(slot, op);
        const auto& ss = stages_[static_cast<std::size_t>(r.stage)];
        for (auto i = ss.rdep_begin[op]; i < ss.rdep_begin[op + 1]; ++i) {
            const auto d = ss.rdeps[i];
            if (--r.state[d].deps_left == 0) {
                const auto ds = static_cast<std::size_t>(prog.ops[d].stream);
                if (ss.pos_in_stream[d] == r.head[ds]) try_start(slot, d);
            }
        }
        const auto s = static_cast<std::size_t>(o.stream);
        const auto next = ++r.head[s];
        if (next < ss.queue[s].size()) {
            const auto n = ss.queue[s][next];
            if (r.state[n].deps_left == 0) try_start(slot, n);
        }
    }

    void check_finished() const {
        std::string msg;
        int stuck = 0;
        for (const auto& r : ranks_) {
            const auto& prog = prog_of(r);
            if (r.done == prog.ops.size()) continue;
            ++stuck;
            if (stuck > 4) continue;
            msg += fmt::format("\n  rank {} (stage {}): {} of {} ops done; waiting:", r.id, r.stage, r.done,
                               prog.ops.size());
            const auto& ss = stages_[static_cast<std::size_t>(r.stage)];
            for (int s = 0; s < model::kNumStreams; ++s) {
                const auto h = r.head[static_cast<std::size_t>(s)];
                if (h >= ss.queue[static_cast<std::size_t>(s)].size()) continue;
                const auto op = ss.queue[static_cast<std::size_t>(s)][h];
                const auto& o = prog.ops[op];
                msg += fmt::format(" [{}: op {} '{}' mb {} chunk {}, {} deps left]", model::to_string(o.stream), op,
                                   g_.protos[o.proto].name, o.microbatch, o.chunk, r.state[op].deps_left);
            }
        }
        if (stuck > 0) {
            throw SimulationStuck(fmt::format("simulation ended with work left on {} rank(s); {} collective(s) and {} "
                                              "transfer(s) never matched:{}",
                                              stuck, collectives_.size(), p2p_.size(), msg));
        }
    }

    const model::Plan& plan_;
    const model::OpGraph& g_;
    const AnalyticNetwork& net_;
    ExecOptions opt_;
    double slowdown_rate_ = 1.0;
    EventQueue<ExecEvent> engine_;
    model::RankStrides strides_;
    std::vector<Time> proto_time_;
    std::vector<std::uint8_t> proto_domain_;  // link domain of each collective proto
    std::vector<Time> host_cost_;             // [2 * proto + backward]: host time to issue one op
    std::vector<StageStatic> stages_;
    std::vector<RankState> ranks_;
    std::unordered_map<std::uint64_t, PendingCollective> collectives_;
    std::unordered_map<std::uint64_t, PendingP2P> p2p_;
};

} // namespace

Time nominal_op_time(const model::Plan& plan, const model::OpGraph& graph, const model::OpProto& proto,
                     const ComputeCost& compute, const AnalyticNetwork& network) {
    if (is_compute_kind(proto.kind)) return compute.cost(proto);
    if (proto.kind != OpKind::collective) return Time();
    const auto placement = placement_of(proto.group, plan, graph.hsdp_shard);
    return network.collective(proto.collective, placement, proto.bytes).time + compute.slice_copies(proto);
}

StepResult execute_step(const model::Plan& plan, const model::OpGraph& graph, const ComputeCost& compute,
                        const AnalyticNetwork& network, const ExecOptions& opt) {
    Executor ex(plan, graph, compute, network, opt);
    return ex.run();
}

} // namespace trainsim::sim
