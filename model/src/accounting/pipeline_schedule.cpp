#include "trainsim/model/accounting/pipeline_schedule.hpp"

#include <algorithm>
#include <array>
#include <deque>
#include <limits>
#include <map>
#include <stdexcept>
#include <tuple>

namespace trainsim::model {

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
        it.pass = fwd ? PipelinePass::forward : PipelinePass::backward;
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
        if (it.pass == PipelinePass::forward) ++live;
        else if (it.pass != PipelinePass::input_grad) --live;  // a full backward or a W pass frees
        peak = std::max(peak, live);
    }
    return peak;
}

PpSchedule effective_schedule(PpSchedule s, int vp) {
    if (s != PpSchedule::automatic) return s;
    return vp > 1 ? PpSchedule::interleaved : PpSchedule::one_f_one_b;
}

bool v_shape(PpSchedule s) { return s == PpSchedule::zb_v || s == PpSchedule::dualpipe_v; }

bool splits_backward(PpSchedule s) {
    return s == PpSchedule::zb_h1 || s == PpSchedule::zb_v || s == PpSchedule::dualpipe_v;
}

int virtual_stage(PpSchedule s, int pp, int vp, int stage, int chunk) {
    if (v_shape(s)) return chunk == 0 ? stage : 2 * pp - 1 - stage;
    (void)vp;
    return chunk * pp + stage;
}

StageChunk stage_chunk(PpSchedule s, int pp, int vp, int vs) {
    (void)vp;
    if (v_shape(s)) return vs < pp ? StageChunk{vs, 0} : StageChunk{2 * pp - 1 - vs, 1};
    return {vs % pp, vs / pp};
}

namespace {

ScheduleItem make_item(PipelinePass pass, int mb, int chunk) {
    ScheduleItem it;
    it.pass = pass;
    it.forward = pass == PipelinePass::forward;
    it.microbatch = mb;
    it.chunk = chunk;
    return it;
}

// ZB-H1 (Qi et al., ICLR 2024, section 2.1, figure 3): 1F1B's warm-up and steady phase with each
// backward split into B and W, every W pass delayed so that all stages hold as many micro-batches
// as the first (`stage` W passes pending on stage `stage`): the B passes run earlier and the
// delayed W passes fill the cool-down. Peak pp micro-batches on every stage, 1F1B's first stage's.
std::vector<ScheduleItem> zb_h1_schedule(int stage, int pp, int microbatches) {
    std::vector<ScheduleItem> out;
    const int warmup = std::min(pp - stage - 1, microbatches);
    std::deque<int> pending;
    auto backward = [&](int mb) {
        out.push_back(make_item(PipelinePass::input_grad, mb, 0));
        pending.push_back(mb);
        if (static_cast<int>(pending.size()) > stage) {
            out.push_back(make_item(PipelinePass::weight_grad, pending.front(), 0));
            pending.pop_front();
        }
    };
    for (int k = 0; k < warmup; ++k) out.push_back(make_item(PipelinePass::forward, k, 0));
    for (int k = 0; k < microbatches - warmup; ++k) {
        out.push_back(make_item(PipelinePass::forward, warmup + k, 0));
        backward(k);
    }
    for (int k = microbatches - warmup; k < microbatches; ++k) backward(k);
    for (int mb : pending) out.push_back(make_item(PipelinePass::weight_grad, mb, 0));
    return out;
}

// ZB-V: the greedy V-schedule builder of the Zero Bubble repository
// (megatron/core/pipeline_parallel/zerobubble/scheduler/zbv.py, PipelineGraph.try_v_schedule and
// create_schedule), written anew. Every stage holds two chunks in a V; passes are placed stage by
// stage on a clock with per-pass costs, W passes fill the gaps a stage would otherwise wait in,
// and a stage's activations may not exceed 2 pp chunk forwards (1F1B's first stage). Costs are
// the repository's fixed setting (F = B = W = 1000, transfer 1: the runtime's schedule before its
// timers have measured the passes); memory per pass from its approximation
// (runtime.py: F +34 h, W -32 h, B the rest; the 5 a s softmax term is left out: flash attention
// keeps no score matrix).
class ZbvBuilder {
public:
    ZbvBuilder(int stages, int micro) : n_(stages), m_(micro) {}

