// Communication costs (docs/network.md). The analytic network model: each collective's time is
// computed once, before the step is simulated, from the cluster topology (topology.hpp) and
// NCCL's algorithms on it (collectives.hpp), with every group of the same kind communicating at
// once and sharing NICs, PCIe and the fat tree (flow_model.hpp). Calibrated collective curves
// from the profile replace the analytic ones for the (op, group size, scope) they were measured
// on; the topology model covers everything else (larger groups, other layouts).
#pragma once

#include "trainsim/model/core/scenario.hpp"
#include "trainsim/model/workload/workload.hpp"
#include "trainsim/sim/network/collectives.hpp"
#include "trainsim/sim/network/topology.hpp"

#include <memory>
#include <string>

namespace trainsim::sim {

using model::Bandwidth;
using model::Bytes;
using model::Time;

// Rank order of Megatron: tp innermost, then cp, dp, pp. stride = distance between members.
[[nodiscard]] GroupPlacement place_group(int stride, int size, int gpus_per_node);
// Placement of each group kind for a plan (and an op graph's HSDP shard size).
[[nodiscard]] GroupPlacement placement_of(model::Group g, const model::Plan& plan, int hsdp_shard);

struct CollectiveCost {
    Time time;
    Bandwidth busbw;        // nccl-tests bus bandwidth reached at this size (bus bytes / time)
    std::string algorithm;  // "ring", "tree", "nvls", "nvls_tree", "direct", "calibrated", "measured", "none"
    std::string protocol;   // "LL", "LL128", "Simple"; empty for calibrated / measured curves
};

class AnalyticNetwork {
public:
    // Builds the topology. Throws NetworkError when the cluster cannot be built.
    AnalyticNetwork(const model::HardwareProfile& hw, const model::Cluster& cluster,
                    const TopologyOptions& options = {});
    ~AnalyticNetwork();
    AnalyticNetwork(AnalyticNetwork&&) noexcept;
    AnalyticNetwork& operator=(AnalyticNetwork&&) = delete;
    AnalyticNetwork(const AnalyticNetwork&) = delete;
    AnalyticNetwork& operator=(const AnalyticNetwork&) = delete;

    // One collective of `bytes` (nccl-tests buffer size) over a group laid out as `g`, while
    // every group of that kind runs the same collective.
    [[nodiscard]] CollectiveCost collective(model::CollectiveOp op, const GroupPlacement& g, Bytes bytes) const;
    // Point-to-point transfer between two GPUs (pipeline send/recv).
    [[nodiscard]] Time p2p(bool cross_node, Bytes bytes) const;

    [[nodiscard]] const Topology& topology() const { return *topo_; }
    [[nodiscard]] const CollectiveModel& collectives() const { return *model_; }

private:
    // Measured over modelled time at each measured size of one (op, group size, scope).
    struct RatioCurve {
        std::string op;
        model::CollectiveOp kind{};
        int group = 0;
        bool intra = true;
        std::vector<std::pair<double, double>> points;  // (bytes, ratio), by size
    };
    void build_ratio_curves();
    [[nodiscard]] double measured_ratio(model::CollectiveOp op, const GroupPlacement& g, Bytes bytes) const;

    const model::HardwareProfile& hw_;
    model::Cluster cluster_;
    std::unique_ptr<Topology> topo_;
    std::unique_ptr<CollectiveModel> model_;
    std::vector<RatioCurve> ratio_curves_;
};

} // namespace trainsim::sim
