#include "trainsim/sim/network/flow_model.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <limits>
#include <stdexcept>

namespace trainsim::sim {

namespace {
// Relative slack below which a link counts as full (rates are doubles from sums of products).
constexpr double kFullTolerance = 1e-9;
constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr std::uint32_t kNoLink = std::numeric_limits<std::uint32_t>::max();
} // namespace

FlowModel::FlowModel(std::vector<double> capacity) : owned_(std::move(capacity)), capacity_(owned_) {}

FlowModel::FlowModel(std::span<const double> capacity) : capacity_(capacity) {}

std::size_t FlowModel::add_flow(const std::vector<LinkUse>& uses, double max_rate) {
    // Checked before anything is added, so that a refused flow leaves the model as it was.
    for (const auto& u : uses) {
        if (u.link >= capacity_.size()) throw std::out_of_range(fmt::format("flow uses unknown link {}", u.link));
        if (!(u.weight > 0)) throw std::invalid_argument("a flow's weight on a link must be positive");
        if (!(capacity_[u.link] > 0)) throw std::invalid_argument(fmt::format("link {} has no capacity", u.link));
    }
    if (local_.empty() && !uses.empty()) local_.assign(capacity_.size(), kNoLink);
    const std::size_t first = use_link_.size();
    for (const auto& u : uses) {
        auto& l = local_[u.link];
        if (l == kNoLink) {
            l = static_cast<std::uint32_t>(links_.size());
            links_.push_back(u.link);
            use_at_.push_back(0);
        }
        // A link named twice by one flow adds to its first use: use_at_[l] is where this flow
        // put it, if at or after the flow's first use and naming l.
        const std::size_t k = use_at_[l];
        if (k >= first && k < use_link_.size() && use_link_[k] == l) {
            use_weight_[k] += u.weight;
        } else {
            use_at_[l] = use_link_.size();
            use_link_.push_back(l);
            use_weight_.push_back(u.weight);
        }
    }
    begin_.push_back(use_link_.size());
    max_rate_.push_back(max_rate);
    return max_rate_.size() - 1;
}

std::vector<double> FlowModel::solve() const { return solve_active(std::vector<bool>(num_flows(), true)); }

std::vector<double> FlowModel::solve_active(const std::vector<bool>& active) const {
    const std::size_t nf = num_flows();
    std::vector<double> rate(nf, 0.0);
    std::vector<bool> frozen(nf, true);
    // Links in use by the active flows, numbered in the order those flows first name them, with
    // their remaining capacity and the summed weight of unfrozen flows on them. slot[local]: the
    // link's index in the per-link arrays below.
    std::vector<std::uint32_t> slot(links_.size(), kNoLink);
    std::vector<std::uint32_t> link_ids;  // slot -> local link
    std::vector<double> remaining, weight;
    std::vector<std::size_t> live;  // unfrozen flows on the link (weight is exactly 0 when none)
    link_ids.reserve(links_.size());
    remaining.reserve(links_.size());
    weight.reserve(links_.size());
    live.reserve(links_.size());
    std::size_t unfrozen = 0;
    for (std::size_t f = 0; f < nf; ++f) {
        if (!active[f]) continue;
        frozen[f] = false;
        ++unfrozen;
        for (std::size_t k = begin_[f]; k < begin_[f + 1]; ++k) {
            auto& l = slot[use_link_[k]];
            if (l == kNoLink) {
                l = static_cast<std::uint32_t>(link_ids.size());
                link_ids.push_back(use_link_[k]);
                remaining.push_back(capacity_[links_[use_link_[k]]]);
                weight.push_back(0.0);
                live.push_back(0);
            }
            weight[l] += use_weight_[k];
            ++live[l];
        }
    }
    // The flows on each link in flow order, as compressed rows: users [user_begin[l], user_begin[l + 1]).
    std::vector<std::size_t> user_begin(link_ids.size() + 1, 0);
    for (std::size_t l = 0; l < link_ids.size(); ++l) user_begin[l + 1] = user_begin[l] + live[l];
    std::vector<std::size_t> users(user_begin.back());
    {
        auto fill = user_begin;
        for (std::size_t f = 0; f < nf; ++f)
            if (active[f])
                for (std::size_t k = begin_[f]; k < begin_[f + 1]; ++k) users[fill[slot[use_link_[k]]]++] = f;
    }
    double level = 0.0;  // the common rate of every unfrozen flow
    auto freeze = [&](std::size_t f) {
        if (frozen[f]) return;
        frozen[f] = true;
        rate[f] = level;
        --unfrozen;
        for (std::size_t k = begin_[f]; k < begin_[f + 1]; ++k) {
            const auto l = slot[use_link_[k]];
            weight[l] = --live[l] == 0 ? 0.0 : weight[l] - use_weight_[k];
        }
    };
    while (unfrozen > 0) {
        double step = kInf;
        for (std::size_t l = 0; l < link_ids.size(); ++l)
            if (weight[l] > 0) step = std::min(step, remaining[l] / weight[l]);
        for (std::size_t f = 0; f < nf; ++f)
            if (!frozen[f]) step = std::min(step, max_rate_[f] - level);
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
            if (weight[l] > 0 && remaining[l] <= kFullTolerance * capacity_[links_[link_ids[l]]]) {
                remaining[l] = 0.0;
                for (std::size_t u = user_begin[l]; u < user_begin[l + 1]; ++u) freeze(users[u]);
                any = true;
            }
        }
        for (std::size_t f = 0; f < nf; ++f) {
            const double cap = max_rate_[f];
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
    if (bytes.size() != num_flows()) throw std::invalid_argument("finish_times: one size per flow");
    const std::size_t nf = num_flows();
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