    // Tries the four fill variants and keeps the one with the smallest largest stage bubble.
    std::vector<std::vector<std::tuple<int, int, int>>> best() {
        std::vector<std::vector<std::tuple<int, int, int>>> out;
        long long best_bubble = -1;
        for (bool fill_b : {true, false})
            for (bool fill_f : {true, false}) {
                auto r = attempt(fill_f, fill_b, {});
                if (best_bubble < 0 || r.max_bubble < best_bubble) {
                    best_bubble = r.max_bubble;
                    out = std::move(r.schedule);
                }
            }
        return out;
    }

private:
    static constexpr std::array<long long, 3> kCost{1000, 1000, 1000};
    static constexpr long long kComm = 1;
    static constexpr std::array<long long, 3> kMem{34, -2, -32};

    struct Result {
        std::vector<std::vector<std::tuple<int, int, int>>> schedule;  // (cat, chunk, micro) per stage
        std::vector<long long> stage_bubble;
        long long max_bubble = 0;
    };

    int n_, m_;

    Result attempt(bool fill_f, bool fill_b, const std::vector<long long>& approved) {
        const long long max_mem = kMem[0] * n_ * 2;
        std::vector<std::array<int, 6>> count(static_cast<std::size_t>(n_), std::array<int, 6>{});
        std::map<std::tuple<int, int, int, int>, long long> end;  // (cat, chunk, stage, micro)
        std::vector<long long> cur(static_cast<std::size_t>(n_), 0), mem(cur), bubble(cur);
        std::vector<std::deque<int>> pending_w(static_cast<std::size_t>(n_));
        Result r;
        r.schedule.resize(static_cast<std::size_t>(n_));
        long long max_approved = -1;
        for (auto a : approved) max_approved = std::max(max_approved, a);
        auto end_of = [&](int cat, int chunk, int stage, int micro) -> long long {
            auto it = end.find({cat, chunk, stage, micro});
            return it == end.end() ? -1 : it->second;
        };
        auto max_stage_bubble = [&](int stage) {
            long long b = 0;
            for (auto x : bubble) b = std::max(b, x);
            if (stage >= 0 && !approved.empty())
                b = std::max(b, max_approved - approved[static_cast<std::size_t>(stage)]);
            return b;
        };
        auto su = [](int i) { return static_cast<std::size_t>(i); };
        auto put = [&](int cat, int chunk, int stage) {
            const long long no_bubble = cur[su(stage)] + kCost[su(cat)];
            long long t = no_bubble;
            const int cnt = count[su(stage)][su(cat * 2 + chunk)];
            if (cnt >= m_) throw std::logic_error("zb-v schedule: a pass placed twice");
            if (cat < 2 && chunk == 1 && stage < n_ - 1) {
                const long long dep = end_of(cat, 1, stage + 1, cnt);
                if (dep < 0) throw std::logic_error("zb-v schedule: a pass placed before its input");
                t = std::max(t, dep + kComm + kCost[su(cat)]);
            }
            if (cat < 2 && chunk == 0 && stage > 0) {
                const long long dep = end_of(cat, 0, stage - 1, cnt);
                if (dep < 0) throw std::logic_error("zb-v schedule: a pass placed before its input");
                t = std::max(t, dep + kComm + kCost[su(cat)]);
            }
            if (count[su(stage)][0] > 0) bubble[su(stage)] += t - no_bubble;
            end[{cat, chunk, stage, cnt}] = t;
            cur[su(stage)] = t;
            mem[su(stage)] += kMem[su(cat)];
            r.schedule[su(stage)].emplace_back(cat, chunk, cnt);
            if (cat == 1) pending_w[su(stage)].push_back(chunk);
            ++count[su(stage)][su(cat * 2 + chunk)];
        };
        auto put_w = [&](int stage) {
            const int chunk = pending_w[su(stage)].front();
            pending_w[su(stage)].pop_front();
            put(2, chunk, stage);
        };
        // Fill a stage's wait for `dep_end` with W passes, then maybe one more (fill_*).
        auto fill = [&](int stage, long long dep_end, bool extra) {
            while (!pending_w[su(stage)].empty() && dep_end >= 0 && dep_end + kComm >= cur[su(stage)] + kCost[2])
                put_w(stage);
            if (!pending_w[su(stage)].empty() &&
                dep_end + kComm - cur[su(stage)] > max_stage_bubble(stage) - bubble[su(stage)] && extra)
                put_w(stage);
        };

        // Warm-up: the first chunk's forwards, then the second chunk's from the V's bottom up.
        for (int i = 0; i < n_; ++i) put(0, 0, i);
        for (int i = n_ - 1; i >= 0; --i) {
            if (i == n_ - 1) {
                put(0, 1, i);
                continue;
            }
            const long long tmp = end_of(0, 1, i + 1, 0) + kComm;
            while (mem[su(i)] + kMem[0] * (2 + i * 2) <= max_mem && cur[su(i)] + kCost[0] <= tmp &&
                   count[su(i)][0] < m_)
                for (int j = 0; j <= i; ++j) put(0, 0, j);
            put(0, 1, i);
        }
        int iter_chunk = 0;
        for (int i = 1; i < n_; ++i) {
            while (count[su(i)][0] + count[su(i)][1] < count[su(i - 1)][0] + count[su(i - 1)][1] ||
                   (count[su(i)][1] <= count[su(i - 1)][1] && count[su(i - 1)][1] < m_)) {
                for (int j = n_ - 1; j >= i; --j)
                    if (count[su(j)][su(iter_chunk)] < m_) put(0, iter_chunk, j);
                iter_chunk = 1 - iter_chunk;
            }
        }
        // Steady phase and cool-down: a B pass per stage per round, then a forward where one is ready.
        for (int round = 0; round < 2 * m_; ++round) {
            for (int i = 0; i < n_; ++i)
                while (mem[su(i)] + kMem[1] > max_mem) put_w(i);
            std::vector<int> b0, b1;
            for (int i = 0; i < n_; ++i) {
                if (count[su(i)][3] >= count[su(i)][2]) b0.push_back(i);
                else if (i == n_ - 1) b1.push_back(i);
                else if (end_of(1, 1, i + 1, count[su(i)][3]) >= 0 || count[su(i)][2] >= m_) b1.push_back(i);
                else b0.push_back(i);
            }
            std::vector<std::pair<int, int>> order;
            for (auto it = b1.rbegin(); it != b1.rend(); ++it) order.emplace_back(*it, 1);
            for (int i : b0) order.emplace_back(i, 0);
            for (auto [i, chunk] : order) {
                long long dep = -1;
                if (chunk == 1 && i < n_ - 1) dep = end_of(1, 1, i + 1, count[su(i)][3]);
                if (chunk == 0 && i > 0) dep = end_of(1, 0, i - 1, count[su(i)][2]);
                fill(i, dep, chunk == 1 || fill_b);
                put(1, chunk, i);
            }
            for (int i = 0; i < n_; ++i) {
                if (count[su(i)][1] >= m_) continue;
                int item = -1;
                if (count[su(i)][1] >= count[su(i)][0]) item = 0;
                else if (i == n_ - 1) item = 1;
                else if (end_of(0, 1, i + 1, count[su(i)][1]) >= 0) item = 1;
                else if (count[su(i)][0] < m_ && (i == 0 || end_of(0, 0, i - 1, count[su(i)][0]) >= 0)) item = 0;
                if (item < 0) continue;
                while (mem[su(i)] + kMem[0] > max_mem) put_w(i);
                long long dep = -1;
                if (item == 0 && i > 0) dep = end_of(0, 0, i - 1, count[su(i)][0]);
                if (item == 1 && i < n_ - 1) dep = end_of(0, 1, i + 1, count[su(i)][1]);
                fill(i, dep, fill_f);
                put(0, item, i);
            }
        }
        for (int i = 0; i < n_; ++i)
            while (!pending_w[su(i)].empty()) put_w(i);

        r.stage_bubble = bubble;
        r.max_bubble = max_stage_bubble(-1);
        // As the repository: retry with this attempt's bubbles as the approved ones while that helps.
        if (max_approved < 0 || r.max_bubble < max_approved) {
            auto again = attempt(fill_f, fill_b, bubble);
            if (again.max_bubble < r.max_bubble) return again;
        }
        return r;
    }
};

std::vector<ScheduleItem> zb_v_schedule(int stage, int pp, int microbatches) {
    // One build per (pp, microbatches) serves every stage: the memory model asks per stage.
    thread_local std::map<std::pair<int, int>, std::vector<std::vector<std::tuple<int, int, int>>>> cache;
    auto it = cache.find({pp, microbatches});
    if (it == cache.end()) it = cache.emplace(std::pair{pp, microbatches}, ZbvBuilder(pp, microbatches).best()).first;
    std::vector<ScheduleItem> out;
    for (auto [cat, chunk, micro] : it->second[static_cast<std::size_t>(stage)]) {
        // The builder counts backward chunks from the V's far end: its backward chunk 0 is model chunk 1.
        const int model_chunk = cat == 0 ? chunk : 1 - chunk;
        const auto pass = cat == 0 ? PipelinePass::forward : cat == 1 ? PipelinePass::input_grad : PipelinePass::weight_grad;
        out.push_back(make_item(pass, micro, model_chunk));
    }
    return out;
}

// DualPipeV for rank `rank` of `ranks` (deepseek-ai/DualPipe dualpipe/dualpipev.py, DualPipeV.step:
// steps 1-8), written anew. Phase 0 is chunk 0 (virtual stage rank), phase 1 chunk 1 (virtual
// stage 2 ranks - 1 - rank). A backward with zero bubble enabled runs its B part and queues its W
// (WeightGradStore), which a later weight chunk pops in order. Every compute waits for the
// receives posted since the previous one (_commit_and_wait_comm): `waits_input_of` marks an item that
// waits for a later item's input too.
class DualPipeV {
public:
    DualPipeV(int rank, int ranks, int micro) : r_(rank), n_(ranks), m_(micro) {}

