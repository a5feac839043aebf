// The order of a sweep's searches over MPI ranks (trainsim/sim/cli/sweep_schedule.hpp).
#include "trainsim/sim/cli/sweep_schedule.hpp"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <stdexcept>

namespace trainsim::sim::cli {

double sweep_search_cost(int layers, const std::vector<int>& counts) {
    double per_layer = 0;
    for (int n : counts) per_layer += std::sqrt(static_cast<double>(std::max(n, 1)));
    return static_cast<double>(std::max(layers, 1)) * per_layer;
}

SweepQueue::SweepQueue(std::vector<double> cost, std::size_t window) : cost_(std::move(cost)), window_(window) {
    if (window_ == 0) throw std::invalid_argument("SweepQueue: the window holds at least one task");
    for (std::size_t i = 0; i < cost_.size(); ++i) left_.insert(left_.end(), i);
}

std::optional<std::size_t> SweepQueue::next(std::size_t first_unwritten) {
    if (left_.empty()) return std::nullopt;
    const std::size_t end = first_unwritten + window_;
    auto best = left_.end();
    for (auto it = left_.lower_bound(first_unwritten); it != left_.end() && *it < end; ++it)
        if (best == left_.end() || cost_[*it] > cost_[*best]) best = it;
    if (best == left_.end()) best = left_.begin();
    const std::size_t task = *best;
    left_.erase(best);
    return task;
}

} // namespace trainsim::sim::cli
