// The cluster topology graph (sim/topology.hpp): what gets built and how GPUs reach each other.
#include "fixtures.hpp"
#include "trainsim/sim/network/topology.hpp"

#include <catch2/catch.hpp>

#include <algorithm>
#include <sstream>

using namespace trainsim;
using sim::LinkKind;
using sim::Topology;

namespace {

model::Cluster cluster(int nodes, int gpn, int nics, model::IntraFabric intra = model::IntraFabric::nvswitch) {
    model::Cluster c;
    c.gpu = "test-gpu";
    c.nodes = nodes;
    c.gpus_per_node = gpn;
    c.nics_per_node = nics;
    c.intra = intra;
    c.nic_rate = model::Bandwidth(400e9 / 8);
    return c;
}

std::vector<sim::LinkId> route(const Topology& t, int a, int b) {
    std::vector<sim::LinkId> p;
    t.route(a, b, p);
    return p;
}

bool uses(const Topology& t, const std::vector<sim::LinkId>& p, LinkKind k) {
    return std::any_of(p.begin(), p.end(), [&](sim::LinkId id) { return t.link(id).kind == k; });
}

} // namespace

TEST_CASE("two DGX-like nodes: devices, links and capacities", "[network][topology]") {
    const auto hw = test::test_profile();  // NVLink 450 GB/s x 0.8, PCIe 64 GB/s x 0.8, NIC eff 0.9
    const Topology t(hw, cluster(2, 8, 8));
    // Per node: 8 GPUs, 1 NVSwitch layer, 4 PCIe switches, 2 sockets, 8 NICs = 23; plus 8 leaves
    // (one per rail, one scalable unit) and the spine layer.
    CHECK(t.num_vertices() == 2 * 23 + 8 + 1);
    // Per node (directed): 8 GPU-NVSwitch + 8 GPU-PCIe + 8 NIC-PCIe + 4 switch-CPU + 1 socket link,
    // each x2 = 58; network: 16 NIC-leaf + 8 leaf-spine, x2.
    CHECK(t.num_links() == 2 * 58 + 2 * (16 + 8));
    CHECK(t.pcie_switches_per_node() == 4);
    CHECK(t.sockets_per_node() == 2);

    // Inside a node, GPU 0 -> GPU 5: up to the NVSwitch and down, at 450 x 0.8 GB/s.
    const auto p = route(t, 0, 5);
    REQUIRE(p.size() == 2);
    CHECK(t.link(p[0]).kind == LinkKind::nvlink);
    CHECK(t.bottleneck(p).value() == Approx(360e9));
    CHECK(t.latency_class(p) == sim::LatencyClass::nvlink);

    // Across nodes on the same rail: GPU -> PCIe switch -> NIC 3 -> leaf -> NIC 3 -> switch -> GPU.
    const auto q = route(t, 3, 8 + 3);
    CHECK(q.size() == 6);
    CHECK(uses(t, q, LinkKind::network));
    CHECK(t.bottleneck(q).value() == Approx(50e9 * 0.9));
    CHECK(t.latency_class(q) == sim::LatencyClass::net);
}

TEST_CASE("PCIe-only nodes route across the CPU sockets, bridges join GPU pairs", "[network][topology]") {
    const auto hw = test::test_profile();
    const Topology pcie(hw, cluster(1, 8, 0, model::IntraFabric::pcie));
    // GPU 3 (socket 0) -> GPU 4 (socket 1): up two PCIe levels, across the socket link, down.
    const auto p = route(pcie, 3, 4);
    CHECK(uses(pcie, p, LinkKind::cpu_interconnect));
    CHECK_FALSE(uses(pcie, p, LinkKind::nvlink));
    // NCCL topo.h SRP_QPI_BW: 22 GB/s for GPU peer-to-peer through the sockets.
    CHECK(pcie.bottleneck(p).value() == Approx(22e9));
    // Two GPUs on one PCIe switch go through the switch only.
    CHECK(route(pcie, 0, 1).size() == 2);

    const Topology bridged(hw, cluster(1, 8, 0, model::IntraFabric::nvlink_bridge));
    CHECK(bridged.has_nvlink_bridges());
    const auto b = route(bridged, 0, 1);
    REQUIRE(b.size() == 1);
    CHECK(bridged.link(b[0]).kind == LinkKind::nvlink);
    CHECK_FALSE(uses(bridged, route(bridged, 1, 2), LinkKind::nvlink));
}

