// Flow-level bandwidth sharing (docs/network.md, "Contention"): concurrent flows that share a
// link split its capacity max-min fairly, computed by progressive filling (Bertsekas & Gallager,
// Data Networks, sec. 6.5.2; the same fluid model SimGrid's LMM solver implements).
//
// A flow may load a link with a weight other than 1: a ring channel is one flow whose rate is
// the progress of the whole ring, and it crosses a link once per hop routed over it; a
// collective's flow moves `weight` bytes over the link per byte of progress. Link capacity
// constrains sum(weight x rate) over the flows on it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <limits>
#include <span>
#include <vector>

namespace trainsim::sim {

struct LinkUse {
    std::uint32_t link = 0;
    double weight = 1.0;  // bytes carried on the link per byte of the flow's progress (> 0)
};

class FlowModel {
public:
    // Capacity of every link in bytes per second (> 0; links not used by any flow are ignored).
    explicit FlowModel(std::vector<double> capacity);
    // The same over a capacity table the caller keeps alive for the model's life (a topology's
    // links, shared by every collective solved on it: no copy of the table per model).
    explicit FlowModel(std::span<const double> capacity);

    // Adds a flow over `uses` (repeated links are merged, weights summed); returns its index.
    // max_rate caps the flow on its own (bytes/s); a flow with no link and no cap is unbounded.
    std::size_t add_flow(const std::vector<LinkUse>& uses, double max_rate = std::numeric_limits<double>::infinity());

    [[nodiscard]] std::size_t num_flows() const { return max_rate_.size(); }

    // Max-min fair rates (bytes/s), one per flow: no flow can get more without taking from a flow
    // that has no more. Progressive filling: every unfrozen flow's rate rises together until a
    // link fills (its flows freeze) or a flow reaches its cap.
    [[nodiscard]] std::vector<double> solve() const;

    // Flows that start together and carry `bytes[i]` each: when each finishes (seconds) when the
    // rates are re-shared every time one completes.
    [[nodiscard]] std::vector<double> finish_times(const std::vector<double>& bytes) const;

private:
    [[nodiscard]] std::vector<double> solve_active(const std::vector<bool>& active) const;

    std::vector<double> owned_;
    std::span<const double> capacity_;
    // The links the flows use, numbered densely in the order flows first name them: local_[link]
    // (kNoLink where unused; sized on the first flow) and links_[local]. Every per-link array of a
    // solve is then as long as the links in use, not the whole topology's.
    std::vector<std::uint32_t> local_;
    std::vector<std::uint32_t> links_;
    // Flows in compressed rows: flow f uses use_link_ / use_weight_ [begin_[f], begin_[f + 1]),
    // links as local indices, each link once (merged as added).
    std::vector<std::size_t> begin_{0};
    std::vector<std::uint32_t> use_link_;
    std::vector<double> use_weight_;
    std::vector<double> max_rate_;
    std::vector<std::size_t> use_at_;  // per local link: the index of its latest use (merging in add_flow)
};

} // namespace trainsim::sim
