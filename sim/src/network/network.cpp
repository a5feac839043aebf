#include "trainsim/sim/network/network.hpp"

#include "trainsim/model/accounting/layout.hpp"

#include <algorithm>
#include <cmath>
#include <map>
#include <optional>
#include <tuple>

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

namespace {

// The measured times of one (op, group size, scope), sorted by size.
std::vector<const model::CollectiveSample*> measured_points(const model::HardwareProfile& hw, const std::string& op,
                                                            int group, const std::string& scope) {
    std::vector<const model::CollectiveSample*> pts;
    for (const auto& s : hw.collective_times)
        if (s.op == op && s.group_size == group && s.scope == scope) pts.push_back(&s);
    std::sort(pts.begin(), pts.end(), [](const auto* a, const auto* b) { return a->bytes.value() < b->bytes.value(); });
    return pts;
}

// Piecewise linear in log(bytes) -> log(time) between the measured points; `bytes` clamped to
// the measured range.
Time interpolate(const std::vector<const model::CollectiveSample*>& pts, double bytes) {
    if (bytes <= pts.front()->bytes.value()) return pts.front()->time;
    if (bytes >= pts.back()->bytes.value()) return pts.back()->time;
    auto hi = std::lower_bound(pts.begin(), pts.end(), bytes,
                               [](const auto* p, double b) { return p->bytes.value() < b; });
    const auto* b = *hi;
    const auto* a = *(hi - 1);
    if (b->bytes.value() == bytes) return b->time;
    const double x = std::log(bytes / a->bytes.value()) / std::log(b->bytes.value() / a->bytes.value());
    return Time::from_seconds(std::exp(std::log(a->time.seconds()) +
                                       x * (std::log(b->time.seconds()) - std::log(a->time.seconds()))));
}

} // namespace

AnalyticNetwork::AnalyticNetwork(const model::HardwareProfile& hw, const model::Cluster& cluster,
                                 const TopologyOptions& options)
    : hw_(hw), cluster_(cluster), topo_(std::make_unique<Topology>(hw, cluster, options)),
      model_(std::make_unique<CollectiveModel>(hw, *topo_)) {
    build_ratio_curves();
}

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
    // Measured times of this very group, inside their sizes.
    if (const auto pts = measured_points(hw_, model::to_string(op), g.size, scope);
        !pts.empty() && bytes.value() >= pts.front()->bytes.value() && bytes.value() <= pts.back()->bytes.value()) {
        c.time = interpolate(pts, bytes.value());
        c.busbw = Bandwidth(bus / c.time.seconds());
        c.algorithm = "measured";
        return c;
    }
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
    c.algorithm = to_string(best.algorithm);
    c.protocol = to_string(best.protocol);
    if (const double r = measured_ratio(op, g, bytes); r != 1.0) c.time = Time::from_seconds(c.time.seconds() * r);
    // A group across nodes moves the whole buffer through each node's own members as well: the
    // ring passes every chunk along the local NVLink hops, the tree reduces and broadcasts it
    // along each node's chain, the NVLS tree reduces it in the node's switch. Whatever the
    // network adds runs alongside that local work, not instead of it, so the collective takes
    // at least what the same op over one node's members takes -- measured there, where the
    // profile has collective_times (docs/network.md, "Measured collective times"). Without this
    // floor a 16-GPU all-reduce over two A100 nodes read 130 us at 8 MiB, faster than the 162 us
    // measured on the 8 GPUs of one node.
    if (g.nodes > 1 && g.members_per_node > 1 &&
        (op == CollectiveOp::all_reduce || op == CollectiveOp::all_gather || op == CollectiveOp::reduce_scatter)) {
        const GroupPlacement local = place_group(g.stride, g.members_per_node, g.gpus_per_node);
        if (const CollectiveCost floor = collective(op, local, bytes); floor.time > c.time) {
            c.time = floor.time;
            c.algorithm += "+node-floor";
        }
    }
    c.busbw = c.time > Time() ? Bandwidth(bus / c.time.seconds()) : best.busbw;
    return c;
}

