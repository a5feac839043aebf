// Communication costs (docs/model.md, "Communication"). The analytic model of the core: per
// collective an alpha-beta cost on NCCL's ring structure, with the bus bandwidth set by the
// slowest level the group spans (NVLink / NVSwitch / PCIe inside a node, the node's NICs shared
// by all concurrently communicating groups between nodes). Calibrated collective curves from
// the profile replace the analytic ones for the (op, group size, scope) they were measured on.
#pragma once

#include "trainsim/model/scenario.hpp"
#include "trainsim/model/workload.hpp"

#include <string>

namespace trainsim::sim {

using model::Bandwidth;
using model::Bytes;
using model::Time;

// How a communication group is laid out over the nodes.
struct GroupPlacement {
    int size = 1;              // ranks in the group
    int members_per_node = 1;  // of this group on one node
    int nodes = 1;             // nodes the group spans
    int gpus_per_node = 8;
};

// Rank order of Megatron: tp innermost, then cp, dp, pp. stride = distance between members.
[[nodiscard]] GroupPlacement place_group(int stride, int size, int gpus_per_node);
// Placement of each group kind for a plan (and an op graph's HSDP shard size).
[[nodiscard]] GroupPlacement placement_of(model::Group g, const model::Plan& plan, int hsdp_shard);

struct CollectiveCost {
    Time time;
    Bandwidth busbw;        // nccl-tests bus bandwidth reached at this size
    std::string algorithm;  // "ring", "nvls", "calibrated"...
};

class AnalyticNetwork {
public:
    AnalyticNetwork(const model::HardwareProfile& hw, const model::Cluster& cluster);

    [[nodiscard]] CollectiveCost collective(model::CollectiveOp op, const GroupPlacement& g, Bytes bytes) const;
    // Point-to-point transfer between two GPUs (pipeline send/recv).
    [[nodiscard]] Time p2p(bool cross_node, Bytes bytes) const;

    // Bus bandwidth inside one node between `members` GPUs, and per group across nodes.
    [[nodiscard]] Bandwidth intra_node_busbw(model::CollectiveOp op, int members) const;
    [[nodiscard]] Bandwidth inter_node_busbw(const GroupPlacement& g) const;

private:
    const model::HardwareProfile& hw_;
    model::Cluster cluster_;
};

// nccl-tests bus-traffic factor: bytes on the busiest link per byte of buffer.
[[nodiscard]] double bus_factor(model::CollectiveOp op, int n);

} // namespace trainsim::sim
