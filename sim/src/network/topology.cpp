#include "trainsim/sim/network/topology.hpp"

#include <boost/graph/adjacency_list.hpp>
#include <boost/graph/dijkstra_shortest_paths.hpp>
#include <boost/graph/filtered_graph.hpp>
#include <boost/property_map/function_property_map.hpp>
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <ostream>
#include <stdexcept>

namespace trainsim::sim {

namespace {

// Effective GPU peer-to-peer bandwidth across the CPU sockets' interconnect (UPI / xGMI), per
// direction. NCCL src/graph/topo.h models it as SRP_QPI_BW = 22 GB/s for Intel Sapphire Rapids
// (AMD Zen 3/4: AMD_ZEN34_BW = 24 GB/s; Skylake 10): far below the raw link rate, because P2P
// traffic through the root complexes is split into small TLPs. It is already an effective
// figure, so no efficiency is applied on top.
constexpr double kSocketInterconnectBw = 22e9;

// GPUs behind one PCIe switch: DGX A100 user guide (4 PCIe Gen4 switches, each with 2 GPUs and 2
// HDR NICs) and DGX H100 (GPU + NIC pairs behind PCIe Gen5 switches); 8-card PCIe servers are
// usually built the same way (2 cards per PEX switch, 2 switches per socket).
constexpr int kGpusPerPcieSwitch = 2;

// Fraction of a socket's DRAM peak that streaming copies reach: STREAM (McCalpin) copy / triad on
// dual-socket servers runs at ~75-85% of the DDR peak (e.g. AMD's EPYC 7003 and Intel's Xeon
// STREAM results in their tuning guides). Estimated, applied to NCCL SHM's staging copies, which
// stream the same way (one write and one read of each byte).
constexpr double kHostMemoryStreamEfficiency = 0.8;

struct EdgeProp {
    LinkId id = 0;
};
using Graph = boost::adjacency_list<boost::vecS, boost::vecS, boost::bidirectionalS, Device, EdgeProp>;

// Where built devices and links go: a Boost graph (a node's routing template, searched with
// Dijkstra) or a plain device list (the cluster, whose links_ say what connects what).
VertexId add_device(Graph& g, const Device& d) { return static_cast<VertexId>(boost::add_vertex(d, g)); }
void add_edge(Graph& g, VertexId from, VertexId to, LinkId id) { boost::add_edge(from, to, EdgeProp{id}, g); }
VertexId add_device(std::vector<Device>& devices, const Device& d) {
    devices.push_back(d);
    return static_cast<VertexId>(devices.size() - 1);
}
void add_edge(std::vector<Device>& /*devices*/, VertexId /*from*/, VertexId /*to*/, LinkId /*id*/) {}

std::string bw_text(Bandwidth b) { return model::format_bandwidth(b); }

} // namespace

std::string to_string(DeviceKind k) {
    switch (k) {
    case DeviceKind::gpu: return "gpu";
    case DeviceKind::nvswitch: return "nvswitch";
    case DeviceKind::pcie_switch: return "pcie_switch";
    case DeviceKind::cpu: return "cpu";
    case DeviceKind::nic: return "nic";
    case DeviceKind::leaf: return "leaf";
    case DeviceKind::spine: return "spine";
    case DeviceKind::host_memory: return "host_memory";
    }
    return "?";
}

std::string to_string(LinkKind k) {
    switch (k) {
    case LinkKind::nvlink: return "nvlink";
    case LinkKind::pcie: return "pcie";
    case LinkKind::cpu_interconnect: return "cpu_interconnect";
    case LinkKind::network: return "network";
    case LinkKind::host_memory: return "host_memory";
    }
    return "?";
}

struct Topology::Impl {
    // The whole cluster's devices by vertex id; its links are links_ (from / to). No graph object:
    // routes come from the node template and the fat tree's arithmetic, and a Boost graph of tens
    // of thousands of vertices and edges cost more to build and free than the plan it serves.
    std::vector<Device> devices;
    Graph node_tmpl;  // one node alone: its link ids are the offsets every node repeats
};

Topology::~Topology() = default;
Topology::Topology(Topology&&) noexcept = default;
Topology& Topology::operator=(Topology&&) noexcept = default;

namespace {

// Adds one node's vertices and links to `g` (and `links`) in a fixed order, so that every node's
// links occupy the same offsets from the node's first link id.
struct NodeBuilder {
    const model::HardwareProfile& hw;
    int gpn, nics, switches, sockets;
    bool nvswitch, bridges, via_host;
    std::vector<int> gpu_of_nic;

