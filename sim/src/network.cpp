#include "trainsim/sim/network.hpp"

#include <algorithm>
#include <limits>

namespace trainsim::sim {

using model::CollectiveOp;
using model::Group;

GroupPlacement place_group(int stride, int size, int gpus_per_node) {
    GroupPlacement g;
    g.size = size;
    g.gpus_per_node = gpus_per_node;
    if (size <= 1) return g;
    if (stride >= gpus_per_node) {
        g.members_per_node = 1;
    } else {
        g.members_per_node = std::min(size, std::max(1, gpus_per_node / stride));
    }
    g.nodes = (size + g.members_per_node - 1) / g.members_per_node;
    return g;
}

GroupPlacement placement_of(Group group, const model::Plan& plan, int hsdp_shard) {
    const auto& p = plan.parallel;
    const int gpn = plan.cluster.gpus_per_node;
    switch (group) {
    case Group::tp: return place_group(1, p.tp, gpn);
    case Group::cp: return place_group(p.tp, p.cp, gpn);
    case Group::dp_cp: return place_group(p.tp, p.cp * p.dp, gpn);
    case Group::dp_shard: return place_group(p.tp, hsdp_shard, gpn);
    case Group::dp_replica: return place_group(p.tp * hsdp_shard, p.cp * p.dp / hsdp_shard, gpn);
    case Group::pp: return place_group(p.tp * p.cp * p.dp, p.pp, gpn);
    }
    return {};
}

double bus_factor(CollectiveOp op, int n) {
    if (n <= 1) return 0.0;
    const double f = static_cast<double>(n - 1) / n;
    switch (op) {
    case CollectiveOp::all_reduce: return 2.0 * f;
    case CollectiveOp::all_gather:
    case CollectiveOp::reduce_scatter:
    case CollectiveOp::all_to_all: return f;
    case CollectiveOp::send_recv: return 1.0;
    }
    return 1.0;
}

AnalyticNetwork::AnalyticNetwork(const model::HardwareProfile& hw, const model::Cluster& cluster)
    : hw_(hw), cluster_(cluster) {}

Bandwidth AnalyticNetwork::intra_node_busbw(CollectiveOp op, int members) const {
    const bool has_nvlink = hw_.nvlink_bandwidth.value() > 0;
    switch (cluster_.intra) {
    case model::IntraFabric::nvswitch:
        if (!has_nvlink) break;
        // NVLink SHARP reduces in the switch: all-reduce busbw beyond the ring limit (NCCL 2.17+).
        if (op == CollectiveOp::all_reduce && hw_.nvls && members >= 4 && hw_.nvls_efficiency > 0)
            return hw_.nvlink_bandwidth * hw_.nvls_efficiency;
        return hw_.nvlink_bandwidth * hw_.nvlink_efficiency;
    case model::IntraFabric::nvlink_bridge:
        // Bridges join GPU pairs only; larger groups fall back to PCIe for the ring.
        if (has_nvlink && members <= 2) return hw_.nvlink_bandwidth * hw_.nvlink_efficiency;
        break;
    case model::IntraFabric::pcie: break;
    }
    return hw_.pcie_bandwidth * hw_.pcie_efficiency;
}

Bandwidth AnalyticNetwork::inter_node_busbw(const GroupPlacement& g) const {
    // All groups of one kind communicate at once (every DP group reduces in the same phase), so a
    // group gets its share of the node's NICs: members_per_node / gpus_per_node of them. A ring
    // through N nodes crosses each node boundary once per channel, so the bus bandwidth equals
    // the NIC bandwidth available to the group on one node (nccl-tests: 2 x DGX A100 with
    // 8 x 200 Gb/s reach ~ 8 x 25 GB/s x 0.96 = 192 GB/s).
    const double share = static_cast<double>(g.members_per_node) / std::max(1, g.gpus_per_node);
    return cluster_.nic_rate * (cluster_.nics_per_node * share * hw_.nic_efficiency);
}

CollectiveCost AnalyticNetwork::collective(CollectiveOp op, const GroupPlacement& g, Bytes bytes) const {
    CollectiveCost c;
    if (g.size <= 1) {
        c.algorithm = "none";
        return c;
    }
    const std::string scope = g.nodes > 1 ? "inter_node" : "intra_node";
    for (const auto& cal : hw_.collectives) {
        if (cal.op == model::to_string(op) && cal.group_size == g.size && cal.scope == scope) {
            const double bus = bus_factor(op, g.size) * bytes.value();
            c.time = cal.curve.alpha + Time::from_seconds(bus / cal.curve.beta_bw.value());
            c.busbw = cal.curve.beta_bw;
            c.algorithm = "calibrated";
            return c;
        }
    }
    Bandwidth bw = intra_node_busbw(op, g.members_per_node);
    c.algorithm = (op == CollectiveOp::all_reduce && cluster_.intra == model::IntraFabric::nvswitch && hw_.nvls &&
                   g.members_per_node >= 4 && g.nodes == 1)
                      ? "nvls"
                      : "ring";
    if (g.nodes > 1) {
        const Bandwidth inter = inter_node_busbw(g);
        bw = g.members_per_node > 1 ? std::min(bw, inter) : inter;
        c.algorithm = "ring";
    }
    // Ring latency: one step per peer (twice for all-reduce), each paying the hop latency of
    // the slowest level; plus one kernel launch.
    const int steps = (op == CollectiveOp::all_reduce ? 2 : 1) * (g.size - 1);
    const Time hop = g.nodes > 1 ? hw_.inter_node_latency : hw_.intra_node_latency;
    const double bus = bus_factor(op, g.size) * bytes.value();
    c.time = hw_.kernel_overhead + hop * steps + Time::from_seconds(bus / bw.value());
    c.busbw = bw;
    return c;
}

Time AnalyticNetwork::p2p(bool cross_node, Bytes bytes) const {
    Bandwidth bw;
    Time lat;
    if (cross_node) {
        const double nics_per_gpu = std::min(1.0, static_cast<double>(cluster_.nics_per_node) / cluster_.gpus_per_node);
        bw = cluster_.nic_rate * (nics_per_gpu * hw_.nic_efficiency);
        lat = hw_.inter_node_latency;
    } else {
        bw = intra_node_busbw(CollectiveOp::send_recv, 2);
        lat = hw_.intra_node_latency;
    }
    return hw_.kernel_overhead + lat + model::transfer_time(bytes, bw);
}

} // namespace trainsim::sim
