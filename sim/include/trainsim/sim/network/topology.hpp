// The cluster as a graph (docs/network.md, "Topology"): GPUs, the node fabric (one NVSwitch
// layer, NVLink bridges between GPU pairs, PCIe switches and CPU root complexes), NICs, and a
// rail-optimised two-level fat tree (one leaf switch per rail per scalable unit, a spine layer
// above). Every physical link is full duplex and appears as two directed links, each with its own
// capacity. The graph itself is a Boost.Graph adjacency list kept inside topology.cpp; this
// header exposes ids, link properties and routes.
#pragma once

#include "trainsim/model/core/errors.hpp"
#include "trainsim/model/core/scenario.hpp"

#include <cstdint>
#include <iosfwd>
#include <memory>
#include <string>
#include <vector>

namespace trainsim::sim {

using model::Bandwidth;
using model::Time;

// Bad network input (a cluster that cannot be built, a collective that cannot run on it).
class NetworkError : public model::InputError {
public:
    explicit NetworkError(std::vector<model::Diagnostic> diags) : InputError("network", std::move(diags)) {}
};

enum class DeviceKind : std::uint8_t { gpu, nvswitch, pcie_switch, cpu, nic, leaf, spine, host_memory };
// host_memory: a socket's DRAM, present only when the GPUs have no PCIe peer-to-peer
// (HardwareProfile::pcie_p2p_disabled); a transfer staged in host memory crosses the socket ->
// DRAM link twice (written, then read), so that one link stands for the DRAM's shared bandwidth.
enum class LinkKind : std::uint8_t { nvlink, pcie, cpu_interconnect, network, host_memory };
// NCCL's latency classes (src/graph/tuning.cc, hwLat): a transfer pays the per-step latency of
// the slowest class on its path (net > pci > nvlink).
enum class LatencyClass : std::uint8_t { nvlink, pci, net };

[[nodiscard]] std::string to_string(DeviceKind k);
[[nodiscard]] std::string to_string(LinkKind k);

using LinkId = std::uint32_t;
using VertexId = std::uint32_t;

struct TopologyOptions {
    // Leaf down-link : up-link bandwidth ratio. 1 = non-blocking fat tree (the default of NVIDIA's
    // DGX SuperPOD reference architecture); 4 means cross-leaf traffic shares a quarter of the
    // leaf's down-link bandwidth. Must be >= 1.
    double oversubscription = 1.0;
    // Nodes whose rail-k NICs share leaf switch k (a scalable unit). DGX SuperPOD RA: 32 nodes per
    // SU with 64-port NDR leaves (32 ports down, 32 up). Must be >= 1.
    int nodes_per_leaf = 32;
};

struct Device {
    DeviceKind kind = DeviceKind::gpu;
    int node = -1;   // node index; -1 for leaf and spine switches
    int index = 0;   // local index (GPU 0..7, NIC 0..7, PCIe switch, socket); leaf: su * rails + rail
    int count = 1;   // physical devices this vertex stands for (NVSwitch chips, spine switches)
};

struct Link {
    LinkKind kind = LinkKind::nvlink;
    LatencyClass latency_class = LatencyClass::nvlink;
    VertexId from = 0, to = 0;
    Bandwidth rate;      // line rate, per direction
    Bandwidth capacity;  // what NCCL-style traffic reaches on it: rate x the profile's efficiency
    Time latency;        // per-step latency of its class, Simple protocol (profile, after NCCL hwLat)
};

class Topology {
public:
    // Throws NetworkError when the cluster cannot be built (no NICs between several nodes, ...).
    Topology(const model::HardwareProfile& hw, const model::Cluster& cluster, const TopologyOptions& opt = {});
    ~Topology();
    Topology(Topology&&) noexcept;
    Topology& operator=(Topology&&) noexcept;
    Topology(const Topology&) = delete;
    Topology& operator=(const Topology&) = delete;