    std::vector<ScheduleItem> build() {
        const bool last = r_ == n_ - 1;
        for (int i = 0; i < (n_ - r_ - 1) * 2; ++i) fchunk(0);
        recv_f(0);
        for (int i = 0; i < r_ + 1; ++i) {
            fchunk(0, /*recv=*/false, /*send=*/false);
            recv_f(0);
            fchunk(1, true, !last || i < r_);
            send_f(0);
        }
        for (int i = 0; i < n_ - r_ - 1; ++i) {
            bchunk(1, true);
            recv_f(1);
            wchunk();
            fchunk(1, false);
        }
        for (int i = 0; i < m_ - n_ * 2 + r_ + 1; ++i) {
            if (i == 0 && last) {
                // The code does not overlap these two chunks on the last rank.
                fchunk(0, false, false);
                send_f(1);
                bchunk(1, false, true, false);
                send_f(0);
                send_b(1);
            } else {
                fbchunk(0, 1, i != 0);
            }
            fbchunk(1, 0, true);
        }
        for (int i = 0; i < n_ - r_ - 1; ++i) {
            bchunk(1, false);
            fbchunk(1, 0, true);
        }
        const int step6 = r_ + 1;
        bool zb = false;
        for (int i = 0; i < step6; ++i) {
            if (i == step6 / 2 && r_ % 2 == 1) zb = true;
            bchunk(1, zb);
            if (i == step6 / 2 && r_ % 2 == 0) zb = true;
            bchunk(0, zb);
        }
        for (int i = 0; i < n_ - r_ - 1; ++i) {
            wchunk();
            bchunk(0, true);
        }
        for (int i = 0; i < r_ + 1; ++i) wchunk();
        if (!w_queue_.empty() || nf_[0] != m_ || nf_[1] != m_ || nb_[0] != m_ || nb_[1] != m_)
            throw std::logic_error("dualpipe-v schedule: passes left over");
        return std::move(out_);
    }

private:
    struct Posted {
        bool forward;
        int phase, nth;
    };
    int r_, n_, m_;
    std::vector<ScheduleItem> out_;
    std::array<int, 2> nf_{}, nb_{};            // computed forwards / backwards per phase
    std::array<int, 2> rf_{}, rb_{};            // receives posted per phase
    std::vector<Posted> posted_;
    std::map<std::tuple<bool, int, int>, int> waiter_;  // a pass's input already waited by item
    std::deque<std::pair<int, int>> w_queue_;   // (micro-batch, phase) of split backwards
    std::vector<int> unsent_f_[2], unsent_b_[2];

