#include "trainsim/sim/network.hpp"

#include "trainsim/model/layout.hpp"

#include <algorithm>

namespace trainsim::sim {

using model::CollectiveOp;
using model::Group;

GroupPlacement place_group(int stride, int size, int gpus_per_node) {
    GroupPlacement g;
    g.size = size;
    g.gpus_per_node = gpus_per_node;
    g.stride = std::max(1, stride);
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
    const auto st = model::rank_strides(p);
    switch (group) {
    case Group::tp: return place_group(st.tp, p.tp, gpn);
    case Group::cp: return place_group(st.cp, p.cp, gpn);
    case Group::dp_cp: return place_group(st.cp, p.cp * p.dp, gpn);
    case Group::dp_shard: return place_group(st.cp, hsdp_shard, gpn);
    case Group::dp_replica: return place_group(st.cp * hsdp_shard, p.cp * p.dp / hsdp_shard, gpn);
    case Group::pp: return place_group(st.pp, p.pp, gpn);
    }
    return {};
}

AnalyticNetwork::AnalyticNetwork(const model::HardwareProfile& hw, const model::Cluster& cluster,
                                 const TopologyOptions& options)
    : hw_(hw), cluster_(cluster), topo_(std::make_unique<Topology>(hw, cluster, options)),
      model_(std::make_unique<CollectiveModel>(hw, *topo_)) {}

AnalyticNetwork::~AnalyticNetwork() = default;
AnalyticNetwork::AnalyticNetwork(AnalyticNetwork&&) noexcept = default;

CollectiveCost AnalyticNetwork::collective(CollectiveOp op, const GroupPlacement& g, Bytes bytes) const {
    CollectiveCost c;
    if (g.size <= 1) {
        c.algorithm = "none";
        return c;
    }
    const double bus = bus_factor(op, g.size) * bytes.value();
    const std::string scope = g.nodes > 1 ? "inter_node" : "intra_node";
    for (const auto& cal : hw_.collectives) {
        if (cal.op == model::to_string(op) && cal.group_size == g.size && cal.scope == scope) {
            c.time = cal.curve.alpha + Time::from_seconds(bus / cal.curve.beta_bw.value());
            c.busbw = Bandwidth(bus / c.time.seconds());
            c.algorithm = "calibrated";
            return c;
        }
    }
    const auto best = model_->cost(op, g, bytes);
    c.time = best.time;
    c.busbw = best.time > Time() ? Bandwidth(bus / best.time.seconds()) : best.busbw;
    c.algorithm = to_string(best.algorithm);
    c.protocol = to_string(best.protocol);
    return c;
}

Time AnalyticNetwork::p2p(bool cross_node, Bytes bytes) const { return model_->p2p(cross_node, bytes); }

} // namespace trainsim::sim
