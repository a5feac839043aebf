#include "trainsim/sim/step/periodic.hpp"

#include "trainsim/model/accounting/pipeline_schedule.hpp"
#include "trainsim/model/workload/workload.hpp"

#include <algorithm>
#include <array>
#include <cstdlib>
#include <map>
#include <string>
#include <cstdint>

namespace trainsim::sim {

std::optional<PeriodicPoints> periodic_points(const model::Plan& plan, const ExecOptions& opt) {
    if (opt.all_ranks || opt.record_trace || opt.record_passes) return std::nullopt;
    const int m = plan.grad_accum();
    const int pp = plan.parallel.pp;
    // One period: a micro-batch for 1F1B, ZB-H1 and no pipeline, whose steady state runs one
    // forward and one backward per micro-batch; the pipeline depth for the interleaved schedules
    // (micro-batches in groups of pp) and the V schedules. Past the warm-up: 1F1B warms up with
    // pp - 1 forwards, so from pp + 1 on every micro-batch is a steady one; the interleaved
    // schedule with (pp - 1) x 2 + (vp - 1) x pp chunks, under 2 pp micro-batches; DualPipeV
    // feeds both ends of the pipeline, 2 pp micro-batches at once, so from 4 pp.
    const auto schedule = model::effective_schedule(plan.parallel.pp_schedule, plan.parallel.vp);
    const bool every_microbatch =
        pp == 1 || schedule == model::PpSchedule::one_f_one_b || schedule == model::PpSchedule::zb_h1;
    const int period = every_microbatch ? 1 : pp;
    const int least = every_microbatch ? std::max(2, pp + 1)
                                       : (schedule == model::PpSchedule::dualpipe_v ? 4 : 2) * pp;
    // The least count >= `least` congruent to m modulo the period (so that m is reached).
    const int m1 = least + ((m - least) % period + period) % period;
    const PeriodicPoints pts{m1, period};
    // Worth it only if the three short steps together are at most half the step.
    if (2 * periodic_microbatches(pts) > m) return std::nullopt;
    return pts;
}

namespace {

StepResult simulate_with(const model::Plan& plan, int microbatches, const ComputeCost& compute,
                         const AnalyticNetwork& network, const ExecOptions& opt) {
    model::Plan p = plan;
    p.training.global_batch = microbatches * p.training.micro_batch * p.parallel.dp;
    const auto graph = model::build_workload(p);
    return execute_step(p, graph, compute, network, opt);
}

// c + k (c - b), where the increments a -> b and b -> c differ by at most `slack` (else false).
bool extend(std::int64_t a, std::int64_t b, std::int64_t c, std::int64_t k, std::int64_t slack, std::int64_t& out) {
    if (std::abs((c - b) - (b - a)) > slack) return false;
    out = c + k * (c - b);
    return true;
}

bool extend(Time a, Time b, Time c, std::int64_t k, Time& out) {
    std::int64_t v = 0;
    if (!extend(a.count_ps(), b.count_ps(), c.count_ps(), k, kPeriodicSlackPs, v)) return false;
    out = Time::ps(v);
    return true;
}

template <typename Count>
bool extend_count(Count a, Count b, Count c, std::int64_t k, Count& out) {
    std::int64_t v = 0;
    if (!extend(static_cast<std::int64_t>(a), static_cast<std::int64_t>(b), static_cast<std::int64_t>(c), k, 0, v))
        return false;
    out = static_cast<Count>(v);
    return true;
}

} // namespace

std::optional<StepResult> execute_step_periodic(const model::Plan& plan, const ComputeCost& compute,
                                                const AnalyticNetwork& network, const ExecOptions& opt) {
    const auto pts = periodic_points(plan, opt);
    if (!pts) return std::nullopt;
    const int m = plan.grad_accum();
    const std::array<int, 3> counts{pts->m1, pts->m1 + pts->period, pts->m1 + 2 * pts->period};
    const auto a = simulate_with(plan, counts[0], compute, network, opt);
    const auto b = simulate_with(plan, counts[1], compute, network, opt);
    const auto c = simulate_with(plan, counts[2], compute, network, opt);
    const std::int64_t k = (m - counts[2]) / pts->period;
    const std::size_t stages = c.stage_finish.size();
    if (a.critical_stage != c.critical_stage || b.critical_stage != c.critical_stage || a.stage_finish.size() != stages ||
        b.stage_finish.size() != stages || c.simulated_ranks != stages || a.simulated_ranks != stages ||
        b.simulated_ranks != stages || a.stage_host_busy.size() != stages || b.stage_host_busy.size() != stages ||
        c.stage_host_busy.size() != stages || a.stage_stream_busy.size() != stages ||
        b.stage_stream_busy.size() != stages || c.stage_stream_busy.size() != stages)
        return std::nullopt;
    // Every term of the breakdown and the step time extend by the same last increment, so the
    // breakdown still sums to the step time, as the executor's does.
    StepResult r = c;
    bool ok = extend(a.step_time, b.step_time, c.step_time, k, r.step_time) &&
              extend_count(a.ops, b.ops, c.ops, k, r.ops) &&
              extend(a.host_busy, b.host_busy, c.host_busy, k, r.host_busy);
    const auto fields = {&StepBreakdown::forward,    &StepBreakdown::backward,   &StepBreakdown::recompute,
                         &StepBreakdown::optimizer,  &StepBreakdown::tp_exposed, &StepBreakdown::cp_exposed,
                         &StepBreakdown::dp_exposed, &StepBreakdown::pp_exposed, &StepBreakdown::bubble,
                         &StepBreakdown::host_bound, &StepBreakdown::slowdown};
    for (auto f : fields) ok = ok && extend(a.breakdown.*f, b.breakdown.*f, c.breakdown.*f, k, r.breakdown.*f);
    for (std::size_t s = 0; ok && s < stages; ++s)
        ok = extend(a.stage_finish[s], b.stage_finish[s], c.stage_finish[s], k, r.stage_finish[s]) &&
             extend(a.stage_host_busy[s], b.stage_host_busy[s], c.stage_host_busy[s], k, r.stage_host_busy[s]);
    if (!ok) return std::nullopt;
    // A resource of a stage that needs more time per period than the step's period falls behind
    // a little every period, and once its lead is gone the stage waits for it: a step that repeats
    // for the three short counts and changes later. Measured: a tp1 pp2 cp2 step repeated
    // exactly for 4..22 micro-batches, then its second stage's host thread, which needed 4.532 ms
    // per period against the GPU's 4.508 ms, took over. Only steps whose every stage's host
    // thread and streams keep up are extended.
    const Time period_time = c.step_time - b.step_time;
    for (std::size_t s = 0; s < stages; ++s) {
        if (c.stage_host_busy[s] - b.stage_host_busy[s] > period_time) return std::nullopt;
        // Which transfers share a link when can shift between periods while the step repeats:
        // the streams' busy time extends by its last increment, unchecked, once within the period.
        for (std::size_t q = 0; q < model::kNumStreams; ++q) {
            const Time grew = c.stage_stream_busy[s][q] - b.stage_stream_busy[s][q];
            if (grew > period_time) return std::nullopt;
            r.stage_stream_busy[s][q] = c.stage_stream_busy[s][q] + grew * k;
        }
    }
    // The engine's event count (a diagnostic: which completions coincide can shift between
    // periods while the times repeat): extended by its mean increment, unchecked.
    r.events = c.events + static_cast<std::uint64_t>(k) * (c.events - a.events) / 2;
    // The critical rank is the first (one simulated rank per stage, by stage) that finishes last;
    // the stages' finishes grow at their own rates, so it must still be the short steps' one.
    std::size_t crit = 0;
    for (std::size_t s = 1; s < stages; ++s)
        if (r.stage_finish[s] > r.stage_finish[crit]) crit = s;
    if (static_cast<int>(crit) != c.critical_stage || r.stage_finish[crit] != r.step_time) return std::nullopt;
    // Per kernel name: which kernel ran next to which transfer (and so how the slowdown splits
    // between kernels) can shift from one period to the next while their sum repeats, so the
    // names' times extend by their mean increment over the two periods, unchecked. A report's
    // detail (validate --row); no estimate reads it. Summed and sorted as the executor does (by
    // name, then largest first), so that equal times keep its order.
    std::map<std::string, Time> ka(a.kernel_time.begin(), a.kernel_time.end()),
        kb(b.kernel_time.begin(), b.kernel_time.end()), kr;
    for (const auto& [name, tc] : c.kernel_time) {
        const auto ia = ka.find(name);
        if (ia == ka.end() || kb.find(name) == kb.end()) return std::nullopt;
        kr[name] = tc + Time::ps(k * (tc.count_ps() - ia->second.count_ps()) / 2);
    }
    r.kernel_time.assign(kr.begin(), kr.end());
    std::sort(r.kernel_time.begin(), r.kernel_time.end(), [](const auto& x, const auto& y) { return x.second > y.second; });
    return r;
}

} // namespace trainsim::sim
