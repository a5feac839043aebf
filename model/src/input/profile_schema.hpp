// The hardware-profile file format as one table (docs/formats.md section 3): every
// `{value, source}` entry with its kind, bounds and member. The reader (profile_reader.cpp) and
// the writer (profile_writer.cpp) both walk it, so what one writes the other reads back exactly.
// Internal to model/src/input.
#pragma once

#include "trainsim/model/core/errors.hpp"
#include "trainsim/model/core/hardware_profile.hpp"

#include "input_support.hpp"

#include <algorithm>
#include <array>
#include <filesystem>
#include <set>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace trainsim::model::profile_schema {

enum class Kind {
    integer, // plain integer >= 1
    boolean,
    bytes,        // "80 GiB"
    bandwidth,    // "3.35 TB/s"
    duration,     // "4 us"
    fraction,     // plain number in (0, 1]
    nvls_ratio,   // plain number in (0, 2]: NVLS busbw can exceed the link rate
    slowdown,     // plain number in [0, 1]: 0 = no contention
    residual,     // plain number in [0, 1]: a fit's relative error, 0 = exact
    speed,        // plain number in (0, 4]: a speed relative to a reference machine
    power,        // "700 W", "2.8 kW"
    tile,         // [M, N], two integers >= 1
    peaks,        // precision -> FLOP rate entry ("989 TFLOP/s")
    efficiencies, // precision -> fraction entry
    reasons,      // precision -> plain string (no source: the text is its own explanation)
};

struct Entry {
    std::string_view path;
    Kind kind;
    bool required;
    // 0 is a value of its own, "none" (no NVLink: intra-node traffic over PCIe; no NICs: a single
    // node), accepted below the kind's physical range (docs/formats.md).
    bool zero_means_none = false;
    int HardwareProfile::*int_member = nullptr;
    double HardwareProfile::*double_member = nullptr;
    bool HardwareProfile::*bool_member = nullptr;
    Bytes HardwareProfile::*bytes_member = nullptr;
    Bandwidth HardwareProfile::*bandwidth_member = nullptr;
    Time HardwareProfile::*time_member = nullptr;
    Power HardwareProfile::*power_member = nullptr;
};

using HP = HardwareProfile;

// The physical range of each kind of value (issue #19): generous bounds around every GPU built or
// announced, so that no real profile is refused while a NaN-free but absurd value (a peak of 1e-300
// FLOP/s, a NIC count of 100000) is refused at its line instead of overflowing a time or the memory.
struct Bounds {
    double min, max;
    std::string_view basis;
};
// SMs (H100: 132, B200: 148), GPUs per node (NVL576: 576), NICs per node (8-16).
constexpr Bounds kIntegerBounds{1, 4096, "SM counts are ~100-200, GPUs and NICs per node at most 576"};
// HBM per GPU is at most 288 GB (B300); host reservations are a few GiB.
constexpr Bounds kByteBounds{0, 1.0 * kTiB * 1024, "HBM per GPU is at most 288 GB"};
// PCIe Gen1 x1 (250 MB/s) up to 100x the fastest HBM (8 TB/s).
constexpr Bounds kBandwidthBounds{1e6, 1e15, "links and memories run at 0.25 GB/s to 8 TB/s"};
// Latencies and per-kernel overheads are ns to ms; a calibrated GEMM of the largest shape takes seconds.
constexpr Bounds kLatencyBounds{0, 1.0, "latencies and overheads are ns to ms"};
constexpr Bounds kSampleTimeBounds{0, 3600, "one kernel or collective takes at most seconds"};
// A collective group spans at most 16 nodes of the largest NVLink domain; nccl-tests sizes run to
// a few GiB, and no GPU holds a buffer above 1 TiB.
constexpr Bounds kGroupBounds{2, 576.0 * 4096, "a collective group has 2 to a few hundred thousand ranks"};
constexpr Bounds kCollectiveBytesBounds{1, 1.0 * kTiB, "nccl-tests buffers are bytes to a few GiB"};
// Dense peaks of one GPU: 1 GFLOP/s to 100x B200's 2.25 PFLOP/s (BF16, dense).
constexpr Bounds kFlopRateBounds{1e9, 1e17, "one GPU's dense peak is 10-5000 TFLOP/s"};

// One GPU draws 50-1200 W (idle A100 ~50 W, B200 1000-1200 W); the host side of a node is
// 0.2-20 kW (a DGX-class node's CPUs, NICs, NVSwitches and fans are ~3 kW).
constexpr Bounds kGpuPowerBounds{10, 3000, "a GPU draws 50-1200 W (idle A100 ~50 W, B200 up to 1200 W)"};
constexpr Bounds kNodePowerBounds{100, 50000, "a node's host side draws 0.2-20 kW"};

