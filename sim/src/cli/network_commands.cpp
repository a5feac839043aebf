// trainsim topology and collective: the cluster graph and one NCCL collective on it (docs/network.md).
#include "commands.hpp"

namespace trainsim::sim::cli {

// ---- trainsim topology / trainsim collective (docs/network.md) ----


void add_fabric(CLI::App* cmd, FabricArgs& f) {
    cmd->add_option("--oversubscription", f.oversubscription,
                    "leaf down:up bandwidth ratio of the fat tree (1 = non-blocking)");
    cmd->add_option("--nodes-per-leaf", f.nodes_per_leaf, "nodes per scalable unit (one leaf switch per rail)");
}

TopologyOptions topology_options(const FabricArgs& f, const model::Cluster& cluster = {}) {
    TopologyOptions o;
    o.oversubscription = f.oversubscription.value_or(cluster.oversubscription);
    o.nodes_per_leaf = f.nodes_per_leaf.value_or(cluster.nodes_per_leaf);
    return o;
}

int print_topology(const Common& c, const FabricArgs& f, const std::string& dot) {
    const auto scenario = load(c);
    if (!dot.empty()) {
        // The checked atomic writer: a full disk or a failed write is an error and leaves an old
        // file whole; a device or FIFO is written through, never truncated or replaced.
        const std::string note = write_file_atomically(dot, "--dot", [&](std::ostream& os) {
            for (const auto& plan : scenario.plans)
                Topology(plan.hardware, plan.cluster, topology_options(f, plan.cluster)).write_dot(os, plan.name);
        });
        if (!note.empty()) std::cerr << "trainsim: " << note << "\n";
        return kExitOk;
    }
    for (const auto& plan : scenario.plans) {
        const Topology topo(plan.hardware, plan.cluster, topology_options(f, plan.cluster));
        std::cout << fmt::format("== {} ({}) ==\n", plan.name, plan.hardware.name) << topo.summary() << "\n";
    }
    return kExitOk;
}


int run_collective(const CollectiveArgs& a) {
    std::vector<model::Diagnostic> bad;
    auto problem = [&](const std::string& key, const std::string& msg) {
        model::Diagnostic d;
        d.file = "trainsim collective";
        d.key = key;
        d.message = msg;
        bad.push_back(d);
    };
    const auto hw = model::resolve_profile(a.gpu, fs::current_path(), data_dir(a.data_dir));
    std::optional<model::CollectiveOp> op;
    for (int i = 0; i < 5; ++i)
        if (model::to_string(static_cast<model::CollectiveOp>(i)) == a.op) op = static_cast<model::CollectiveOp>(i);
    if (!op)
        problem("--op", fmt::format("unknown collective '{}'{} (all_reduce, all_gather, reduce_scatter, all_to_all, "
                                    "send_recv)",
                                    a.op,
                                    model::did_you_mean(a.op, {"all_reduce", "all_gather", "reduce_scatter",
                                                               "all_to_all", "send_recv"})));
    Bytes bytes;
    // The largest buffer one GPU can hold is its memory (at most 288 GB today): 1 TiB bounds it.
    constexpr double kMaxCollectiveBytes = model::kTiB;
    try {
        bytes = model::parse_bytes(a.size);
        if (!(bytes.value() > 0)) problem("--size", "must be positive");
        if (bytes.value() > kMaxCollectiveBytes)
            problem("--size", fmt::format("'{}' is more than a GPU holds (at most 1 TiB)", a.size));
    } catch (const model::UnitError& e) {
        problem("--size", e.what());
    }
    // Options that stand for scenario keys get the keys' checks (type, unit, physical range).
    auto check_as_key = [&](const std::string& option, const std::string& key, const std::string& value) {
        for (const auto& m : model::check_key_value(key, value)) problem(option, m);
    };
    if (!a.nic_rate.empty()) check_as_key("--nic-rate", "cluster.nic_rate", a.nic_rate);
    // Given, they are checked whatever their value (a negative count is an error, not "the
    // profile's node").
    if (a.gpus_per_node) check_as_key("--gpus-per-node", "cluster.gpus_per_node", std::to_string(*a.gpus_per_node));
    if (a.nics_per_node) check_as_key("--nics-per-node", "cluster.nics_per_node", std::to_string(*a.nics_per_node));
    // The largest collective group of a published run: Llama 3 405B's data-parallel
    // all-reduces over 16,384 H100s (Llama 3 paper, arXiv 2407.21783, section 3.3). The flow
    // model routes every pair of a group, so its cost grows with the square of the group size:
    // 16,384 GPUs take seconds, 10^9 would exhaust the memory.
    constexpr int kMaxCollectiveGpus = 16384;
    if (a.gpus > kMaxCollectiveGpus)
        problem("--gpus", fmt::format("{} GPUs is more than the collective model supports: 2 to {} (the largest "
                                      "published collective group, Llama 3's 16,384 H100s)",
                                      a.gpus, kMaxCollectiveGpus));
    if (!bad.empty()) throw NetworkError(std::move(bad));
    model::Cluster cluster;
    cluster.gpu = a.gpu;
    cluster.gpus_per_node = a.gpus_per_node.value_or(hw.default_gpus_per_node);
    cluster.nics_per_node = a.nics_per_node.value_or(hw.default_nics_per_node);
    cluster.nic_rate = hw.default_nic_rate;
    if (!a.nic_rate.empty()) {
        try {
            cluster.nic_rate = model::parse_bandwidth(a.nic_rate);
        } catch (const model::UnitError& e) {
            problem("--nic-rate", e.what());
        }
    }
    if (a.intra.empty())
        cluster.intra = hw.nvlink_bridge_pairs ? model::IntraFabric::nvlink_bridge : model::IntraFabric::nvswitch;
    else if (a.intra == "nvswitch") cluster.intra = model::IntraFabric::nvswitch;
    else if (a.intra == "nvlink-bridge" || a.intra == "nvlink_bridge") cluster.intra = model::IntraFabric::nvlink_bridge;
    else if (a.intra == "pcie") cluster.intra = model::IntraFabric::pcie;
    else
        problem("--intra", fmt::format("unknown fabric '{}'{} (nvswitch, nvlink-bridge, pcie)", a.intra,
                                       model::did_you_mean(a.intra, {"nvswitch", "nvlink-bridge", "pcie"})));
    std::optional<Algorithm> algo;
    if (!a.algo.empty()) {
        algo = parse_algorithm(a.algo);
        if (!algo)
            problem("--algo",
                    fmt::format("unknown algorithm '{}'{} (ring, tree, nvls, nvls_tree, direct)", a.algo,
                                model::did_you_mean(a.algo, {"ring", "tree", "nvls", "nvls_tree", "direct"})));
    }
    if (a.gpus < 2) problem("--gpus", fmt::format("a collective needs at least 2 GPUs, got {}", a.gpus));
    if (cluster.gpus_per_node < 1) problem("--gpus-per-node", "must be at least 1");
    if (a.gpus >= 2 && cluster.gpus_per_node >= 1) {
        if (a.gpus < cluster.gpus_per_node) cluster.gpus_per_node = a.gpus;  // one node with just these GPUs
        if (a.gpus % cluster.gpus_per_node != 0)
            problem("--gpus", fmt::format("{} GPUs do not fill whole nodes of {}", a.gpus, cluster.gpus_per_node));
        cluster.nodes = a.gpus / cluster.gpus_per_node;
    }
    if (!bad.empty()) throw NetworkError(std::move(bad));

    const AnalyticNetwork net(hw, cluster, topology_options(a.fabric));
    const auto g = place_group(1, a.gpus, cluster.gpus_per_node);
    Time t;
    std::string algorithm, protocol;
    if (algo) {
        const auto c = net.collectives().cost(*op, g, bytes, algo);
        t = c.time;
        algorithm = to_string(c.algorithm);
        protocol = to_string(c.protocol);
    } else {
        const auto c = net.collective(*op, g, bytes);
        t = c.time;
        algorithm = c.algorithm;
        protocol = c.protocol;
    }
    // How the ring's hops inside a node travel: all on NVLink, over PCIe peer-to-peer, or staged in
    // host memory (no PCIe peer-to-peer: GeForce; docs/network.md "No peer-to-peer").
    std::string intra_path = "none";
    const int local = std::min(a.gpus, cluster.gpus_per_node);
    if (local >= 2) {
        bool host = false, nvlink_only = true;
        std::vector<LinkId> route;
        for (int i = 0; i < local; ++i) {
            route.clear();
            net.topology().route(i, (i + 1) % local, route);
            for (const auto id : route) {
                const auto k = net.topology().link(id).kind;
                host = host || k == LinkKind::host_memory;
                nvlink_only = nvlink_only && k == LinkKind::nvlink;
            }
        }
        intra_path = host ? "host_memory" : nvlink_only ? "nvlink" : "pcie";
    }
    // nccl-tests definitions: algbw = buffer bytes / time; busbw = algbw x the op's bus factor.
    const double algbw = bytes.value() / t.seconds();
    const double busbw = algbw * bus_factor(*op, a.gpus);
    if (a.json) {
        nlohmann::ordered_json j;
        j["time_s"] = t.seconds();
        j["algbw_gbps"] = algbw / 1e9;
        j["busbw_gbps"] = busbw / 1e9;
        j["algorithm"] = algorithm;
        j["intra_node_path"] = intra_path;
        std::cout << j.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) << "\n";
        return kExitOk;
    }
    std::cout << fmt::format("{} of {} over {} GPU{} ({} node{} x {}, {}) on {}\n", model::to_string(*op),
                             model::format_bytes(bytes), a.gpus, a.gpus == 1 ? "" : "s", cluster.nodes,
                             cluster.nodes == 1 ? "" : "s", cluster.gpus_per_node, model::to_string(cluster.intra),
                             hw.name);
    if (cluster.nodes > 1)
        std::cout << fmt::format("  network    {} NIC{} x {} per node\n", cluster.nics_per_node,
                                 cluster.nics_per_node == 1 ? "" : "s", model::format_bandwidth(cluster.nic_rate));
    std::cout << fmt::format("  algorithm  {}{}\n", algorithm, protocol.empty() ? "" : " / " + protocol);
    if (intra_path == "host_memory")
        std::cout << "  path       GPU -> PCIe -> host memory -> PCIe -> GPU inside the node (no PCIe peer-to-peer: "
                     "NCCL SHM)\n";
    std::cout << fmt::format("  time       {}\n", model::format_time(t));
    std::cout << fmt::format("  algbw      {:.1f} GB/s\n", algbw / 1e9);
    std::cout << fmt::format("  busbw      {:.1f} GB/s\n", busbw / 1e9);
    // On two nodes NCCL's tuner can pass over a faster tree (docs/network.md, "Which algorithm
    // NCCL runs"): say what forcing it would give.
    if (!algo && cluster.nodes == 2 && algorithm.starts_with("ring") && *op == model::CollectiveOp::all_reduce) {
        try {
            const auto tree = net.collectives().cost(*op, g, bytes, Algorithm::tree);
            if (tree.time < t)
                std::cout << fmt::format("  note       NCCL's tuner takes the ring here; NCCL_ALGO=Tree would take {} "
                                         "(busbw {:.1f} GB/s)\n",
                                         model::format_time(tree.time),
                                         bytes.value() / tree.time.seconds() * bus_factor(*op, a.gpus) / 1e9);
        } catch (const NetworkError&) {
            // no tree for this group: nothing to add
        }
    }
    return kExitOk;
}

} // namespace trainsim::sim::cli
