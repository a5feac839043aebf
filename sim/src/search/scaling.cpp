#include "trainsim/sim/search/scaling.hpp"

#include "trainsim/model/accounting/layout.hpp"
#include "trainsim/sim/run/estimate.hpp"
#include "trainsim/sim/search/parallel_for.hpp"
#include "trainsim/sim/search/plan_search.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <set>
#include <thread>

namespace trainsim::sim {

namespace {

struct Job {
    std::size_t series = 0;
    std::size_t point = 0;
    model::Plan plan;
};

bool same_points(const std::vector<ScalingPoint>& a, const std::vector<ScalingPoint>& b) {
    if (a.size() != b.size()) return false;
    for (std::size_t i = 0; i < a.size(); ++i) {
        const auto& x = a[i];
        const auto& y = b[i];
        // Exact comparison on purpose: the simulation is deterministic, so equal inputs give
        // bit-identical outputs, and different inputs that happen to agree at every count
        // would draw the same line anyway.
        if (x.gpus != y.gpus || x.dp != y.dp || x.valid != y.valid || x.fits != y.fits ||
            x.memory_per_gpu_gib != y.memory_per_gpu_gib || x.step_time_s != y.step_time_s ||
            x.days_to_train != y.days_to_train || x.cost != y.cost)
            return false;
    }
    return true;
}

} // namespace

std::vector<int> default_scaling_gpu_counts() {
    std::vector<int> v;
    for (int g = 8; g <= 1024; g *= 2) v.push_back(g);
    return v;
}

std::vector<ScalingSeries> data_parallel_scaling(const std::vector<const model::Plan*>& plans,
                                                 const std::vector<int>& gpu_counts, unsigned threads) {
    std::vector<ScalingSeries> all(plans.size());
    std::vector<Job> jobs;
    for (std::size_t i = 0; i < plans.size(); ++i) {
        const model::Plan& base = *plans[i];
        const auto& q = base.parallel;
        auto& s = all[i];
        s.plans = {i};
        s.label = base.name;
        s.layout = layout_label(base, /*with_dp=*/false);
        std::set<int> counts(gpu_counts.begin(), gpu_counts.end());
        counts.insert(base.num_gpus());
        for (int g : counts) {
            const int dp = g >= 1 ? model::derive_dp(g, q.tp, q.pp, q.cp) : 0;
            if (dp == 0) continue;  // the model-parallel degrees do not divide this count
            ScalingPoint pt;
            pt.gpus = g;
            pt.dp = dp;
            model::Plan p = base;
            p.parallel.dp = pt.dp;
            // The node as the scenario has it; a count below one node uses part of one node.
            if (auto why = model::set_gpu_count(p, g); !why.empty()) {
                pt.reason = std::move(why);
                s.points.push_back(pt);
                continue;
            }
            if (const auto problems = model::check_layout(p); !problems.empty()) {
                pt.reason = problems.front().message;
                s.points.push_back(pt);
                continue;
            }
            pt.valid = true;
            s.points.push_back(pt);
            jobs.push_back({i, s.points.size() - 1, std::move(p)});
        }
    }
    if (threads == 0) threads = std::max(1u, std::thread::hardware_concurrency());
    parallel_for(jobs.size(), threads, [&](std::size_t j) {
        const auto& job = jobs[j];
        const auto e = estimate_plan(job.plan);
        auto& pt = all[job.series].points[job.point];
        pt.memory_per_gpu_gib = model::to_gib(e.memory.total());
        pt.fits = e.fits && e.step.has_value();
        pt.capacity_gib = model::to_gib(e.capacity);
        if (!pt.fits) {
            pt.reason = fmt::format("needs {:.1f} GiB per GPU, the GPU has {:.1f} GiB", pt.memory_per_gpu_gib,
                                    pt.capacity_gib);
            return;
        }
        pt.step_time_s = e.step_time_s;
        pt.tokens_per_s = e.tokens_per_s;
        pt.tokens_per_s_per_gpu = e.tokens_per_s_per_gpu;
        pt.days_to_train = e.days_to_train;
        if (e.priced) pt.cost = e.cost;
    });
    // Merge plans that draw the same line.
    std::vector<ScalingSeries> out;
    for (auto& s : all) {
        auto same = std::find_if(out.begin(), out.end(), [&](const ScalingSeries& o) {
            return o.layout == s.layout && same_points(o.points, s.points);
        });
        if (same == out.end()) {
            out.push_back(std::move(s));
            continue;
        }
        same->plans.insert(same->plans.end(), s.plans.begin(), s.plans.end());
        same->label += fmt::format(" / {}", s.label);
    }
    return out;
}

} // namespace trainsim::sim
