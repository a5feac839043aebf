// NCCL's collective algorithms mapped onto the cluster topology (docs/network.md,
// "Collectives"). For one collective over one kind of group (TP, DP, ...), every group of that
// kind is assumed to communicate at once (symmetric ranks run the same phase together), so they
// share NICs, PCIe and the fat tree: the bandwidth of each algorithm is the max-min fair rate of
// its flows among all those groups (flow_model.hpp), solved once per (op, algorithm, layout) and
// cached. Latency and protocol choice follow NCCL's tuning model (src/graph/tuning.cc):
// time = base latency + steps x per-step latency + bytes / (bus bandwidth x protocol factor),
// minimised over the algorithms and protocols NCCL would consider.
#pragma once

#include "trainsim/model/core/scenario.hpp"
#include "trainsim/model/workload/workload.hpp"

#include <cstdint>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

namespace trainsim::sim {

using model::Bandwidth;
using model::Bytes;
using model::Time;

class Topology;

// How a communication group is laid out over the nodes.
struct GroupPlacement {
    int size = 1;              // ranks in the group
    int members_per_node = 1;  // of this group on one node
    int nodes = 1;             // nodes the group spans
    int gpus_per_node = 8;
    // Rank distance between consecutive members (Megatron order: global rank = member's offset
    // + j x stride). 0 = not known: members spread evenly, gpus_per_node / members_per_node apart.
    int stride = 0;
};

// nccl-tests bus-traffic factor: bytes on the busiest link per byte of buffer.
[[nodiscard]] double bus_factor(model::CollectiveOp op, int n);

// NCCL's algorithms (tree and ring for all-reduce; NVLS = NVLink SHARP in the NVSwitch; NVLS
// tree = NVLS inside nodes + tree between them) and "direct" for all-to-all and send/recv, which
// NCCL runs as grouped point-to-point transfers.
enum class Algorithm : std::uint8_t { ring, tree, nvls, nvls_tree, direct };
inline constexpr int kNumAlgorithms = 5;
// NCCL's protocols: LL (8-byte lines with 4 bytes of flag), LL128 (120 of 128 bytes payload),
// Simple (bulk with fences; full bandwidth, highest latency).
enum class Protocol : std::uint8_t { ll, ll128, simple };

[[nodiscard]] std::string to_string(Algorithm a);
[[nodiscard]] std::string to_string(Protocol p);
// "ring", "tree", "nvls", "nvls_tree", "direct"; nothing for anything else.
[[nodiscard]] std::optional<Algorithm> parse_algorithm(const std::string& s);

struct AlgorithmCost {
    Algorithm algorithm = Algorithm::ring;
    Protocol protocol = Protocol::simple;
    Time latency;        // alpha: the fixed part
    Bandwidth busbw;     // beta: bus bandwidth of this protocol at this size (nccl-tests definition)
    Time time;           // latency + bus bytes / busbw
};

class CollectiveModel {
public:
    // Both must outlive the model.
    CollectiveModel(const model::HardwareProfile& hw, const Topology& topo);

    // The fastest algorithm and protocol for `bytes` (nccl-tests buffer size) over groups laid
    // out as `g`, all groups of that kind running at once; `only` restricts the algorithm (as
    // NCCL_ALGO does). Throws NetworkError when the group does not fit the cluster or `only` is
    // not available for it.
    [[nodiscard]] AlgorithmCost cost(model::CollectiveOp op, const GroupPlacement& g, Bytes bytes,
                                     std::optional<Algorithm> only = std::nullopt) const;
    // The algorithms NCCL would consider for this op and layout.
    [[nodiscard]] std::vector<Algorithm> algorithms(model::CollectiveOp op, const GroupPlacement& g) const;
    // Large-message bus bandwidth of an algorithm (Simple protocol, before NCCL's per-algorithm
    // refinements), from the flow solution over every concurrent group.
    [[nodiscard]] Bandwidth bus_bandwidth(model::CollectiveOp op, Algorithm a, const GroupPlacement& g) const;
    // A pipeline send/recv between two GPUs while every GPU of the node does the same (to the
    // next GPU inside a node, or to the same GPU of the next node).
    [[nodiscard]] Time p2p(bool cross_node, Bytes bytes) const;

private:
    struct Layout;
    struct Solved {
        Bandwidth busbw;     // Simple protocol, large messages
        int nodes = 1;       // nodes one group spans
        int per_node = 1;    // members per node (NCCL: nRanks / nNodes)
        bool nvlink_intra = true;  // intra-node hops all on NVLink (NCCL's LL128 needs it)
    };
    [[nodiscard]] Layout layout(const GroupPlacement& g) const;
    [[nodiscard]] Solved solve(model::CollectiveOp op, Algorithm a, const GroupPlacement& g) const;
    [[nodiscard]] Solved solve_uncached(model::CollectiveOp op, Algorithm a, const Layout& lay) const;
    [[nodiscard]] bool available(model::CollectiveOp op, Algorithm a, const Layout& lay) const;
    [[nodiscard]] Bandwidth p2p_bandwidth(bool cross_node) const;

    const model::HardwareProfile& hw_;
    const Topology& topo_;
    std::vector<double> capacity_;  // every link's capacity (bytes/s), by link id: the flow models' table
    mutable std::mutex mutex_;
    mutable std::map<std::tuple<int, int, int, int>, Solved> cache_;  // (op, algorithm, stride, size)
    mutable std::map<bool, Bandwidth> p2p_cache_;
};

} // namespace trainsim::sim