// The profile's measured times (collective_times) correct NCCL's tuning model, which NCCL uses to
// rank algorithms and which reads faster than nccl-tests below ~64 MiB (docs/network.md, "Measured
// collective times"). Each measured (op, group size, scope) gives a ratio curve, measured over
// modelled time at each measured size, modelled on a node of exactly that group (intra-node) or
// on this cluster (inter-node). A collective of the measured group reads the measured time inside
// the measured sizes and the model times the nearest end's ratio outside them; a group of another
// size inside one node takes the ratio of the nearest measured group size at the same bytes per
// rank (the bytes each ring step moves, which the protocols' per-step costs follow).
void AnalyticNetwork::build_ratio_curves() {
    std::map<std::tuple<std::string, int, std::string>, RatioCurve> curves;
    for (const auto& s : hw_.collective_times) curves[{s.op, s.group_size, s.scope}];
    for (auto& [key, curve] : curves) {
        const auto& [op_name, group, scope] = key;
        curve.op = op_name;
        curve.group = group;
        curve.intra = scope == "intra_node";
        std::optional<CollectiveOp> op;
        for (int i = 0; i < 5; ++i)
            if (model::to_string(static_cast<CollectiveOp>(i)) == op_name) op = static_cast<CollectiveOp>(i);
        if (!op) continue;
        curve.kind = *op;
        std::unique_ptr<Topology> ref_topo;
        std::unique_ptr<CollectiveModel> ref_model;
        const CollectiveModel* m = model_.get();
        GroupPlacement at;
        at.size = group;
        if (curve.intra) {
            model::Cluster one = cluster_;
            one.nodes = 1;
            one.gpus_per_node = group;
            ref_topo = std::make_unique<Topology>(hw_, one);
            ref_model = std::make_unique<CollectiveModel>(hw_, *ref_topo);
            m = ref_model.get();
            at.members_per_node = group;
            at.nodes = 1;
            at.gpus_per_node = group;
            at.stride = 1;
        } else {
            if (group > cluster_.num_gpus() || group % cluster_.gpus_per_node != 0) continue;
            at = place_group(1, group, cluster_.gpus_per_node);
        }
        for (const auto* p : measured_points(hw_, op_name, group, scope)) {
            const Time modelled = m->cost(*op, at, p->bytes).time;
            if (modelled > Time()) curve.points.emplace_back(p->bytes.value(), p->time.seconds() / modelled.seconds());
        }
        if (!curve.points.empty()) ratio_curves_.push_back(std::move(curve));
    }
}

double AnalyticNetwork::measured_ratio(CollectiveOp op, const GroupPlacement& g, Bytes bytes) const {
    const bool intra = g.nodes <= 1;
    const RatioCurve* use = nullptr;
    for (const auto& c : ratio_curves_) {
        if (c.kind != op || c.intra != intra) continue;
        if (c.group == g.size) {
            use = &c;
            break;
        }
        if (!intra) continue;
        const auto dist = [&](int m) { return std::abs(std::log(static_cast<double>(m) / g.size)); };
        if (use == nullptr || dist(c.group) < dist(use->group)) use = &c;
    }
    if (use == nullptr) return 1.0;
    // Bytes per rank as in the measured group.
    const double b = std::clamp(bytes.value() * use->group / g.size, use->points.front().first, use->points.back().first);
    auto hi = std::lower_bound(use->points.begin(), use->points.end(), b,
                               [](const auto& p, double x) { return p.first < x; });
    if (hi == use->points.begin() || hi->first == b) return hi->second;
    const auto lo = hi - 1;
    const double x = std::log(b / lo->first) / std::log(hi->first / lo->first);
    return std::exp(std::log(lo->second) + x * (std::log(hi->second) - std::log(lo->second)));
}

Time AnalyticNetwork::p2p(bool cross_node, Bytes bytes) const { return model_->p2p(cross_node, bytes); }

} // namespace trainsim::sim