TEST_CASE("PXN: off-rail NICs are reached over NVLink only where NVLink exists", "[network][topology]") {
    const auto hw = test::test_profile();
    const Topology nvs(hw, cluster(2, 8, 8));
    // GPU 0 sends through NIC 5 by handing its data to GPU 5 over the NVSwitch.
    CHECK(nvs.send_nic(0, 5) == 5);
    CHECK(nvs.send_nic(0, 1) == 1);  // NIC 1 is on GPU 0's own PCIe switch
    const Topology pcie(hw, cluster(2, 8, 8, model::IntraFabric::pcie));
    CHECK(pcie.send_nic(0, 5) == 0);  // no NVLink: GPU 0 uses its own NIC
    // Cross-rail traffic then goes leaf -> spine -> leaf.
    const auto p = route(pcie, 0, 8 + 5);
    CHECK(std::count_if(p.begin(), p.end(), [&](sim::LinkId id) { return pcie.link(id).kind == LinkKind::network; }) ==
          4);
}

TEST_CASE("shared NICs: fewer NICs than GPUs", "[network][topology]") {
    const auto hw = test::test_profile();
    const Topology t(hw, cluster(2, 8, 2));
    CHECK(t.nics_of(0) == std::vector<int>{0});
    CHECK(t.nics_of(3) == std::vector<int>{0});
    CHECK(t.nics_of(4) == std::vector<int>{1});
    CHECK(t.gpu_of_nic(1) == 4);
}

TEST_CASE("leaf up-links carry the down-link bandwidth over the oversubscription", "[network][topology]") {
    const auto hw = test::test_profile();
    sim::TopologyOptions o;
    o.nodes_per_leaf = 2;
    o.oversubscription = 4.0;
    const Topology t(hw, cluster(8, 8, 8), o);
    CHECK(t.scalable_units() == 4);
    // Node 1 -> node 2 crosses from unit 0 to unit 1: leaf up, spine, leaf down.
    const auto p = route(t, 8 + 0, 16 + 0);
    CHECK(p.size() == 8);
    // Up-link per leaf = 2 nodes x 50 GB/s / 4, x 0.9 NIC efficiency.
    CHECK(t.bottleneck(p).value() == Approx(2 * 50e9 / 4 * 0.9));
    // Inside one unit the path stays on the rail's leaf.
    CHECK(route(t, 0, 8).size() == 6);
}

TEST_CASE("bad clusters are input errors", "[network][topology]") {
    const auto hw = test::test_profile();
    CHECK_THROWS_AS(Topology(hw, cluster(2, 8, 0)), sim::NetworkError);
    sim::TopologyOptions o;
    o.oversubscription = 0.5;
    CHECK_THROWS_AS(Topology(hw, cluster(2, 8, 8), o), model::InputError);
}

TEST_CASE("GraphViz output draws every full-duplex link once", "[network][topology]") {
    const auto hw = test::test_profile();
    const Topology t(hw, cluster(2, 4, 4));
    std::ostringstream os;
    t.write_dot(os, "test");
    const std::string dot = os.str();
    CHECK(dot.rfind("digraph \"test\"", 0) == 0);
    std::size_t edges = 0;
    for (std::size_t at = dot.find(" -> "); at != std::string::npos; at = dot.find(" -> ", at + 1)) ++edges;
    CHECK(edges == t.num_links() / 2);
}