// The power section is all or nothing: these four entries, optional together (docs/formats.md).
inline constexpr std::array<std::string_view, 4> kPowerPaths{"power.compute_busy", "power.comm_busy", "power.idle",
                                                             "power.node_overhead"};

// In file order.
inline const std::array<Entry, 44> kEntries{{
    {.path = "compute.sm_count", .kind = Kind::integer, .required = true, .int_member = &HP::sm_count},
    {.path = "compute.dense_peak", .kind = Kind::peaks, .required = true},
    {.path = "compute.unsupported", .kind = Kind::reasons, .required = false},
    {.path = "compute.gemm_efficiency", .kind = Kind::efficiencies, .required = true},
    {.path = "compute.gemm_tile", .kind = Kind::tile, .required = true},
    {.path = "compute.attention_efficiency.fwd",
     .kind = Kind::fraction,
     .required = true,
     .double_member = &HP::attention_fwd_efficiency},
    {.path = "compute.attention_efficiency.bwd",
     .kind = Kind::fraction,
     .required = true,
     .double_member = &HP::attention_bwd_efficiency},
    {.path = "compute.attention_efficiency.triton_fwd",
     .kind = Kind::fraction,
     .required = false,
     .double_member = &HP::triton_attention_fwd_efficiency},
    {.path = "compute.attention_efficiency.triton_bwd",
     .kind = Kind::fraction,
     .required = false,
     .double_member = &HP::triton_attention_bwd_efficiency},
    {.path = "compute.attention_efficiency.flash2_fwd",
     .kind = Kind::fraction,
     .required = false,
     .double_member = &HP::flash2_attention_fwd_efficiency},
    {.path = "compute.attention_efficiency.flash2_bwd",
     .kind = Kind::fraction,
     .required = false,
     .double_member = &HP::flash2_attention_bwd_efficiency},
    {.path = "compute.sustained_clock_ratio",
     .kind = Kind::fraction,
     .required = false,
     .double_member = &HP::sustained_clock_ratio},
    {.path = "compute.fp8_split_accumulate_speed",
     .kind = Kind::fraction,
     .required = false,
     .double_member = &HP::fp8_split_accumulate_speed},
    {.path = "compute.kernel_overhead", .kind = Kind::duration, .required = true, .time_member = &HP::kernel_overhead},
    {.path = "compute.host_op_overhead",
     .kind = Kind::duration,
     .required = false,
     .time_member = &HP::host_op_overhead},
    {.path = "memory.hbm_capacity", .kind = Kind::bytes, .required = true, .bytes_member = &HP::hbm_capacity},
    {.path = "memory.hbm_bandwidth", .kind = Kind::bandwidth, .required = true, .bandwidth_member = &HP::hbm_bandwidth},
    {.path = "memory.hbm_efficiency", .kind = Kind::fraction, .required = true, .double_member = &HP::hbm_efficiency},
    {.path = "memory.reserved", .kind = Kind::bytes, .required = true, .bytes_member = &HP::reserved_memory},
    {.path = "interconnect.nvlink_bandwidth",
     .kind = Kind::bandwidth,
     .required = true,
     .zero_means_none = true,
     .bandwidth_member = &HP::nvlink_bandwidth},
    {.path = "interconnect.nvlink_efficiency",
     .kind = Kind::fraction,
     .required = true,
     .double_member = &HP::nvlink_efficiency},
    {.path = "interconnect.nvls", .kind = Kind::boolean, .required = false, .bool_member = &HP::nvls},
    {.path = "interconnect.nvls_efficiency",
     .kind = Kind::nvls_ratio,
     .required = false,
     .double_member = &HP::nvls_efficiency},
    {.path = "interconnect.pcie_bandwidth",
     .kind = Kind::bandwidth,
     .required = true,
     .bandwidth_member = &HP::pcie_bandwidth},
    {.path = "interconnect.pcie_p2p_disabled",
     .kind = Kind::boolean,
     .required = false,
     .bool_member = &HP::pcie_p2p_disabled},
    {.path = "interconnect.pcie_efficiency",
     .kind = Kind::fraction,
     .required = true,
     .double_member = &HP::pcie_efficiency},
    {.path = "interconnect.intra_node_latency",
     .kind = Kind::duration,
     .required = true,
     .time_member = &HP::intra_node_latency},
    {.path = "interconnect.inter_node_latency",
     .kind = Kind::duration,
     .required = true,
     .time_member = &HP::inter_node_latency},
    {.path = "interconnect.nic_efficiency",
     .kind = Kind::fraction,
     .required = true,
     .double_member = &HP::nic_efficiency},
    {.path = "overlap.comm_compute_slowdown",
     .kind = Kind::slowdown,
     .required = true,
     .double_member = &HP::comm_compute_slowdown},
    // What a calibrated profile's fits miss (trust.cpp narrows the error bands with them).
    {.path = "calibration.compute_residual",
     .kind = Kind::residual,
     .required = false,
     .double_member = &HP::compute_fit_residual},
    {.path = "calibration.comm_residual",
     .kind = Kind::residual,
     .required = false,
     .double_member = &HP::comm_fit_residual},
    {.path = "node.gpus_per_node", .kind = Kind::integer, .required = true, .int_member = &HP::default_gpus_per_node},
    {.path = "node.nvlink_bridge_pairs",
     .kind = Kind::boolean,
     .required = false,
     .bool_member = &HP::nvlink_bridge_pairs},
    {.path = "node.nics_per_node",
     .kind = Kind::integer,
     .required = false,
     .zero_means_none = true,
     .int_member = &HP::default_nics_per_node},
    {.path = "node.nic_rate", .kind = Kind::bandwidth, .required = false, .bandwidth_member = &HP::default_nic_rate},
    {.path = "node.host_memory", .kind = Kind::bytes, .required = false, .bytes_member = &HP::default_host_memory},
    {.path = "node.host_memory_bandwidth",
     .kind = Kind::bandwidth,
     .required = false,
     .bandwidth_member = &HP::host_memory_bandwidth},
    {.path = "node.cpu_adam_efficiency",
     .kind = Kind::fraction,
     .required = false,
     .double_member = &HP::cpu_adam_efficiency},
    {.path = "node.host_cpu_speed", .kind = Kind::speed, .required = false, .double_member = &HP::host_cpu_speed},
    {.path = "power.compute_busy", .kind = Kind::power, .required = false, .power_member = &HP::power_compute_busy},
    {.path = "power.comm_busy", .kind = Kind::power, .required = false, .power_member = &HP::power_comm_busy},
    {.path = "power.idle", .kind = Kind::power, .required = false, .power_member = &HP::power_idle},
    {.path = "power.node_overhead", .kind = Kind::power, .required = false, .power_member = &HP::power_node_overhead},
}};

