#include "trainsim/sim/network/flow_model.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <limits>
#include <stdexcept>
#include <unordered_map>

namespace trainsim::sim {

namespace {
// Relative slack below which a link counts as full (rates are doubles from sums of products).
constexpr double kFullTolerance = 1e-9;
constexpr double kInf = std::numeric_limits<double>::infinity();
} // namespace

FlowModel::FlowModel(std::vector<double> capacity) : capacity_(std::move(capacity)) {}

std::size_t FlowModel::add_flow(const std::vector<LinkUse>& uses, double max_rate) {
    Flow f;
    f.max_rate = max_rate;
    std::unordered_map<std::uint32_t, std::size_t> at;
    for (const auto& u : uses) {
        if (u.link >= capacity_.size()) throw std::out_of_range(fmt::format("flow uses unknown link {}", u.link));
        if (!(u.weight > 0)) throw std::invalid_argument("a flow's weight on a link must be positive");
        if (!(capacity_[u.link] > 0)) throw std::invalid_argument(fmt::format("link {} has no capacity", u.link));
        auto [it, fresh] = at.emplace(u.link, f.uses.size());
        if (fresh) f.uses.push_back(u);
        else f.uses[it->second].weight += u.weight;
    }
    flows_.push_back(std::move(f));
    return flows_.size() - 1;
}

std::vector<double> FlowModel::solve() const { return solve_active(std::vector<bool>(flows_.size(), true)); }

std::vector<double> FlowModel::solve_active(const std::vector<bool>& active) const {
    const std::size_t nf = flows_.size();
    std::vector<double> rate(nf, 0.0);
    std::vector<bool> frozen(nf, true);
    // Links in use, with their remaining capacity and the summed weight of unfrozen flows on them.
    // slot[link]: the link's index in the per-link arrays below (dense: link ids are 0..n-1).
    constexpr std::size_t kNoSlot = std::numeric_limits<std::size_t>::max();
    std::vector<std::size_t> slot(capacity_.size(), kNoSlot);
    std::vector<std::uint32_t> link_ids;
    std::vector<double> remaining, weight;
    std::vector<std::size_t> live;  // unfrozen flows on the link (weight is exactly 0 when none)
    std::vector<std::vector<std::size_t>> users;
    std::size_t unfrozen = 0;
    for (std::size_t f = 0; f < nf; ++f) {
        if (!active[f]) continue;
        frozen[f] = false;
        ++unfrozen;
        for (const auto& u : flows_[f].uses) {
            auto& l = slot[u.link];
            if (l == kNoSlot) {
                l = link_ids.size();
                link_ids.push_back(u.link);
                remaining.push_back(capacity_[u.link]);
                weight.push_back(0.0);
                live.push_back(0);
                users.emplace_back();
            }
            weight[l] += u.weight;
            ++live[l];
            users[l].push_back(f);
        }
    }
    double level = 0.0;  // the common rate of every unfrozen flow
    auto freeze = [&](std::size_t f) {
        if (frozen[f]) return;
        frozen[f] = true;
        rate[f] = level;
        --unfrozen;
        for (const auto& u : flows_[f].uses) {
            const auto l = slot[u.link];
            weight[l] = --live[l] == 0 ? 0.0 : weight[l] - u.weight;
        }
    };
    while (unfrozen > 0) {
        double step = kInf;
        for (std::size_t l = 0; l < link_ids.size(); ++l)
            if (weight[l] > 0) step = std::min(step, remaining[l] / weight[l]);
        for (std::size_t f = 0; f < nf; ++f)
            if (!frozen[f]) step = std::min(step, flows_[f].max_rate - level);
        if (step == kInf) {
            // Flows on no link and without a cap: unbounded.
            level = kInf;
            for (std::size_t f = 0; f < nf; ++f) freeze(f);
            break;
        }
        step = std::max(step, 0.0);
        level += step;
        for (std::size_t l = 0; l < link_ids.size(); ++l)
            if (weight[l] > 0) remaining[l] -= step * weight[l];
        bool any = false;
        for (std::size_t l = 0; l < link_ids.size(); ++l) {
            if (weight[l] > 0 && remaining[l] <= kFullTolerance * capacity_[link_ids[l]]) {
                remaining[l] = 0.0;
                for (const auto f : users[l]) freeze(f);
                any = true;
            }
        }
        for (std::size_t f = 0; f < nf; ++f) {
            const double cap = flows_[f].max_rate;
            if (!frozen[f] && cap != kInf && cap - level <= kFullTolerance * cap) {
                freeze(f);
                any = true;
            }
        }
        if (!any) throw std::logic_error("max-min solver made no progress");
    }
    return rate;
}

std::vector<double> FlowModel::finish_times(const std::vector<double>& bytes) const {
    if (bytes.size() != flows_.size()) throw std::invalid_argument("finish_times: one size per flow");
    const std::size_t nf = flows_.size();
    std::vector<double> left = bytes, done(nf, 0.0);
    std::vector<bool> active(nf, false);
    std::size_t n_active = 0;
    for (std::size_t f = 0; f < nf; ++f) {
        if (bytes[f] > 0) {
            active[f] = true;
            ++n_active;
        }
    }
    double now = 0.0;
    while (n_active > 0) {
        const auto rate = solve_active(active);
        double dt = kInf;
        for (std::size_t f = 0; f < nf; ++f)
            if (active[f] && rate[f] > 0) dt = std::min(dt, left[f] / rate[f]);
        if (dt == kInf) throw std::logic_error("finish_times: active flows with zero rate");
        now += dt;
        for (std::size_t f = 0; f < nf; ++f) {
            if (!active[f]) continue;
            left[f] -= rate[f] * dt;
            if (left[f] <= kFullTolerance * bytes[f]) {
                active[f] = false;
                --n_active;
                done[f] = now;
            }
        }
    }
    return done;
}

} // namespace trainsim::sim