    void recv_f(int ph) { posted_.push_back({true, ph, rf_[static_cast<std::size_t>(ph)]++}); }
    void recv_b(int ph) { posted_.push_back({false, ph, rb_[static_cast<std::size_t>(ph)]++}); }
    // The compute of the item about to be appended waits for every posted receive.
    void commit() {
        const int self = static_cast<int>(out_.size());
        for (const auto& p : posted_) waiter_[{p.forward, p.phase, p.nth}] = self;
        posted_.clear();
    }
    void push(PipelinePass pass, int mb, int phase) {
        const int self = static_cast<int>(out_.size());
        out_.push_back(make_item(pass, mb, phase));
        if (pass == PipelinePass::weight_grad) return;
        const bool fwd = pass == PipelinePass::forward;
        auto it = waiter_.find({fwd, phase, mb});
        if (it == waiter_.end()) return;
        if (it->second != self) {
            auto& w = out_[static_cast<std::size_t>(it->second)];
            if (w.waits_input_of >= 0) throw std::logic_error("dualpipe-v schedule: one compute waits for two later inputs");
            w.waits_input_of = self;
        }
        waiter_.erase(it);
    }
    void fcompute(int ph) {
        push(PipelinePass::forward, nf_[static_cast<std::size_t>(ph)]++, ph);
    }
    void bcompute(int ph, bool zb) {
        const int mb = nb_[static_cast<std::size_t>(ph)]++;
        if (zb) {
            push(PipelinePass::input_grad, mb, ph);
            w_queue_.emplace_back(mb, ph);
        } else {
            push(PipelinePass::backward, mb, ph);
        }
    }
    void send_f(int ph) { (void)ph; }
    void send_b(int ph) { (void)ph; }
    void fchunk(int ph, bool recv = true, bool send = true) {
        (void)send;
        if (recv) recv_f(ph);
        commit();
        fcompute(ph);
    }
    void bchunk(int ph, bool zb, bool recv = true, bool send = true) {
        (void)send;
        if (recv) recv_b(ph);
        commit();
        bcompute(ph, zb);
    }
    void fbchunk(int ph0, int ph1, bool recv0) {
        if (recv0) recv_f(ph0);
        recv_b(ph1);
        commit();
        fcompute(ph0);
        out_.back().paired = true;
        bcompute(ph1, false);
    }
    void wchunk() {
        commit();
        auto [mb, ph] = w_queue_.front();
        w_queue_.pop_front();
        push(PipelinePass::weight_grad, mb, ph);
    }
};

} // namespace