inline const std::vector<std::string>& precision_names() {
    static const std::vector<std::string> names{to_string(Precision::bf16), to_string(Precision::fp16),
                                                to_string(Precision::fp8)};
    return names;
}

inline Precision precision_of(const std::string& s) {
    for (auto p : {Precision::bf16, Precision::fp16, Precision::fp8})
        if (to_string(p) == s) return p;
    throw std::logic_error("precision_of: " + s);
}

inline std::string parent_of(std::string_view path) {
    const auto dot = path.rfind('.');
    return dot == std::string_view::npos ? std::string() : std::string(path.substr(0, dot));
}

// Maps that hold entries: "compute", "compute.attention_efficiency", ...
inline std::set<std::string> containers() {
    std::set<std::string> out;
    for (const auto& e : kEntries)
        for (std::string p = parent_of(e.path); !p.empty(); p = parent_of(p)) out.insert(p);
    return out;
}

// Names allowed directly under `parent` ("" = the top level).
inline std::vector<std::string> children(const std::string& parent) {
    std::vector<std::string> out;
    auto add = [&](const std::string& path) {
        if (parent_of(path) != parent) return;
        const std::string leaf = parent.empty() ? path : path.substr(parent.size() + 1);
        if (std::find(out.begin(), out.end(), leaf) == out.end()) out.push_back(leaf);
    };
    if (parent.empty())
        for (const char* k : {"id", "name", "provenance"}) out.emplace_back(k);
    for (const auto& c : containers()) add(c);
    for (const auto& e : kEntries) add(std::string(e.path));
    if (parent.empty()) out.emplace_back("calibrated");
    return out;
}

inline const std::vector<std::string> kCollectiveOps{"all_reduce", "all_gather", "reduce_scatter", "all_to_all",
                                              "send_recv"};
inline const std::vector<std::string> kScopes{"intra_node", "inter_node"};

// A profile file that cannot be read or written at all (no line to point at).
[[noreturn]] inline void fail(const std::filesystem::path& file, std::string message) {
    throw ProfileError({Diagnostic{file.string(), 0, 0, "", std::move(message)}});
}

} // namespace trainsim::model::profile_schema
