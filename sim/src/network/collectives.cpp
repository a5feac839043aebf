#include "trainsim/sim/network/collectives.hpp"

#include "trainsim/sim/engine/engine.hpp"
#include "trainsim/sim/network/flow_model.hpp"
#include "trainsim/sim/network/topology.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <limits>

namespace trainsim::sim {

using model::CollectiveOp;

namespace {

// ---- NCCL's tuning model, src/graph/tuning.cc (NVIDIA/nccl, 2.19-2.21; commit b6475625) ----
// Indexed [algorithm][protocol] with Algorithm order (ring, tree, nvls, nvls_tree, direct) and
// Protocol order (LL, LL128, Simple). Microseconds.
constexpr std::array<std::array<double, 3>, kNumAlgorithms> kBaseLat{{
    {6.6, 14.0, 8.4},  // ring
    {6.8, 14.0, 0.0},  // tree
    {0.0, 0.0, 0.0},   // nvls
    {0.0, 0.0, 0.0},   // nvls tree
    {0.0, 0.0, 0.0},   // direct: not in NCCL's tuner (see the direct case in cost())
}};
// hwLat[class][algorithm][protocol], class = NVLink, PCI, NET. Microseconds per step. (The
// direct column is unused: see the direct case in cost().)
constexpr std::array<std::array<std::array<double, 3>, kNumAlgorithms>, 3> kHwLat{{
    {{{0.6, 1.9, 3.4}, {0.6, 1.25, 28.0}, {0.0, 0.0, 23.0}, {0.0, 0.0, 23.0}, {0.0, 0.0, 0.0}}},  // NVLink
    {{{1.0, 2.5, 5.7}, {1.0, 1.9, 28.0}, {0.0, 0.0, 0.0}, {0.0, 0.0, 0.0}, {0.0, 0.0, 0.0}}},     // PCI
    {{{2.7, 4.0, 14.0}, {5.0, 8.5, 28.0}, {0.0, 0.0, 18.0}, {0.0, 0.0, 14.0}, {0.0, 0.0, 0.0}}},   // NET
}};
// Trees stray from the model at medium sizes; NCCL's static correction, by log2(bytes / 64).
constexpr std::array<std::array<double, 23>, 3> kTreeCorrection{{
    {1.0, 1.0, 1.0, 1.0, .9, .8, .7, .7, .7, .7, .6, .5, .4, .4, .5, .6, .7, .8, .9, 1.0, 1.0, 1.0, 1.0},
    {1.0, 1.0, 1.0, 1.0, 1.0, .9, .8, .8, .8, .7, .6, .6, .6, .6, .6, .6, .8, .9, .9, .9, .9, 1.0, 1.0},
    {.9, .9, .9, .9, .9, .9, .9, .8, .7, .6, .6, .5, .5, .5, .5, .6, .7, .8, .7, .7, .8, .9, .9},
}};
// llMaxBws (GB/s): LL's ceiling on one node (Ampere / Hopper row) and between 2 or more nodes
// (x86 Intel row; AMD hosts: 22.5 / 19.0).
constexpr double kLlMaxBwOneNode = 87.7e9, kLlMaxBwTwoNodes = 39.0e9, kLlMaxBwMoreNodes = 20.4e9;
// getNetOverhead: host cost of posting one network operation, Intel x86 (AMD: 2 us); x3 for Simple.
constexpr double kNetOverheadUs = 1.0;
// Ring LL128 keeps 120 of 128 bytes (NCCL uses 0.92; 0.7 with one GPU per node); trees 0.92.
constexpr double kRingLl128 = 0.92, kRingLl128OnePerNode = 0.7, kTreeBw = 0.92;

// NVLS all-reduce moves (1 + 1/n) bytes per byte of buffer over each GPU's NVSwitch link in each
// direction (multimem ld_reduce pulls every GPU's share and returns the reduced 1/n; multimem st
// sends 1/n and receives the whole buffer), so busbw = 2(n-1)/(n+1) x the link's effective rate.
// Profiles give nvls_efficiency as the busbw / link rate measured on 8 GPUs (nccl-tests).
constexpr int kNvlsReferenceGpus = 8;

int log2i(long long n) {
    int l = 0;
    while (n >>= 1) ++l;
    return l;
}

std::size_t ai(Algorithm a) { return static_cast<std::size_t>(a); }
std::size_t pi(Protocol p) { return static_cast<std::size_t>(p); }

[[noreturn]] void fail(const std::string& msg) {
    model::Diagnostic d;
    d.file = "collective";
    d.message = msg;
    throw NetworkError({d});
}

// Per-link weights of one flow, accumulated densely (a collective's flow may cross the same
// link many times).
class FlowBuilder {
public:
    explicit FlowBuilder(std::size_t links) : weight_(links, 0.0) {}
    void add(const std::vector<LinkId>& path, double w) {
        for (const auto id : path) {
            if (weight_[id] == 0.0) touched_.push_back(id);
            weight_[id] += w;
        }
    }
    std::vector<LinkUse> take() {
        std::vector<LinkUse> uses;
        uses.reserve(touched_.size());
        for (const auto id : touched_) {
            uses.push_back({id, weight_[id]});
            weight_[id] = 0.0;
        }
        touched_.clear();
        return uses;
    }

private:
    std::vector<double> weight_;
    std::vector<LinkId> touched_;
};

// NCCL's double binary tree (src/graph/trees.cc): tree 0 is a binary tree on the ranks in which a
// rank's parent clears its lowest set bit; tree 1 mirrors it (even count) or shifts it by one
// (odd count), so that each rank is a leaf in at least one of the two.
int btree_parent(int n, int r) {
    if (r == 0) return -1;
    int bit = 1;
    while ((r & bit) == 0) bit <<= 1;
    int up = (r ^ bit) | (bit << 1);
    if (up >= n) up = r ^ bit;
    return up;
}
int dtree_parent(int n, int r, int tree) {
    if (tree == 0) return btree_parent(n, r);
    if (n % 2 == 1) {
        const int p = btree_parent(n, (r - 1 + n) % n);
        return p < 0 ? -1 : (p + 1) % n;
    }
    const int p = btree_parent(n, n - 1 - r);
    return p < 0 ? -1 : n - 1 - p;
}

} // namespace

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

std::string to_string(Algorithm a) {
    switch (a) {
    case Algorithm::ring: return "ring";
    case Algorithm::tree: return "tree";
    case Algorithm::nvls: return "nvls";
    case Algorithm::nvls_tree: return "nvls_tree";
    case Algorithm::direct: return "direct";
    }
    return "?";
}

std::string to_string(Protocol p) {
    switch (p) {
    case Protocol::ll: return "LL";
    case Protocol::ll128: return "LL128";
    case Protocol::simple: return "Simple";
    }
    return "?";
}

std::optional<Algorithm> parse_algorithm(const std::string& s) {
    for (int i = 0; i < kNumAlgorithms; ++i) {
        const auto a = static_cast<Algorithm>(i);
        if (to_string(a) == s) return a;
    }
    return std::nullopt;
}

// Where a group and its concurrent copies sit: member j of copy (b, a) is global rank
// b x stride x size + a + j x stride. The copies' member lists are built only when a collective is
// solved (groups_of): a cost that is cached needs the shape alone.
struct CollectiveModel::Layout {
    int stride = 1;
    int size = 1;
    int blocks = 1;   // world / (stride x size)
    int nodes = 1;    // nodes group 0 spans
    int per_node = 1; // members per node (NCCL: nRanks / nNodes)
};

namespace {
// Every concurrent group of `lay`, members ascending; [0] represents them.
std::vector<std::vector<int>> groups_of(int stride, int size, int blocks) {
    std::vector<std::vector<int>> out;
    out.reserve(static_cast<std::size_t>(blocks) * static_cast<std::size_t>(stride));
    const long long block = static_cast<long long>(stride) * size;
    for (int b = 0; b < blocks; ++b) {
        for (int a = 0; a < stride; ++a) {
            std::vector<int> m(static_cast<std::size_t>(size));
            for (int j = 0; j < size; ++j)
                m[static_cast<std::size_t>(j)] = static_cast<int>(b * block) + a + j * stride;
            out.push_back(std::move(m));
        }
    }
    return out;
}
} // namespace

CollectiveModel::CollectiveModel(const model::HardwareProfile& hw, const Topology& topo)
    : hw_(hw), topo_(topo), capacity_(topo.num_links()) {
    for (std::size_t i = 0; i < capacity_.size(); ++i) capacity_[i] = topo_.link(static_cast<LinkId>(i)).capacity.value();
}

CollectiveModel::Layout CollectiveModel::layout(const GroupPlacement& g) const {
    Layout lay;
    const int gpn = topo_.gpus_per_node();
    const int world = topo_.num_gpus();
    lay.size = g.size;
    if (g.size < 1) fail(fmt::format("a group needs at least one GPU, got {}", g.size));
    if (g.stride > 0) {
        lay.stride = g.stride;
    } else {
        const int mpn = std::max(1, g.members_per_node);
        lay.stride = mpn >= g.size ? 1 : std::max(1, gpn / mpn);
    }
    const long long block = static_cast<long long>(lay.stride) * g.size;
    if (block > world) {
        fail(fmt::format("a group of {} GPUs {} apart does not fit a cluster of {} GPUs", g.size, lay.stride, world));
    }
    lay.blocks = static_cast<int>(world / block);
    // Group 0 (block 0, offset 0): members j x stride.
    int distinct = 1;
    for (int j = 1; j < g.size; ++j)
        if (topo_.node_of(j * lay.stride) != topo_.node_of((j - 1) * lay.stride)) ++distinct;
    lay.nodes = distinct;
    lay.per_node = std::max(1, g.size / lay.nodes);
    return lay;
}

bool CollectiveModel::available(CollectiveOp op, Algorithm a, const Layout& lay) const {
    const bool reduce_like = op == CollectiveOp::all_reduce || op == CollectiveOp::all_gather ||
                             op == CollectiveOp::reduce_scatter;
    const bool nvls = topo_.has_nvswitch() && hw_.nvls && hw_.nvls_efficiency > 0;
    switch (a) {
    case Algorithm::ring: return reduce_like && lay.size >= 2;
    case Algorithm::tree: return op == CollectiveOp::all_reduce && lay.nodes > 1;
    case Algorithm::nvls: return op == CollectiveOp::all_reduce && nvls && lay.nodes == 1 && lay.size >= 2;
    case Algorithm::nvls_tree:
        return op == CollectiveOp::all_reduce && nvls && lay.nodes > 1 && lay.per_node >= 2;
    case Algorithm::direct: return !reduce_like && lay.size >= 2;
    }
    return false;
}

std::vector<Algorithm> CollectiveModel::algorithms(CollectiveOp op, const GroupPlacement& g) const {
    const auto lay = layout(g);
    std::vector<Algorithm> out;
    for (int i = 0; i < kNumAlgorithms; ++i)
        if (available(op, static_cast<Algorithm>(i), lay)) out.push_back(static_cast<Algorithm>(i));
    return out;
}

CollectiveModel::Solved CollectiveModel::solve(CollectiveOp op, Algorithm a, const GroupPlacement& g) const {
    const auto lay = layout(g);
    if (!available(op, a, lay)) {
        fail(fmt::format("algorithm {} does not apply to {} over {} GPUs on {} node(s)", to_string(a),
                         model::to_string(op), lay.size, lay.nodes));
    }
    const auto key = std::make_tuple(static_cast<int>(op), static_cast<int>(a), lay.stride, lay.size);
    std::lock_guard<std::mutex> lock(mutex_);
    if (auto it = cache_.find(key); it != cache_.end()) return it->second;
    const auto s = solve_uncached(op, a, lay);
    cache_.emplace(key, s);
    return s;
}

CollectiveModel::Solved CollectiveModel::solve_uncached(CollectiveOp op, Algorithm a, const Layout& lay) const {
    FlowModel fm{std::span<const double>(capacity_)};
    FlowBuilder fb(topo_.num_links());
    std::vector<std::size_t> group_of;  // flow -> group
    std::vector<LinkId> path;
    Solved s;
    s.nodes = lay.nodes;
    s.per_node = lay.per_node;
    const int n = lay.size;
    const double nvls_link_fraction =
        hw_.nvls_efficiency * (kNvlsReferenceGpus + 1.0) / (2.0 * (kNvlsReferenceGpus - 1.0));
    // Extra bytes per byte on an NVLink for NVLS, so that the link's capacity (rate x
    // nvlink_efficiency) stands for NVLS's own efficiency.
    const double nvls_scale = nvls_link_fraction > 0 ? hw_.nvlink_efficiency / nvls_link_fraction : 1.0;

    const auto groups = groups_of(lay.stride, lay.size, lay.blocks);
    for (std::size_t gi = 0; gi < groups.size(); ++gi) {
        const auto& members = groups[gi];
        const bool rep = gi == 0;
        // Members per node, nodes in order.
        std::vector<std::vector<int>> per_node;
        for (const int m : members) {
            if (per_node.empty() || topo_.node_of(per_node.back().front()) != topo_.node_of(m)) per_node.emplace_back();
            per_node.back().push_back(m);
        }
        const auto nn = per_node.size();
        auto nics_of_node = [&](const std::vector<int>& ms) {
            std::vector<int> k;
            for (const int m : ms)
                for (const int x : topo_.nics_of(topo_.local_of(m))) k.push_back(x);
            std::sort(k.begin(), k.end());
            k.erase(std::unique(k.begin(), k.end()), k.end());
            return k;
        };
        // A channel's order inside node t, as NCCL's ring search builds it on DGX-like nodes: enter
        // at the member next to NIC k, visit the others in rank order, leave from a member on the
        // same PCIe switch as the NIC when there is one (so each GPU's PCIe link carries one flow
        // in and one out per channel pair), else from the last member (which then reaches the
        // NIC over NVLink through the entry GPU: PXN).
        auto channel_order = [&](const std::vector<int>& ms, int k) {
            std::size_t start = 0;
            for (std::size_t i = 0; i < ms.size(); ++i) {
                const auto& nk = topo_.nics_of(topo_.local_of(ms[i]));
                if (std::find(nk.begin(), nk.end(), k) != nk.end()) {
                    start = i;
                    break;
                }
            }
            const int nic_switch = topo_.pcie_switch_of(topo_.gpu_of_nic(k));
            std::size_t partner = start;
            for (std::size_t i = 1; i < ms.size(); ++i) {
                const auto j = (start + i) % ms.size();
                if (topo_.pcie_switch_of(topo_.local_of(ms[j])) == nic_switch) {
                    partner = j;
                    break;
                }
            }
            std::vector<int> o;
            for (std::size_t i = 0; i < ms.size(); ++i) {
                const auto j = (start + i) % ms.size();
                if (j != partner || partner == start) o.push_back(ms[j]);
            }
            if (partner != start) o.push_back(ms[partner]);
            return o;
        };
        auto add_intra = [&](int from, int to, double w) {
            path.clear();
            topo_.route(from, to, path);
            if (rep && topo_.latency_class(path) != LatencyClass::nvlink) s.nvlink_intra = false;
            fb.add(path, w);
        };
        auto add_inter = [&](int from, int k_from, int to, int k_to, double w) {
            path.clear();
            topo_.route(from, to, topo_.send_nic(topo_.local_of(from), k_from), k_to, path);
            fb.add(path, w);
        };
        auto finish_flow = [&]() {
            fm.add_flow(fb.take());
            group_of.push_back(gi);
        };

        switch (a) {
        case Algorithm::ring: {
            const double w = bus_factor(op, n);  // bytes per hop per byte of buffer
            if (nn == 1) {
                for (std::size_t i = 0; i < members.size(); ++i)
                    add_intra(members[i], members[(i + 1) % members.size()], w);
                finish_flow();
                break;
            }
            std::vector<std::vector<int>> node_nics(nn);
            for (std::size_t t = 0; t < nn; ++t) node_nics[t] = nics_of_node(per_node[t]);
            const auto channels = node_nics.front().size();
            for (std::size_t c = 0; c < channels; ++c) {
                std::vector<std::vector<int>> order(nn);
                std::vector<int> k(nn);
                for (std::size_t t = 0; t < nn; ++t) {
                    k[t] = node_nics[t][c % node_nics[t].size()];
                    order[t] = channel_order(per_node[t], k[t]);
                }
                for (std::size_t t = 0; t < nn; ++t) {
                    for (std::size_t i = 0; i + 1 < order[t].size(); ++i) add_intra(order[t][i], order[t][i + 1], w);
                    const auto next = (t + 1) % nn;
                    add_inter(order[t].back(), k[t], order[next].front(), k[next], w);
                }
                finish_flow();
            }
            break;
        }
        case Algorithm::tree: {
            std::vector<std::vector<int>> node_nics(nn);
            for (std::size_t t = 0; t < nn; ++t) node_nics[t] = nics_of_node(per_node[t]);
            const auto channels = node_nics.front().size();
            const int nodes = static_cast<int>(nn);
            for (std::size_t c = 0; c < channels; ++c) {
                std::vector<std::vector<int>> order(nn);
                std::vector<int> k(nn);
                for (std::size_t t = 0; t < nn; ++t) {
                    k[t] = node_nics[t][c % node_nics[t].size()];
                    order[t] = channel_order(per_node[t], k[t]);
                    // The intra-node chain: reduce towards the head, broadcast away from it;
                    // both trees (half the data each) use it.
                    for (std::size_t i = 0; i + 1 < order[t].size(); ++i) {
                        add_intra(order[t][i + 1], order[t][i], 1.0);
                        add_intra(order[t][i], order[t][i + 1], 1.0);
                    }
                }
                for (int tree = 0; tree < 2; ++tree) {
                    for (int v = 0; v < nodes; ++v) {
                        const int p = dtree_parent(nodes, v, tree);
                        if (p < 0) continue;
                        const auto uv = static_cast<std::size_t>(v), up = static_cast<std::size_t>(p);
                        add_inter(order[uv].front(), k[uv], order[up].front(), k[up], 0.5);  // reduce
                        add_inter(order[up].front(), k[up], order[uv].front(), k[uv], 0.5);  // broadcast
                    }
                }
                finish_flow();
            }
            break;
        }
        case Algorithm::nvls:
        case Algorithm::nvls_tree: {
            // Inside each node: every member's NVSwitch up- and down-link carry (1 + 1/m) bytes.
            for (const auto& ms : per_node) {
                if (ms.size() < 2) continue;  // a lone member reduces nothing in the switch
                const double m = static_cast<double>(ms.size());
                for (std::size_t i = 0; i < ms.size(); ++i) {
                    path.clear();
                    topo_.route(ms[i], ms[(i + 1) % ms.size()], path);
                    // path = [member -> NVSwitch, NVSwitch -> next]: take the member's up-link; its
                    // down-link is the last link of the route from the previous member.
                    std::vector<LinkId> up{path.front()};
                    path.clear();
                    topo_.route(ms[(i + ms.size() - 1) % ms.size()], ms[i], path);
                    std::vector<LinkId> down{path.back()};
                    fb.add(up, (1.0 + 1.0 / m) * nvls_scale);
                    fb.add(down, (1.0 + 1.0 / m) * nvls_scale);
                }
            }
            if (a == Algorithm::nvls_tree) {
                // Between nodes: member i of each node owns 1/m of the buffer and runs NCCL's double
                // binary tree over the nodes on its own rail.
                const int nodes = static_cast<int>(nn);
                const auto m = per_node.front().size();
                for (std::size_t i = 0; i < m; ++i) {
                    for (int tree = 0; tree < 2; ++tree) {
                        for (int v = 0; v < nodes; ++v) {
                            const int p = dtree_parent(nodes, v, tree);
                            if (p < 0) continue;
                            const auto& cv = per_node[static_cast<std::size_t>(v)];
                            const auto& cp = per_node[static_cast<std::size_t>(p)];
                            const int x = cv[i % cv.size()], y = cp[i % cp.size()];
                            const int kx = topo_.nics_of(topo_.local_of(x)).front();
                            const int ky = topo_.nics_of(topo_.local_of(y)).front();
                            const double w = 0.5 / static_cast<double>(m);
                            add_inter(x, kx, y, ky, w);
                            add_inter(y, ky, x, kx, w);
                        }
                    }
                }
            }
            finish_flow();
            break;
        }
        case Algorithm::direct: {
            if (op == CollectiveOp::all_to_all) {
                // Every rank sends 1/n of its buffer to every other rank (nccl-tests alltoall).
                for (const int i : members)
                    for (const int j : members)
                        if (i != j) {
                            path.clear();
                            topo_.route(i, j, path);
                            if (rep && topo_.node_of(i) == topo_.node_of(j) &&
                                topo_.latency_class(path) != LatencyClass::nvlink)
                                s.nvlink_intra = false;
                            fb.add(path, 1.0 / n);
                        }
            } else {
                // nccl-tests sendrecv: rank i sends its whole buffer to rank i + 1.
                for (std::size_t i = 0; i < members.size(); ++i) {
                    path.clear();
                    topo_.route(members[i], members[(i + 1) % members.size()], path);
                    fb.add(path, 1.0);
                }
            }
            finish_flow();
            break;
        }
        }
    }

    const auto rates = fm.solve();
    std::vector<double> algbw(groups.size(), 0.0);
    for (std::size_t f = 0; f < rates.size(); ++f) algbw[group_of[f]] += rates[f];
    // The phase ends when the slowest group is done.
    const double slowest = *std::min_element(algbw.begin(), algbw.end());
    if (!(slowest > 0)) {
        throw InternalError(fmt::format("network: {} {} over {} GPUs got no bandwidth", to_string(a),
                                        model::to_string(op), n));
    }
    s.busbw = Bandwidth(bus_factor(op, n) * slowest);
    return s;
}

Bandwidth CollectiveModel::bus_bandwidth(CollectiveOp op, Algorithm a, const GroupPlacement& g) const {
    return solve(op, a, g).busbw;
}

AlgorithmCost CollectiveModel::cost(CollectiveOp op, const GroupPlacement& g, Bytes bytes,
                                    std::optional<Algorithm> only) const {
    const auto lay = layout(g);
    std::vector<Algorithm> cands;
    if (only) {
        if (!available(op, *only, lay)) {
            fail(fmt::format("algorithm {} does not apply to {} over {} GPUs on {} node(s)", to_string(*only),
                             model::to_string(op), lay.size, lay.nodes));
        }
        cands.push_back(*only);
    } else {
        for (int i = 0; i < kNumAlgorithms; ++i)
            if (available(op, static_cast<Algorithm>(i), lay)) cands.push_back(static_cast<Algorithm>(i));
    }
    if (cands.empty()) fail(fmt::format("no algorithm for {} over {} GPU(s)", model::to_string(op), lay.size));

    const int n = lay.size;
    const int nn = lay.nodes;
    const double ppn = static_cast<double>(n) / nn;
    const double bus_bytes = bus_factor(op, n) * bytes.value();
    const double ll_max = nn == 1 ? kLlMaxBwOneNode : nn == 2 ? kLlMaxBwTwoNodes : kLlMaxBwMoreNodes;
    const long long log_size = log2i(static_cast<long long>(bytes.value()) >> 6);

    // NCCL picks the algorithm and protocol by its own tuner (src/graph/tuning.cc
    // ncclTopoTuneModel), not by what runs fastest. On one or two nodes the tuner rates every
    // algorithm at the intra-node bandwidth (`bw = nNodes <= 2 ? graphs[a]->bwIntra : bwInter`), and
    // a tree's algorithm bandwidth at half its bus bandwidth (a ring's at nRanks / nsteps), so on two
    // nodes it does not see that a tree moves half a ring's bytes through the NICs: it takes the
    // ring for large buffers even where the tree would have run faster (sjeaugey, nccl-tests #196:
    // the tree beyond the network limit is what NCCL_ALGO=Tree forces). The choice here follows
    // the tuner's estimate on two nodes; the time is the physical model's for the choice.
    // The tuner's comparison is against the ring over one node's members, so it applies only to
    // the ops a ring runs (all_reduce, all_gather, reduce_scatter); all_to_all and send_recv run
    // direct, over two nodes as over one.
    const bool ring_op = op == CollectiveOp::all_reduce || op == CollectiveOp::all_gather ||
                         op == CollectiveOp::reduce_scatter;
    const bool tuner_choice = nn == 2 && ppn >= 2 && !only && ring_op;
    double tuner_base = 0;
    if (tuner_choice) {
        GroupPlacement one = g;
        one.size = static_cast<int>(ppn);
        one.members_per_node = static_cast<int>(ppn);
        one.nodes = 1;
        tuner_base = solve(op, Algorithm::ring, one).busbw.value();
    }

    AlgorithmCost best;
    double best_rank = 0;
    bool have = false;
    for (const auto a : cands) {
        const auto s = solve(op, a, g);
        // Per-step latencies: NCCL's table scaled so that the ring Simple step equals the profile's
        // intra_node_latency (inside a node) and inter_node_latency (between nodes).
        const std::size_t cls = s.nvlink_intra ? 0 : 1;
        const double s_intra = hw_.intra_node_latency.seconds() * 1e6 / kHwLat[cls][0][2];
        const double s_net = hw_.inter_node_latency.seconds() * 1e6 / kHwLat[2][0][2];
        for (int pidx = 0; pidx < 3; ++pidx) {
            const auto p = static_cast<Protocol>(pidx);
            const bool simple_only = a == Algorithm::nvls || a == Algorithm::nvls_tree || a == Algorithm::direct;
            if (simple_only && p != Protocol::simple) continue;
            // LL128 only where NCCL enables it by default: NVLink inside the node.
            if (p == Protocol::ll128 && !s.nvlink_intra) continue;
            double intra = kHwLat[cls][ai(a)][pi(p)] * s_intra;
            const double inter = kHwLat[2][ai(a)][pi(p)] * s_net;
            double lat_us = kBaseLat[ai(a)][pi(p)];
            // NCCL's refinements of a bus bandwidth for this algorithm and protocol.
            auto refine = [&](double bw) {
                switch (a) {
                case Algorithm::ring:
                    if (p == Protocol::ll)
                        bw = std::min(ll_max,
                                      bw * ((nn > 1 || op == CollectiveOp::all_reduce) ? 1.0 / 4.0 : 1.0 / 3.0));
                    if (p == Protocol::ll128) bw *= ppn < 2 ? kRingLl128OnePerNode : kRingLl128;
                    break;
                case Algorithm::tree:
                    // On 2 nodes a tree moves half the ring's bytes through the NICs and can beat
                    // the network limit when NVLink sustains it (sjeaugey, nccl-tests #196; NVIDIA/nccl
                    // #812); the flow solution has that. NCCL then derates trees by 0.92.
                    bw *= kTreeBw;
                    if (p == Protocol::ll) bw = std::min(bw / 3.8, ll_max);
                    if (p == Protocol::ll128) bw *= nn == 1 ? 7.0 / 9.0 : 120.0 / 128.0;
                    if (log_size < 23) bw *= kTreeCorrection[pi(p)][static_cast<std::size_t>(log_size)];
                    break;
                default: break;
                }
                return bw;
            };
            const double bw = refine(s.busbw.value());
            switch (a) {
            case Algorithm::ring: {
                const int nsteps = op == CollectiveOp::all_reduce ? 2 * (n - 1) : n - 1;
                int ninter = op == CollectiveOp::all_reduce ? (nn > 1 ? 2 * nn : 0) : nn - 1;
                ninter = std::min(ninter, nsteps);
                if (nn > 1) intra = std::max(intra, kNetOverheadUs * (p == Protocol::simple ? 3.0 : 1.0));
                lat_us += (nsteps - ninter) * intra + ninter * inter;
                break;
            }
            case Algorithm::tree: lat_us += 2.0 * ((ppn - 1.0) * intra + log2i(nn) * inter); break;
            case Algorithm::nvls: lat_us = intra + (nn > 1 ? inter : 0.0); break;
            case Algorithm::nvls_tree: lat_us = intra + 2.0 * log2i(nn) * inter; break;
            case Algorithm::direct: {
                // Not in NCCL's tuner: one kernel launch, one step of the slowest class crossed,
                // and the host posting one network operation per remote peer.
                const int remote = op == CollectiveOp::all_to_all ? n - lay.per_node : (nn > 1 ? 1 : 0);
                lat_us = hw_.kernel_overhead.seconds() * 1e6 +
                         (nn > 1 ? hw_.inter_node_latency : hw_.intra_node_latency).seconds() * 1e6 +
                         remote * kNetOverheadUs;
                break;
            }
            }
            if (!(bw > 0)) continue;
            const Time lat = Time::from_seconds(lat_us * 1e-6);
            const Time t = lat + Time::from_seconds(bus_bytes / bw);
            // The tuner's estimate (two nodes, ring and tree): the intra-node bandwidth refined
            // alike; a tree's algorithm bandwidth is half its bus bandwidth.
            double rank = t.seconds();
            if (tuner_choice && (a == Algorithm::ring || a == Algorithm::tree)) {
                const double est = refine(tuner_base);
                if (!(est > 0)) continue;
                rank = lat_us * 1e-6 +
                       (a == Algorithm::tree ? bytes.value() / (0.5 * est) : bus_bytes / est);
            }
            if (!have || rank < best_rank) {
                best = {a, p, lat, Bandwidth(bw), t};
                best_rank = rank;
                have = true;
            }
        }
    }
    if (!have) fail(fmt::format("no usable bandwidth for {} over {} GPU(s)", model::to_string(op), n));
    return best;
}

Bandwidth CollectiveModel::p2p_bandwidth(bool cross_node) const {
    std::lock_guard<std::mutex> lock(mutex_);
    if (auto it = p2p_cache_.find(cross_node); it != p2p_cache_.end()) return it->second;
    const int gpn = topo_.gpus_per_node();
    if (cross_node ? topo_.nodes() < 2 : gpn < 2) {
        throw InternalError(fmt::format("p2p: no {} transfer possible on {} node(s) x {} GPU(s)",
                                        cross_node ? "cross-node" : "intra-node", topo_.nodes(), gpn));
    }
    FlowModel fm{std::span<const double>(capacity_)};
    std::vector<LinkId> path;
    for (int g = 0; g < gpn; ++g) {
        path.clear();
        topo_.route(g, cross_node ? gpn + g : (g + 1) % gpn, path);
        std::vector<LinkUse> uses;
        for (const auto id : path) uses.push_back({id, 1.0});
        fm.add_flow(uses);
    }
    const auto rates = fm.solve();
    const Bandwidth bw(*std::min_element(rates.begin(), rates.end()));
    p2p_cache_.emplace(cross_node, bw);
    return bw;
}

Time CollectiveModel::p2p(bool cross_node, Bytes bytes) const {
    const Time lat = hw_.kernel_overhead + (cross_node ? hw_.inter_node_latency : hw_.intra_node_latency);
    return lat + model::transfer_time(bytes, p2p_bandwidth(cross_node));
}

} // namespace trainsim::sim