    [[nodiscard]] int vertices_per_node() const {
        return gpn + (nvswitch ? 1 : 0) + switches + sockets + (via_host ? sockets : 0) + nics;
    }
    // Template vertex of socket s's CPU (the NICs stay the last vertices of a node).
    [[nodiscard]] VertexId cpu_vertex(int s) const {
        return static_cast<VertexId>(gpn + (nvswitch ? 1 : 0) + switches + s);
    }

    template <class G>
    static VertexId add_vertex(G& g, DeviceKind kind, int node, int index) {
        Device d;
        d.kind = kind;
        d.node = node;
        d.index = index;
        return add_device(g, d);
    }

    // A full-duplex link: two directed links with consecutive ids.
    template <class G>
    static void add_duplex(G& g, std::vector<Link>& links, VertexId a, VertexId b, Link proto) {
        for (int dir = 0; dir < 2; ++dir) {
            Link l = proto;
            l.from = dir == 0 ? a : b;
            l.to = dir == 0 ? b : a;
            const auto id = static_cast<LinkId>(links.size());
            links.push_back(l);
            add_edge(g, l.from, l.to, id);
        }
    }

    [[nodiscard]] Link nvlink() const {
        Link l;
        l.kind = LinkKind::nvlink;
        l.latency_class = LatencyClass::nvlink;
        l.rate = hw.nvlink_bandwidth;
        l.capacity = hw.nvlink_bandwidth * hw.nvlink_efficiency;
        l.latency = hw.intra_node_latency;
        return l;
    }
    [[nodiscard]] Link pcie() const {
        Link l;
        l.kind = LinkKind::pcie;
        l.latency_class = LatencyClass::pci;
        l.rate = hw.pcie_bandwidth;
        l.capacity = hw.pcie_bandwidth * hw.pcie_efficiency;
        l.latency = hw.intra_node_latency;
        return l;
    }
    // One socket's DRAM (all of it, shared by reads and writes): the node's host memory bandwidth
    // split over its sockets, at the fraction streaming copies reach.
    [[nodiscard]] Link host_memory() const {
        Link l;
        l.kind = LinkKind::host_memory;
        l.latency_class = LatencyClass::pci;
        l.rate = Bandwidth(hw.host_memory_bandwidth.value() / sockets);
        l.capacity = l.rate * kHostMemoryStreamEfficiency;
        l.latency = hw.intra_node_latency;
        return l;
    }
    [[nodiscard]] Link socket_link() const {
        Link l;
        l.kind = LinkKind::cpu_interconnect;
        l.latency_class = LatencyClass::pci;
        l.rate = Bandwidth(kSocketInterconnectBw);
        l.capacity = l.rate;
        l.latency = hw.intra_node_latency;
        return l;
    }

