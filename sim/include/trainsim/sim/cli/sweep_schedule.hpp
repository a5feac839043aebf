// The order in which `trainsim sweep` hands its searches to MPI ranks (docs/plan-search.md
// "Sweeps over MPI ranks"). Rank 0 is a dynamic work queue: a rank that finishes a search asks for
// the next one, so a rough cost estimate costs balance, never correctness. Among the searches
// close to the first one not yet written (a window of the grid's order), the one estimated
// costliest goes first (longest-processing-time first), so that a long search does not start
// last; the window keeps the results that wait for an earlier one few, since rank 0 appends cells
// to the output in the grid's order only (a kill loses those and the ones in flight).
#pragma once

#include <cstddef>
#include <optional>
#include <set>
#include <vector>

namespace trainsim::sim::cli {

// A relative estimate of one cell search's cost: the model's layers (the op graph of every
// simulated plan grows with them) times the sum over the grid's GPU counts of sqrt(count) (the
// layouts to search grow with a count's divisors, and the ranks a plan's graph holds with its
// pipeline depth). Only its order matters. It orders the two timings of issue #43 the same way
// (Llama-2-70B, 80 layers, over 8..1024 H100: 6 s; Llama-3.1-405B, 126 layers, over 1,024..16,384:
// 66 s); nothing in it is fitted.
[[nodiscard]] double sweep_search_cost(int layers, const std::vector<int>& counts);

class SweepQueue {
public:
    // `cost[i]`: task i's estimate (tasks in the grid's order); `window` >= 1.
    SweepQueue(std::vector<double> cost, std::size_t window);

    // The next task to hand out, given that every task before `first_unwritten` is written: the
    // costliest task not yet handed out among [first_unwritten, first_unwritten + window) (the
    // earliest of equal ones), else the earliest task not yet handed out (a rank never idles while
    // work is left); nullopt when every task was handed out.
    [[nodiscard]] std::optional<std::size_t> next(std::size_t first_unwritten);
    [[nodiscard]] bool empty() const { return left_.empty(); }

private:
    std::vector<double> cost_;
    std::size_t window_;
    std::set<std::size_t> left_;
};

} // namespace trainsim::sim::cli