    [[nodiscard]] int nodes() const { return nodes_; }
    [[nodiscard]] int gpus_per_node() const { return gpn_; }
    [[nodiscard]] int nics_per_node() const { return nics_; }
    [[nodiscard]] int num_gpus() const { return nodes_ * gpn_; }
    [[nodiscard]] int scalable_units() const { return sus_; }
    [[nodiscard]] const TopologyOptions& options() const { return opt_; }
    [[nodiscard]] bool has_nvswitch() const { return nvswitch_; }
    [[nodiscard]] bool has_nvlink_bridges() const { return bridges_; }
    [[nodiscard]] int pcie_switches_per_node() const { return switches_; }
    [[nodiscard]] int sockets_per_node() const { return sockets_; }
    // GPU-to-GPU traffic not on NVLink is staged in host memory (no PCIe peer-to-peer: NCCL SHM).
    [[nodiscard]] bool via_host_memory() const { return via_host_; }

    [[nodiscard]] std::size_t num_vertices() const;
    [[nodiscard]] std::size_t num_links() const { return links_.size(); }
    [[nodiscard]] const Device& device(VertexId v) const;
    [[nodiscard]] const Link& link(LinkId id) const { return links_[id]; }
    [[nodiscard]] const std::vector<Link>& links() const { return links_; }
    [[nodiscard]] VertexId gpu_vertex(int gpu) const;  // global GPU index = node * gpus_per_node + local
    [[nodiscard]] VertexId nic_vertex(int node, int nic) const;

    [[nodiscard]] int node_of(int gpu) const { return gpu / gpn_; }
    [[nodiscard]] int local_of(int gpu) const { return gpu % gpn_; }
    // NICs on a GPU's PCIe switch that it uses ("its rails"); one or more, shared when
    // nics_per_node < gpus_per_node.
    [[nodiscard]] const std::vector<int>& nics_of(int local_gpu) const { return nics_of_gpu_[local_gpu]; }
    // The PCIe switch a GPU (local index) sits behind.
    [[nodiscard]] int pcie_switch_of(int local_gpu) const;
    // The GPU a NIC belongs to (the first GPU on the NIC's PCIe switch that uses it).
    [[nodiscard]] int gpu_of_nic(int nic) const { return gpu_of_nic_[nic]; }
    // The NIC a GPU sends through to reach rail `nic`: the rail itself when it is on the GPU's
    // PCIe switch or reachable over NVLink through its GPU (NCCL's PXN), else the GPU's own NIC.
    [[nodiscard]] int send_nic(int local_gpu, int nic) const;

    // Directed links from one GPU to another, appended to `out`. Inside a node: the widest, then
    // shortest path that does not pass through another GPU or a NIC. Across nodes: out through
    // NIC `send` (see send_nic; PXN relays over NVLink), over the fat tree, in through NIC `recv`.
    void route(int from_gpu, int to_gpu, std::vector<LinkId>& out) const;
    void route(int from_gpu, int to_gpu, int send, int recv, std::vector<LinkId>& out) const;
    // The slowest latency class on a path.
    [[nodiscard]] LatencyClass latency_class(const std::vector<LinkId>& path) const;
    [[nodiscard]] Bandwidth bottleneck(const std::vector<LinkId>& path) const;

    // Human-readable summary and GraphViz (one cluster per node, one edge per full-duplex link).
    [[nodiscard]] std::string summary() const;
    void write_dot(std::ostream& os, const std::string& name) const;

private:
    struct Impl;
    void build(const model::HardwareProfile& hw, const model::Cluster& cluster);
    void node_route(int node, const std::vector<std::uint32_t>& local, std::vector<LinkId>& out) const;
    [[nodiscard]] LinkId leaf_link(int su, int rail, bool up) const;
    [[nodiscard]] LinkId nic_link(int node, int nic, bool up) const;

    TopologyOptions opt_;
    int nodes_ = 1, gpn_ = 1, nics_ = 0, sus_ = 1, switches_ = 1, sockets_ = 1;
    bool nvswitch_ = false, bridges_ = false, via_host_ = false;
    std::vector<Link> links_;
    std::unique_ptr<Impl> impl_;
    std::vector<std::vector<int>> nics_of_gpu_;
    std::vector<int> gpu_of_nic_;
    std::vector<std::vector<int>> send_nic_;
    std::size_t links_per_node_ = 0, verts_per_node_ = 0, net_link_base_ = 0;
    // Node-local routes as offsets into one node's links: gpu->gpu, gpu->nic, nic->gpu.
    std::vector<std::vector<std::vector<std::uint32_t>>> gpu_gpu_, gpu_nic_, nic_gpu_;
};

} // namespace trainsim::sim