    template <class G>
    void add(G& g, std::vector<Link>& links, int node) const {
        std::vector<VertexId> gpu(static_cast<std::size_t>(gpn)), sw(static_cast<std::size_t>(switches));
        std::vector<VertexId> cpu(static_cast<std::size_t>(sockets)), nic(static_cast<std::size_t>(nics));
        for (int i = 0; i < gpn; ++i) gpu[static_cast<std::size_t>(i)] = add_vertex(g, DeviceKind::gpu, node, i);
        VertexId nvs = 0;
        if (nvswitch) nvs = add_vertex(g, DeviceKind::nvswitch, node, 0);
        for (int i = 0; i < switches; ++i)
            sw[static_cast<std::size_t>(i)] = add_vertex(g, DeviceKind::pcie_switch, node, i);
        for (int i = 0; i < sockets; ++i) cpu[static_cast<std::size_t>(i)] = add_vertex(g, DeviceKind::cpu, node, i);
        std::vector<VertexId> mem;
        if (via_host)
            for (int i = 0; i < sockets; ++i) mem.push_back(add_vertex(g, DeviceKind::host_memory, node, i));
        for (int i = 0; i < nics; ++i) nic[static_cast<std::size_t>(i)] = add_vertex(g, DeviceKind::nic, node, i);

        if (nvswitch) {
            for (int i = 0; i < gpn; ++i) add_duplex(g, links, gpu[static_cast<std::size_t>(i)], nvs, nvlink());
        }
        if (bridges) {
            for (int i = 0; i + 1 < gpn; i += 2)
                add_duplex(g, links, gpu[static_cast<std::size_t>(i)], gpu[static_cast<std::size_t>(i + 1)], nvlink());
        }
        for (int i = 0; i < gpn; ++i)
            add_duplex(g, links, gpu[static_cast<std::size_t>(i)],
                       sw[static_cast<std::size_t>(i / kGpusPerPcieSwitch)], pcie());
        for (int k = 0; k < nics; ++k) {
            const int s = gpu_of_nic[static_cast<std::size_t>(k)] / kGpusPerPcieSwitch;
            add_duplex(g, links, nic[static_cast<std::size_t>(k)], sw[static_cast<std::size_t>(s)], pcie());
        }
        for (int s = 0; s < switches; ++s)
            add_duplex(g, links, sw[static_cast<std::size_t>(s)], cpu[static_cast<std::size_t>(s * sockets / switches)],
                       pcie());
        if (sockets == 2) add_duplex(g, links, cpu[0], cpu[1], socket_link());
        // Only the socket -> DRAM direction carries traffic (twice per staged byte); the pair keeps
        // the links full duplex like every other.
        for (std::size_t i = 0; i < mem.size(); ++i) add_duplex(g, links, cpu[i], mem[i], host_memory());
    }
};

// Widest-then-shortest path inside one node that does not pass through a GPU or a NIC other
// than the source (they are endpoints, not switches). Returns link ids of `g`.
std::vector<std::uint32_t> node_path(const Graph& g, const std::vector<Link>& links, VertexId from, VertexId to) {
    if (from == to) return {};
    struct NoTransit {
        const Graph* g = nullptr;
        VertexId start = 0;
        bool operator()(const Graph::edge_descriptor& e) const {
            const auto s = boost::source(e, *g);
            if (s == start) return true;
            const auto k = (*g)[s].kind;
            return k != DeviceKind::gpu && k != DeviceKind::nic;
        }
    };
    const NoTransit keep{&g, from};
    boost::filtered_graph<Graph, NoTransit> fg(g, keep);
    const auto n = boost::num_vertices(g);
    std::vector<Graph::vertex_descriptor> pred(n);
    std::vector<double> dist(n);
    // Seconds per byte along the path, plus a tiny per-hop term so equal-width paths prefer fewer hops.
    auto weight = boost::make_function_property_map<Graph::edge_descriptor, double>(
        [&](const Graph::edge_descriptor& e) { return 1.0 / links[g[e].id].capacity.value() + 1e-18; });
    boost::dijkstra_shortest_paths(fg, from,
                                   boost::predecessor_map(pred.data()).distance_map(dist.data()).weight_map(weight));
    if (pred[to] == to) {
        throw std::logic_error(fmt::format("topology: no path inside a node from vertex {} to {}", from, to));
    }
    std::vector<std::uint32_t> path;
    for (auto v = static_cast<Graph::vertex_descriptor>(to); v != from; v = pred[v]) {
        const auto [e, ok] = boost::edge(pred[v], v, g);
        if (!ok) throw std::logic_error("topology: broken predecessor chain");
        path.push_back(g[e].id);
    }
    std::reverse(path.begin(), path.end());
    return path;
}

} // namespace

Topology::Topology(const model::HardwareProfile& hw, const model::Cluster& cluster, const TopologyOptions& opt)
    : opt_(opt), impl_(std::make_unique<Impl>()) {
    std::vector<model::Diagnostic> diags;
    auto problem = [&](const std::string& key, const std::string& msg) {
        model::Diagnostic d;
        d.file = hw.source_file.empty() ? std::string("cluster") : hw.source_file;
        d.key = key;
        d.message = msg;
        diags.push_back(d);
    };
    if (cluster.nodes < 1) problem("cluster.nodes", fmt::format("must be at least 1, got {}", cluster.nodes));
    if (cluster.gpus_per_node < 1)
        problem("cluster.gpus_per_node", fmt::format("must be at least 1, got {}", cluster.gpus_per_node));
    if (cluster.nics_per_node < 0)
        problem("cluster.nics_per_node", fmt::format("must not be negative, got {}", cluster.nics_per_node));
    if (cluster.nodes > 1 && cluster.nics_per_node < 1)
        problem("cluster.nics_per_node", fmt::format("{} nodes need at least one NIC per node", cluster.nodes));
    if (cluster.nodes > 1 && cluster.nic_rate.value() <= 0)
        problem("cluster.nic_rate", "must be positive when there are several nodes");
    if (hw.pcie_bandwidth.value() <= 0)
        problem("interconnect.pcie_bandwidth", "must be positive (GPUs reach NICs and each other over PCIe)");
    if (!(opt.oversubscription >= 1.0))
        problem("oversubscription", fmt::format("must be at least 1 (1 = non-blocking), got {}", opt.oversubscription));
    if (opt.nodes_per_leaf < 1)
        problem("nodes_per_leaf", fmt::format("must be at least 1, got {}", opt.nodes_per_leaf));
    if (!diags.empty()) throw NetworkError(std::move(diags));
    build(hw, cluster);
}

void Topology::build(const model::HardwareProfile& hw, const model::Cluster& cluster) {
    nodes_ = cluster.nodes;
    gpn_ = cluster.gpus_per_node;
    nics_ = cluster.nics_per_node;
    const bool nvlink = hw.nvlink_bandwidth.value() > 0;
    nvswitch_ = nvlink && cluster.intra == model::IntraFabric::nvswitch;
    bridges_ = nvlink && cluster.intra == model::IntraFabric::nvlink_bridge && gpn_ >= 2;
    via_host_ = hw.pcie_p2p_disabled;
    switches_ = (gpn_ + kGpusPerPcieSwitch - 1) / kGpusPerPcieSwitch;
    sockets_ = switches_ >= 2 ? 2 : 1;
    sus_ = (nodes_ + opt_.nodes_per_leaf - 1) / opt_.nodes_per_leaf;

    // NIC <-> GPU association: NIC k sits on the PCIe switch of GPU gpu_of_nic[k].
    gpu_of_nic_.assign(static_cast<std::size_t>(nics_), 0);
    nics_of_gpu_.assign(static_cast<std::size_t>(gpn_), {});
    for (int k = 0; k < nics_; ++k) {
        const int g = nics_ >= gpn_ ? k * gpn_ / nics_ : (k * gpn_ + nics_ - 1) / nics_;
        gpu_of_nic_[static_cast<std::size_t>(k)] = std::min(g, gpn_ - 1);
    }
    for (int g = 0; g < gpn_ && nics_ > 0; ++g) {
        auto& v = nics_of_gpu_[static_cast<std::size_t>(g)];
        if (nics_ >= gpn_) {
            for (int k = 0; k < nics_; ++k)
                if (k * gpn_ / nics_ == g) v.push_back(k);
        } else {
            v.push_back(g * nics_ / gpn_);
        }
    }

    if (via_host_ && hw.host_memory_bandwidth.value() <= 0) {
        model::Diagnostic d;
        d.file = hw.source_file.empty() ? std::string("cluster") : hw.source_file;
        d.key = "node.host_memory_bandwidth";
        d.message = "must be positive: without PCIe peer-to-peer, GPU traffic is staged in host memory";
        throw NetworkError({d});
    }
    const NodeBuilder nb{hw, gpn_, nics_, switches_, sockets_, nvswitch_, bridges_, via_host_, gpu_of_nic_};
    verts_per_node_ = static_cast<std::size_t>(nb.vertices_per_node());

    // One node alone: the routing template.
    std::vector<Link> tmpl_links;
    nb.add(impl_->node_tmpl, tmpl_links, 0);
    links_per_node_ = tmpl_links.size();

    // The cluster: nodes first (identical link layouts), then the fat tree.
    links_.reserve(links_per_node_ * static_cast<std::size_t>(nodes_) +
                   static_cast<std::size_t>(nodes_ * nics_ * 2 + sus_ * nics_ * 2));
    impl_->devices.reserve(verts_per_node_ * static_cast<std::size_t>(nodes_) +
                           static_cast<std::size_t>(nodes_ > 1 ? sus_ * nics_ + 1 : 0));
    for (int n = 0; n < nodes_; ++n) nb.add(impl_->devices, links_, n);
    net_link_base_ = links_.size();
    if (nodes_ > 1) {
        auto& g = impl_->devices;
        std::vector<VertexId> leaf(static_cast<std::size_t>(sus_ * nics_));
        for (int su = 0; su < sus_; ++su)
            for (int k = 0; k < nics_; ++k)
                leaf[static_cast<std::size_t>(su * nics_ + k)] = NodeBuilder::add_vertex(g, DeviceKind::leaf, -1,
                                                                                         su * nics_ + k);
        const VertexId spine = NodeBuilder::add_vertex(g, DeviceKind::spine, -1, 0);
        Link net;
        net.kind = LinkKind::network;
        net.latency_class = LatencyClass::net;
        net.latency = hw.inter_node_latency;
        for (int n = 0; n < nodes_; ++n) {
            for (int k = 0; k < nics_; ++k) {
                Link l = net;
                l.rate = cluster.nic_rate;
                l.capacity = cluster.nic_rate * hw.nic_efficiency;
                NodeBuilder::add_duplex(g, links_, nic_vertex(n, k),
                                        leaf[static_cast<std::size_t>((n / opt_.nodes_per_leaf) * nics_ + k)], l);
            }
        }
        int max_uplinks = 0;
        for (int su = 0; su < sus_; ++su) {
            const int down = std::min(opt_.nodes_per_leaf, nodes_ - su * opt_.nodes_per_leaf);
            // Leaf up-links: the down-link bandwidth divided by the oversubscription, spread
            // evenly over the spine switches (ideal ECMP), so they are one aggregate link here.
            Link l = net;
            l.rate = cluster.nic_rate * (down / opt_.oversubscription);
            l.capacity = l.rate * hw.nic_efficiency;
            max_uplinks = std::max(max_uplinks, static_cast<int>(std::ceil(down / opt_.oversubscription)));
            for (int k = 0; k < nics_; ++k)
                NodeBuilder::add_duplex(g, links_, leaf[static_cast<std::size_t>(su * nics_ + k)], spine, l);
        }
        g[spine].count = max_uplinks;  // one spine switch per leaf up-link port
    }

    // Node-local routing templates.
    const auto& tg = impl_->node_tmpl;
    auto gv = [&](int i) { return static_cast<VertexId>(i); };
    auto nv = [&](int k) { return static_cast<VertexId>(verts_per_node_ - static_cast<std::size_t>(nics_ - k)); };
    const auto ugpn = static_cast<std::size_t>(gpn_), unics = static_cast<std::size_t>(nics_);
    gpu_gpu_.assign(ugpn, std::vector<std::vector<std::uint32_t>>(ugpn));
    gpu_nic_.assign(ugpn, std::vector<std::vector<std::uint32_t>>(unics));
    nic_gpu_.assign(unics, std::vector<std::vector<std::uint32_t>>(ugpn));
    send_nic_.assign(ugpn, std::vector<int>(unics, 0));
    auto all_nvlink = [&](const std::vector<std::uint32_t>& p) {
        return !p.empty() && std::all_of(p.begin(), p.end(), [&](std::uint32_t id) {
            return tmpl_links[id].kind == LinkKind::nvlink;
        });
    };
    // No PCIe peer-to-peer (GeForce): a transfer is staged in the DRAM of socket `s` (NCCL SHM
    // allocates its buffer on the receiver's side): up to that socket, its DRAM link twice (the
    // sender writes, the receiver reads), then down to the receiver.
    auto socket_of_gpu = [&](int local) { return (local / kGpusPerPcieSwitch) * sockets_ / switches_; };
    auto via_host = [&](VertexId from, VertexId to, int s) {
        std::uint32_t dram = 0;
        for (std::uint32_t id = 0; id < tmpl_links.size(); ++id)
            if (tmpl_links[id].kind == LinkKind::host_memory && tmpl_links[id].from == nb.cpu_vertex(s)) dram = id;
        auto p = node_path(tg, tmpl_links, from, nb.cpu_vertex(s));
        p.push_back(dram);
        p.push_back(dram);
        const auto rest = node_path(tg, tmpl_links, nb.cpu_vertex(s), to);
        p.insert(p.end(), rest.begin(), rest.end());
        return p;
    };
    for (int a = 0; a < gpn_; ++a)
        for (int b = 0; b < gpn_; ++b) {
            if (a == b) continue;
            auto p = node_path(tg, tmpl_links, gv(a), gv(b));
            if (via_host_ && !all_nvlink(p)) p = via_host(gv(a), gv(b), socket_of_gpu(b));
            gpu_gpu_[static_cast<std::size_t>(a)][static_cast<std::size_t>(b)] = std::move(p);
        }
    for (int k = 0; k < nics_; ++k) {
        const int owner = gpu_of_nic_[static_cast<std::size_t>(k)];
        for (int b = 0; b < gpn_; ++b)
            nic_gpu_[static_cast<std::size_t>(k)][static_cast<std::size_t>(b)] =
                via_host_ ? via_host(nv(k), gv(b), socket_of_gpu(b)) : node_path(tg, tmpl_links, nv(k), gv(b));
        for (int a = 0; a < gpn_; ++a) {
            auto& route = gpu_nic_[static_cast<std::size_t>(a)][static_cast<std::size_t>(k)];
            const bool local = a / kGpusPerPcieSwitch == owner / kGpusPerPcieSwitch;
            const auto& to_owner = gpu_gpu_[static_cast<std::size_t>(a)][static_cast<std::size_t>(owner)];
            int send = k;
            if (via_host_) {
                // No GPUDirect RDMA either: the NIC reads the data from a host buffer on its own
                // socket; no PXN (its NVLink hand-over needs the same peer-to-peer path).
                route = via_host(gv(a), nv(k), socket_of_gpu(owner));
                if (!local) send = nics_of_gpu_[static_cast<std::size_t>(a)].front();
            } else if (local) {
                route = node_path(tg, tmpl_links, gv(a), nv(k));
            } else if (all_nvlink(to_owner)) {
                // PXN (NCCL >= 2.12): hand the data over NVLink to the GPU next to the NIC.
                route = to_owner;
                const auto rest = node_path(tg, tmpl_links, gv(owner), nv(k));
                route.insert(route.end(), rest.begin(), rest.end());
            } else {
                route = node_path(tg, tmpl_links, gv(a), nv(k));
                send = nics_of_gpu_[static_cast<std::size_t>(a)].front();
            }
            send_nic_[static_cast<std::size_t>(a)][static_cast<std::size_t>(k)] = send;
        }
    }
}

std::size_t Topology::num_vertices() const { return impl_->devices.size(); }

const Device& Topology::device(VertexId v) const { return impl_->devices.at(v); }

VertexId Topology::gpu_vertex(int gpu) const {
    return static_cast<VertexId>(static_cast<std::size_t>(node_of(gpu)) * verts_per_node_ +
                                 static_cast<std::size_t>(local_of(gpu)));
}

VertexId Topology::nic_vertex(int node, int nic) const {
    return static_cast<VertexId>(static_cast<std::size_t>(node + 1) * verts_per_node_ -
                                 static_cast<std::size_t>(nics_ - nic));
}

int Topology::pcie_switch_of(int local_gpu) const { return local_gpu / kGpusPerPcieSwitch; }

int Topology::send_nic(int local_gpu, int nic) const {
    return send_nic_[static_cast<std::size_t>(local_gpu)][static_cast<std::size_t>(nic)];
}

LinkId Topology::nic_link(int node, int nic, bool up) const {
    return static_cast<LinkId>(net_link_base_ + static_cast<std::size_t>((node * nics_ + nic) * 2 + (up ? 0 : 1)));
}

LinkId Topology::leaf_link(int su, int rail, bool up) const {
    return static_cast<LinkId>(net_link_base_ + static_cast<std::size_t>(nodes_ * nics_ * 2) +
                               static_cast<std::size_t>((su * nics_ + rail) * 2 + (up ? 0 : 1)));
}

void Topology::node_route(int node, const std::vector<std::uint32_t>& local, std::vector<LinkId>& out) const {
    const auto base = links_per_node_ * static_cast<std::size_t>(node);
    for (const auto off : local) out.push_back(static_cast<LinkId>(base + off));
}

void Topology::route(int from_gpu, int to_gpu, std::vector<LinkId>& out) const {
    if (node_of(from_gpu) == node_of(to_gpu)) {
        route(from_gpu, to_gpu, 0, 0, out);
        return;
    }
    const int recv = nics_of(local_of(to_gpu)).front();
    route(from_gpu, to_gpu, send_nic(local_of(from_gpu), recv), recv, out);
}

void Topology::route(int from_gpu, int to_gpu, int send, int recv, std::vector<LinkId>& out) const {
    const int n1 = node_of(from_gpu), n2 = node_of(to_gpu);
    const auto a = static_cast<std::size_t>(local_of(from_gpu)), b = static_cast<std::size_t>(local_of(to_gpu));
    if (n1 == n2) {
        if (a != b) node_route(n1, gpu_gpu_[a][b], out);
        return;
    }
    node_route(n1, gpu_nic_[a][static_cast<std::size_t>(send)], out);
    out.push_back(nic_link(n1, send, true));
    const int su1 = n1 / opt_.nodes_per_leaf, su2 = n2 / opt_.nodes_per_leaf;
    if (su1 != su2 || send != recv) {
        out.push_back(leaf_link(su1, send, true));
        out.push_back(leaf_link(su2, recv, false));
    }
    out.push_back(nic_link(n2, recv, false));
    node_route(n2, nic_gpu_[static_cast<std::size_t>(recv)][b], out);
}

LatencyClass Topology::latency_class(const std::vector<LinkId>& path) const {
    auto c = LatencyClass::nvlink;
    for (const auto id : path) c = std::max(c, links_[id].latency_class);
    return c;
}

Bandwidth Topology::bottleneck(const std::vector<LinkId>& path) const {
    if (path.empty()) return Bandwidth(std::numeric_limits<double>::infinity());
    Bandwidth b = links_[path.front()].capacity;
    for (const auto id : path) b = std::min(b, links_[id].capacity);
    return b;
}

std::string Topology::summary() const {
    std::string s;
    auto find_kind = [&](LinkKind k) -> const Link* {
        for (const auto& l : links_)
            if (l.kind == k) return &l;
        return nullptr;
    };
    s += fmt::format("{} node{} x {} GPU{} = {} GPUs; {} vertices, {} directed links\n", nodes_, nodes_ == 1 ? "" : "s",
                     gpn_, gpn_ == 1 ? "" : "s", num_gpus(), num_vertices(), num_links());
    s += "per node:\n";
    if (nvswitch_) {
        const auto* l = find_kind(LinkKind::nvlink);
        s += fmt::format("  NVSwitch fabric: every GPU {} per direction (NCCL reaches {})\n", bw_text(l->rate),
                         bw_text(l->capacity));
    } else if (bridges_) {
        const auto* l = find_kind(LinkKind::nvlink);
        s += fmt::format("  NVLink bridges between GPU pairs (0-1, 2-3, ...): {} per direction (NCCL reaches {})\n",
                         bw_text(l->rate), bw_text(l->capacity));
    } else {
        s += "  no NVLink: GPUs talk over PCIe\n";
    }
    if (via_host_) {
        const auto* m = find_kind(LinkKind::host_memory);
        s += fmt::format("  no PCIe peer-to-peer: GPU traffic off NVLink is staged in host memory (NCCL SHM), "
                         "each byte written and read in DRAM: {} per socket (reaches {})\n",
                         bw_text(m->rate), bw_text(m->capacity));
    }
    const auto* p = find_kind(LinkKind::pcie);
    s += fmt::format("  {} PCIe switch{} ({} GPUs each), {} CPU socket{}; PCIe {} per direction (reaches {})\n",
                     switches_, switches_ == 1 ? "" : "es", kGpusPerPcieSwitch, sockets_, sockets_ == 1 ? "" : "s",
                     bw_text(p->rate), bw_text(p->capacity));
    if (sockets_ == 2)
        s += fmt::format("  socket interconnect: {} effective GPU peer-to-peer per direction (NCCL topo.h)\n",
                         bw_text(Bandwidth(kSocketInterconnectBw)));
    if (nics_ > 0) {
        s += fmt::format("  {} NIC{}", nics_, nics_ == 1 ? "" : "s");
        if (nics_ >= gpn_) s += fmt::format(" ({} per GPU, on its PCIe switch)\n", nics_ / gpn_);
        else s += fmt::format(" (each shared by {} GPUs)\n", gpn_ / nics_);
    }
    if (nodes_ > 1) {
        const auto* n = find_kind(LinkKind::network);
        const Link& up = links_[leaf_link(0, 0, true)];
        s += fmt::format("network: rail-optimised two-level fat tree\n");
        s += fmt::format("  {} scalable unit{} of up to {} nodes; {} leaf switches ({} rails x {} units)\n", sus_,
                         sus_ == 1 ? "" : "s", opt_.nodes_per_leaf, sus_ * nics_, nics_, sus_);
        s += fmt::format("  NIC links {} per direction (reaches {})\n", bw_text(n->rate), bw_text(n->capacity));
        s += fmt::format("  leaf up-links {} per leaf per direction, oversubscription {}:1, {} spine switches\n",
                         bw_text(up.rate), opt_.oversubscription, impl_->devices.back().count);
    }
    return s;
}

void Topology::write_dot(std::ostream& os, const std::string& name) const {
    const auto& g = impl_->devices;
    auto label = [&](VertexId v) {
        const auto& d = g[v];
        switch (d.kind) {
        case DeviceKind::gpu: return fmt::format("GPU {}", d.index);
        case DeviceKind::nvswitch: return std::string("NVSwitch");
        case DeviceKind::pcie_switch: return fmt::format("PCIe sw {}", d.index);
        case DeviceKind::cpu: return fmt::format("CPU {}", d.index);
        case DeviceKind::nic: return fmt::format("NIC {}", d.index);
        case DeviceKind::leaf: return fmt::format("leaf su{} rail{}", d.index / std::max(1, nics_), d.index % std::max(1, nics_));
        case DeviceKind::spine: return fmt::format("spine x{}", d.count);
        case DeviceKind::host_memory: return fmt::format("DRAM {}", d.index);
        }
        return std::string("?");
    };
    auto shape = [&](DeviceKind k) {
        switch (k) {
        case DeviceKind::gpu: return "box";
        case DeviceKind::nic: return "ellipse";
        case DeviceKind::cpu: return "octagon";
        default: return "diamond";
        }
    };
    os << fmt::format("digraph \"{}\" {{\n  graph [rankdir=LR];\n  node [fontsize=10];\n", name);
    for (int n = 0; n < nodes_; ++n) {
        os << fmt::format("  subgraph cluster_node{} {{\n    label=\"node {}\";\n", n, n);
        for (std::size_t i = 0; i < verts_per_node_; ++i) {
            const auto v = static_cast<VertexId>(static_cast<std::size_t>(n) * verts_per_node_ + i);
            os << fmt::format("    v{} [label=\"{}\", shape={}];\n", v, label(v), shape(g[v].kind));
        }
        os << "  }\n";
    }
    for (auto v = static_cast<VertexId>(static_cast<std::size_t>(nodes_) * verts_per_node_); v < num_vertices(); ++v)
        os << fmt::format("  v{} [label=\"{}\", shape={}];\n", v, label(v), shape(g[v].kind));
    // Links were added in (a->b, b->a) pairs: draw each pair once.
    for (std::size_t id = 0; id < links_.size(); id += 2) {
        const auto& l = links_[id];
        os << fmt::format("  v{} -> v{} [dir=both, label=\"{} {}\"];\n", l.from, l.to, to_string(l.kind),
                          bw_text(l.rate));
    }
    os << "}\n";
}

} // namespace trainsim::sim