std::vector<ScheduleItem> pipeline_schedule(PpSchedule s, int stage, int pp, int vp, int microbatches) {
    switch (effective_schedule(s, vp)) {
        case PpSchedule::zb_h1: return zb_h1_schedule(stage, pp, microbatches);
        case PpSchedule::zb_v: return zb_v_schedule(stage, pp, microbatches);
        case PpSchedule::dualpipe_v: return DualPipeV(stage, pp, microbatches).build();
        default: return pipeline_schedule(stage, pp, vp, microbatches);
    }
}

int peak_inflight_chunks(PpSchedule s, int stage, int pp, int vp, int microbatches) {
    const auto e = effective_schedule(s, vp);
    if (e == PpSchedule::one_f_one_b || e == PpSchedule::interleaved)
        return peak_inflight_chunks(stage, pp, vp, microbatches);
    return peak_inflight_chunks(pipeline_schedule(e, stage, pp, vp, microbatches));
}

ScheduleTiming time_schedule(PpSchedule s, int pp, int vp, int microbatches, double f, double b, double w) {
    const auto e = effective_schedule(s, vp);
    const int nvs = pp * vp;
    std::vector<std::vector<ScheduleItem>> progs;
    for (int st = 0; st < pp; ++st) progs.push_back(pipeline_schedule(e, st, pp, vp, microbatches));
    // Completion times: forward and backward (B or full) per (virtual stage, micro-batch).
    const double unset = -1;
    std::vector<double> f_end(static_cast<std::size_t>(nvs * microbatches), unset), b_end(f_end);
    auto at = [&](int vs, int mb) { return static_cast<std::size_t>(vs * microbatches + mb); };
    // The input a pass waits for, or -1 if it has none; `ready` false while it has not been computed.
    auto input = [&](int st, const ScheduleItem& it, bool& ready) -> double {
        const int vs = virtual_stage(e, pp, vp, st, it.chunk);
        double t = 0;
        ready = true;
        auto need = [&](double x) {
            if (x < 0) ready = false;
            t = std::max(t, x);
        };
        if (it.pass == PipelinePass::forward) {
            if (vs > 0) need(f_end[at(vs - 1, it.microbatch)]);
        } else if (it.pass == PipelinePass::weight_grad) {
            need(b_end[at(vs, it.microbatch)]);
        } else {
            need(vs < nvs - 1 ? b_end[at(vs + 1, it.microbatch)] : f_end[at(vs, it.microbatch)]);
        }
        return t;
    };
    ScheduleTiming out;
    std::vector<std::size_t> pos(static_cast<std::size_t>(pp), 0);
    std::vector<double> clock(static_cast<std::size_t>(pp), 0), work(clock);
    out.first_start.assign(static_cast<std::size_t>(pp), -1);
    for (bool progress = true; progress;) {
        progress = false;
        for (int st = 0; st < pp; ++st) {
            auto& prog = progs[static_cast<std::size_t>(st)];
            auto& p = pos[static_cast<std::size_t>(st)];
            while (p < prog.size()) {
                const auto& it = prog[p];
                bool ready = true;
                double start = std::max(clock[static_cast<std::size_t>(st)], input(st, it, ready));
                if (ready && it.waits_input_of >= 0) {
                    bool r2 = true;
                    start = std::max(start, input(st, prog[static_cast<std::size_t>(it.waits_input_of)], r2));
                    ready = r2;
                }
                if (!ready) break;
                const double cost = it.pass == PipelinePass::forward      ? f
                                    : it.pass == PipelinePass::input_grad ? b
                                    : it.pass == PipelinePass::weight_grad ? w
                                                                           : b + w;
                const double end = start + cost;
                const int vs = virtual_stage(e, pp, vp, st, it.chunk);
                if (it.pass == PipelinePass::forward) f_end[at(vs, it.microbatch)] = end;
                else if (it.pass != PipelinePass::weight_grad) b_end[at(vs, it.microbatch)] = end;
                if (out.first_start[static_cast<std::size_t>(st)] < 0) out.first_start[static_cast<std::size_t>(st)] = start;
                clock[static_cast<std::size_t>(st)] = end;
                work[static_cast<std::size_t>(st)] += cost;
                ++p;
                progress = true;
            }
        }
    }
    for (int st = 0; st < pp; ++st)
        if (pos[static_cast<std::size_t>(st)] != progs[static_cast<std::size_t>(st)].size())
            throw std::logic_error("time_schedule: the schedule deadlocks");
    out.makespan = *std::max_element(clock.begin(), clock.end());
    for (int st = 0; st < pp; ++st) {
        const auto i = static_cast<std::size_t>(st);
        out.idle.push_back(out.makespan - work[i]);
        out.last_end.push_back(clock[i]);
        out.inner_gaps.push_back(clock[i] - out.first_start[i] - work[i]);
    }
    return out;
}

} // namespace trainsim::model
