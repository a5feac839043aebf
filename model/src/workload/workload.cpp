// Plan -> per-stage op programs: the entry point, and the names of the graph's enums. The builder
// itself is in parts (builder.hpp).
#include "trainsim/model/workload/workload.hpp"

#include "builder.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <map>
#include <span>
#include <stdexcept>
#include <tuple>

namespace trainsim::model {

std::size_t OpGraph::op_count() const {
    std::size_t n = 0;
    for (const auto& s : stages) n += s.ops.size();
    return n;
}

bool unfused_softmax_fuses(std::int64_t micro_batch, std::int64_t heads_per_rank, std::int64_t sq, std::int64_t sk) {
    return sk > 16 && sk <= 2048 && sq % 4 == 0 && (micro_batch * heads_per_rank) % 4 == 0;
}

OpGraph build_workload(const Plan& plan) { return build_workload(plan, WorkloadOrder::schedule); }

OpGraph build_workload(const Plan& plan, WorkloadOrder order) {
    // Proto id 0 is reserved as "none" for optional collectives.
    workload_detail::Builder b(plan, order);
    return b.build();
}

std::string to_string(OpKind v) {
    static constexpr std::array<const char*, 7> k{"gemm", "attention_fwd", "attention_bwd", "memory", "collective",
                                                 "send", "recv"};
    return k[static_cast<std::size_t>(v)];
}
std::string to_string(Stream v) {
    static constexpr std::array<const char*, kNumStreams> k{
        "compute", "tp_comm", "cp_comm", "dp_gather", "dp_reduce", "pp_send_fwd", "pp_recv_fwd", "pp_send_bwd",
        "pp_recv_bwd"};
    return k[static_cast<std::size_t>(v)];
}
std::string to_string(Category v) {
    static constexpr std::array<const char*, kNumCategories> k{"forward", "backward", "recompute", "optimizer",
                                                              "tp_comm", "cp_comm", "dp_comm", "pp_comm"};
    return k[static_cast<std::size_t>(v)];
}
std::string to_string(Group v) {
    static constexpr std::array<const char*, kNumGroups> k{"tp", "cp", "dp_cp", "dp_shard", "dp_replica", "pp"};
    return k[static_cast<std::size_t>(v)];
}
std::string to_string(CollectiveOp v) {
    static constexpr std::array<const char*, 5> k{"all_reduce", "all_gather", "reduce_scatter", "all_to_all",
                                                 "send_recv"};
    return k[static_cast<std::size_t>(v)];
}

} // namespace trainsim::model
