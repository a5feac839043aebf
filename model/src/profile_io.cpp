// Reading and writing hardware profiles (docs/formats.md section 3). One table below lists every
// `{value, source}` entry with its kind; the reader and the writer both walk it, so what one
// writes the other reads back exactly (values are written in a unit that parses back to the same
// double, or in the base unit when none does).
#include "trainsim/model/loader.hpp"

#include "input_support.hpp"

#include <fmt/format.h>

#include <array>
#include <fstream>
#include <random>
#include <set>

namespace trainsim::model {
namespace fs = std::filesystem;
using detail::Diags;
using detail::Field;
using detail::report;
using detail::Site;

namespace {

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
    tile,         // [M, N], two integers >= 1
    peaks,        // precision -> FLOP rate entry ("989 TFLOP/s")
    efficiencies, // precision -> fraction entry
    reasons,      // precision -> plain string (no source: the text is its own explanation)
};

struct Entry {
    std::string_view path;
    Kind kind;
    bool required;
    int HardwareProfile::*int_member = nullptr;
    double HardwareProfile::*double_member = nullptr;
    bool HardwareProfile::*bool_member = nullptr;
    Bytes HardwareProfile::*bytes_member = nullptr;
    Bandwidth HardwareProfile::*bandwidth_member = nullptr;
    Time HardwareProfile::*time_member = nullptr;
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

// In file order.
const std::array<Entry, 37> kEntries{{
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
    {.path = "node.nics_per_node", .kind = Kind::integer, .required = false, .int_member = &HP::default_nics_per_node},
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
}};

const std::vector<std::string>& precision_names() {
    static const std::vector<std::string> names{to_string(Precision::bf16), to_string(Precision::fp16),
                                                to_string(Precision::fp8)};
    return names;
}

Precision precision_of(const std::string& s) {
    for (auto p : {Precision::bf16, Precision::fp16, Precision::fp8})
        if (to_string(p) == s) return p;
    throw std::logic_error("precision_of: " + s);
}

std::string parent_of(std::string_view path) {
    const auto dot = path.rfind('.');
    return dot == std::string_view::npos ? std::string() : std::string(path.substr(0, dot));
}

// Maps that hold entries: "compute", "compute.attention_efficiency", ...
std::set<std::string> containers() {
    std::set<std::string> out;
    for (const auto& e : kEntries)
        for (std::string p = parent_of(e.path); !p.empty(); p = parent_of(p)) out.insert(p);
    return out;
}

// Names allowed directly under `parent` ("" = the top level).
std::vector<std::string> children(const std::string& parent) {
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

const std::vector<std::string> kCollectiveOps{"all_reduce", "all_gather", "reduce_scatter", "all_to_all",
                                              "send_recv"};
const std::vector<std::string> kScopes{"intra_node", "inter_node"};

// ---------------------------------------------------------------------------------------------
// Reading

class ProfileReader {
public:
    ProfileReader(std::string file, HardwareProfile& p, Diags& out) : file_(std::move(file)), p_(p), out_(out) {}

    void read(const YAML::Node& root) {
        root_site_ = detail::site_at(file_, root.Mark(), "");
        if (root_site_.line == 0) root_site_ = Site{file_, 1, 1, ""};
        bool has_id = false, has_name = false, has_provenance = false;
        for (const Field& f : detail::fields_of(root, file_, "", out_)) {
            if (f.name == "id") {
                has_id = true;
                if (auto v = detail::read_string(f.value, f.value_site, out_)) p_.id = *v;
                id_site_ = f.value_site;
            } else if (f.name == "name") {
                has_name = true;
                if (auto v = detail::read_string(f.value, f.value_site, out_)) p_.name = *v;
            } else if (f.name == "provenance") {
                has_provenance = true;
                const std::vector<std::string> allowed{to_string(Provenance::datasheet_published),
                                                       to_string(Provenance::calibrated)};
                if (auto v = detail::read_enum(f.value, f.value_site, allowed, out_))
                    p_.provenance = *v == allowed[1] ? Provenance::calibrated : Provenance::datasheet_published;
            } else if (f.name == "calibrated") {
                read_calibrated(f);
            } else {
                dispatch(f, f.name);
            }
        }
        if (!has_id) missing("id");
        if (!has_name) missing("name");
        if (!has_provenance) missing("provenance");
        for (const auto& e : kEntries)
            if (e.required && !seen_.contains(std::string(e.path))) missing(std::string(e.path));
        cross_checks();
    }

    [[nodiscard]] const Site& id_site() const { return id_site_; }

private:
    void missing(const std::string& path) {
        // Blame the enclosing map where it was written, else the top of the file.
        Site at = root_site_;
        for (std::string p = parent_of(path); !p.empty(); p = parent_of(p)) {
            if (auto it = container_sites_.find(p); it != container_sites_.end()) {
                at = it->second;
                break;
            }
        }
        at.key = path;
        report(out_, at, "required key is missing");
    }

    // A field at `path`: an entry, a map of entries, or unknown.
    void dispatch(const Field& f, const std::string& path) {
        for (const auto& e : kEntries) {
            if (e.path == path) {
                seen_.insert(path);
                entry_sites_[path] = f.key_site;
                read_entry(e, f);
                return;
            }
        }
        static const std::set<std::string> maps = containers();
        if (maps.contains(path)) {
            container_sites_[path] = f.key_site;
            if (!f.value.IsMap()) {
                report(out_, f.value_site,
                       fmt::format("expected a map ({}), got {}", detail::join_list(children(path)),
                                   detail::describe(f.value)));
                return;
            }
            for (const Field& g : detail::fields_of(f.value, file_, f.key_site.key, out_))
                dispatch(g, path + "." + g.name);
            return;
        }
        const std::string parent = parent_of(path);
        report(out_, f.key_site,
               fmt::format("unknown key '{}'{}", f.name, detail::did_you_mean(f.name, children(parent))));
    }

    // The `value` of a `{value, source}` map (the source is recorded under `path`), or nothing.
    std::optional<Field> valued(const Field& f, const std::string& path) {
        if (!f.value.IsMap()) {
            report(out_, f.value_site,
                   fmt::format("expected {{value: ..., source: \"...\"}} (every number carries its source), got {}",
                               detail::describe(f.value)));
            return std::nullopt;
        }
        std::optional<Field> value;
        bool has_source = false;
        for (const Field& g : detail::fields_of(f.value, file_, f.key_site.key, out_)) {
            if (g.name == "value") {
                value = g;
            } else if (g.name == "source") {
                has_source = true;
                if (auto s = detail::read_string(g.value, g.value_site, out_)) p_.sources[path] = *s;
            } else {
                report(out_, g.key_site,
                       fmt::format("unknown key '{}'{} (an entry has only value and source)", g.name,
                                   detail::did_you_mean(g.name, {"value", "source"})));
            }
        }
        if (!has_source)
            report(out_, f.key_site, "missing source: every value needs one (datasheet, paper or measurement)");
        if (!value) {
            report(out_, f.key_site, "missing value");
            return std::nullopt;
        }
        value->value_site.key = path;  // problems with the value are the entry's problems
        return value;
    }

    void read_entry(const Entry& e, const Field& f) {
        const std::string path(e.path);
        if (e.kind == Kind::peaks || e.kind == Kind::efficiencies || e.kind == Kind::reasons) {
            read_per_precision(e, f);
            return;
        }
        auto v = valued(f, path);
        if (!v) return;
        const YAML::Node& n = v->value;
        const Site& at = v->value_site;
        switch (e.kind) {
        case Kind::integer:
            if (auto x = detail::read_int(n, at, 1, out_); x && within(*x, kIntegerBounds, at, n)) p_.*e.int_member = *x;
            break;
        case Kind::boolean:
            if (auto x = detail::read_bool(n, at, out_)) p_.*e.bool_member = *x;
            break;
        case Kind::bytes:
            if (auto x = detail::read_with_unit(n, at, "a size (e.g. '80 GiB')", parse_bytes, out_);
                x && within(x->value(), kByteBounds, at, n))
                p_.*e.bytes_member = *x;
            break;
        case Kind::bandwidth:
            if (auto x = detail::read_with_unit(n, at, "a bandwidth (e.g. '450 GB/s')", parse_bandwidth, out_);
                x && within(x->value(), kBandwidthBounds, at, n))
                p_.*e.bandwidth_member = *x;
            break;
        case Kind::duration:
            if (auto x = detail::read_with_unit(n, at, "a duration (e.g. '4 us')", parse_duration, out_);
                x && within(x->seconds(), kLatencyBounds, at, n))
                p_.*e.time_member = *x;
            break;
        case Kind::fraction:
        case Kind::nvls_ratio:
        case Kind::slowdown:
        case Kind::residual:
            if (auto x = read_ratio(e.kind, n, at)) p_.*e.double_member = *x;
            break;
        case Kind::tile: read_tile(n, at); break;
        case Kind::peaks:
        case Kind::efficiencies:
        case Kind::reasons: break;  // handled above; flop rates only appear per precision
        }
    }

    // `x` within the physical bounds of its kind, else a diagnostic at `at`.
    bool within(double x, const Bounds& b, const Site& at, const YAML::Node& n) {
        if (x >= b.min && x <= b.max) return true;
        report(out_, at, fmt::format("'{}' is outside the physical range of this value ({})", n.Scalar(), b.basis));
        return false;
    }

    // A plain number in (0, 1], (0, 2] for the NVLS ratio, or [0, 1] for the slowdown.
    std::optional<double> read_ratio(Kind kind, const YAML::Node& n, const Site& at) {
        const double hi = kind == Kind::nvls_ratio ? 2.0 : 1.0;
        const bool zero_ok = kind == Kind::slowdown || kind == Kind::residual;
        auto x = detail::read_number(n, at, -HUGE_VAL, HUGE_VAL, out_);
        if (x && (*x > hi || *x < 0.0 || (*x == 0.0 && !zero_ok))) {
            report(out_, at, fmt::format("must lie in {}0, {}], got {}", zero_ok ? "[" : "(", hi, *x));
            return std::nullopt;
        }
        return x;
    }

    void read_tile(const YAML::Node& n, const Site& at) {
        if (!n.IsSequence() || n.size() != 2) {
            report(out_, at, fmt::format("expected [M, N], two integers, got {}", detail::describe(n)));
            return;
        }
        auto m = detail::read_int(n[0], detail::site_at(file_, n[0].Mark(), at.key + "[0]"), 1, out_);
        auto nn = detail::read_int(n[1], detail::site_at(file_, n[1].Mark(), at.key + "[1]"), 1, out_);
        if (m) p_.gemm_tile_m = *m;
        if (nn) p_.gemm_tile_n = *nn;
    }

    void read_per_precision(const Entry& e, const Field& f) {
        container_sites_[std::string(e.path)] = f.key_site;
        if (!f.value.IsMap()) {
            report(out_, f.value_site,
                   fmt::format("expected a map from precision ({}) to {}, got {}",
                               detail::join_list(precision_names()),
                               e.kind == Kind::reasons ? "a reason" : "{value, source}", detail::describe(f.value)));
            return;
        }
        for (const Field& g : detail::fields_of(f.value, file_, f.key_site.key, out_)) {
            const auto& names = precision_names();
            if (std::find(names.begin(), names.end(), g.name) == names.end()) {
                report(out_, g.key_site,
                       fmt::format("unknown precision '{}'{} (one of: {})", g.name, detail::did_you_mean(g.name, names),
                                   detail::join_list(names)));
                continue;
            }
            const Precision prec = precision_of(g.name);
            if (e.kind == Kind::reasons) {
                if (auto s = detail::read_string(g.value, g.value_site, out_)) {
                    p_.unsupported_reason[prec] = *s;
                    reason_sites_[prec] = g.key_site;
                }
                continue;
            }
            auto v = valued(g, g.key_site.key);
            if (!v) continue;
            if (e.kind == Kind::peaks) {
                if (auto x = detail::read_with_unit(v->value, v->value_site, "a FLOP rate (e.g. '989 TFLOP/s')",
                                                    parse_flop_rate, out_)) {
                    if (x->value() <= 0) report(out_, v->value_site, "must be positive");
                    else if (within(x->value(), kFlopRateBounds, v->value_site, v->value)) p_.dense_peak[prec] = *x;
                }
            } else if (auto x = read_ratio(Kind::fraction, v->value, v->value_site)) {
                p_.gemm_efficiency[prec] = *x;
                efficiency_sites_[prec] = g.key_site;
            }
        }
    }

    void read_calibrated(const Field& f) {
        container_sites_["calibrated"] = f.key_site;
        if (!f.value.IsMap()) {
            report(out_, f.value_site,
                   fmt::format("expected a map (source, gemm, memory, collectives, collective_times), got {}",
                               detail::describe(f.value)));
            return;
        }
        bool has_source = false;
        for (const Field& g : detail::fields_of(f.value, file_, "calibrated", out_)) {
            if (g.name == "source") {
                has_source = true;
                if (auto s = detail::read_string(g.value, g.value_site, out_)) p_.sources["calibrated"] = *s;
            } else if (g.name == "gemm") {
                for_each_item(g, [&](const YAML::Node& item, const Site& at) { read_gemm_sample(item, at); });
            } else if (g.name == "collectives") {
                for_each_item(g, [&](const YAML::Node& item, const Site& at) { read_collective(item, at); });
            } else if (g.name == "collective_times") {
                for_each_item(g, [&](const YAML::Node& item, const Site& at) { read_collective_time(item, at); });
            } else if (g.name == "memory") {
                read_memory_curves(g);
            } else {
                report(out_, g.key_site,
                       fmt::format("unknown key '{}'{}", g.name,
                                   detail::did_you_mean(g.name, {"source", "gemm", "memory", "collectives",
                                                                            "collective_times"})));
            }
        }
        if (!has_source)
            report(out_, f.key_site, "missing source: say which measurements the calibrated tables come from");
    }

    template <class Fn> void for_each_item(const Field& list, Fn fn) {
        if (!list.value.IsSequence()) {
            report(out_, list.value_site, fmt::format("expected a list, got {}", detail::describe(list.value)));
            return;
        }
        std::size_t i = 0;
        for (auto it = list.value.begin(); it != list.value.end(); ++it, ++i) {
            const YAML::Node item = *it;
            const Site at = detail::site_at(file_, item.Mark(), fmt::format("{}[{}]", list.key_site.key, i));
            if (!item.IsMap()) {
                report(out_, at, fmt::format("expected a map, got {}", detail::describe(item)));
                continue;
            }
            fn(item, at);
        }
    }

    // The fields of a table row, checked against the allowed names; all of them are required.
    std::optional<std::map<std::string, Field>> row(const YAML::Node& item, const Site& at,
                                                    const std::vector<std::string>& names) {
        std::map<std::string, Field> fields;
        const auto before = out_.size();
        for (const Field& g : detail::fields_of(item, file_, at.key, out_)) {
            if (std::find(names.begin(), names.end(), g.name) == names.end())
                report(out_, g.key_site, fmt::format("unknown key '{}'{} (one of: {})", g.name,
                                                     detail::did_you_mean(g.name, names), detail::join_list(names)));
            else fields[g.name] = g;
        }
        for (const auto& n : names)
            if (!fields.contains(n))
                report(out_, Site{at.file, at.line, at.col, at.key + "." + n}, "required key is missing");
        if (out_.size() != before) return std::nullopt;
        return fields;
    }

    // A measured time: a positive duration within the bounds of one kernel or collective.
    std::optional<Time> sample_time(const Field& f) {
        auto t = detail::read_with_unit(f.value, f.value_site, "a duration", parse_duration, out_);
        if (!t) return std::nullopt;
        if (t->count_ps() <= 0) {
            report(out_, f.value_site, "must be positive");
            return std::nullopt;
        }
        if (!within(t->seconds(), kSampleTimeBounds, f.value_site, f.value)) return std::nullopt;
        return t;
    }

    void read_gemm_sample(const YAML::Node& item, const Site& at) {
        auto r = row(item, at, {"precision", "m", "n", "k", "time"});
        if (!r) return;
        auto& f = *r;
        auto prec = detail::read_enum(f["precision"].value, f["precision"].value_site, precision_names(), out_);
        auto m = detail::read_int(f["m"].value, f["m"].value_site, 1, out_);
        auto n = detail::read_int(f["n"].value, f["n"].value_site, 1, out_);
        auto k = detail::read_int(f["k"].value, f["k"].value_site, 1, out_);
        const auto t = sample_time(f["time"]);
        if (prec && m && n && k && t) p_.gemm_table.push_back(GemmSample{precision_of(*prec), *m, *n, *k, *t});
    }

    void read_collective(const YAML::Node& item, const Site& at) {
        auto r = row(item, at, {"op", "group_size", "scope", "alpha", "bandwidth"});
        if (!r) return;
        auto& f = *r;
        auto op = detail::read_enum(f["op"].value, f["op"].value_site, kCollectiveOps, out_);
        auto group = detail::read_int(f["group_size"].value, f["group_size"].value_site, 2, out_);
        auto scope = detail::read_enum(f["scope"].value, f["scope"].value_site, kScopes, out_);
        auto curve = alpha_beta(f["alpha"], f["bandwidth"]);
        if (op && group && scope && curve) p_.collectives.push_back(CollectiveCurve{*op, *group, *scope, *curve});
    }

    void read_collective_time(const YAML::Node& item, const Site& at) {
        auto r = row(item, at, {"op", "group_size", "scope", "bytes", "time"});
        if (!r) return;
        auto& f = *r;
        auto op = detail::read_enum(f["op"].value, f["op"].value_site, kCollectiveOps, out_);
        const auto group = detail::read_int(f["group_size"].value, f["group_size"].value_site, 2, out_);
        const bool group_ok = group.has_value() && within(static_cast<double>(group.value_or(0)), kGroupBounds,
                                                          f["group_size"].value_site, f["group_size"].value);
        auto scope = detail::read_enum(f["scope"].value, f["scope"].value_site, kScopes, out_);
        auto b = detail::read_with_unit(f["bytes"].value, f["bytes"].value_site, "a size", parse_bytes, out_);
        bool bytes_ok = b.has_value();
        if (bytes_ok && !(b->value() >= 1.0)) {
            report(out_, f["bytes"].value_site, "must be at least 1 B");
            bytes_ok = false;
        }
        bytes_ok = bytes_ok && within(b->value(), kCollectiveBytesBounds, f["bytes"].value_site, f["bytes"].value);
        const auto t = sample_time(f["time"]);
        if (op && group_ok && scope && bytes_ok && t)
            p_.collective_times.push_back(CollectiveSample{*op, group.value_or(0), *scope, *b, *t});
    }

    void read_memory_curves(const Field& g) {
        if (!g.value.IsMap()) {
            report(out_, g.value_site,
                   fmt::format("expected a map from precision to {{alpha, bandwidth}}, got {}", detail::describe(g.value)));
            return;
        }
        for (const Field& h : detail::fields_of(g.value, file_, g.key_site.key, out_)) {
            const auto& names = precision_names();
            if (std::find(names.begin(), names.end(), h.name) == names.end()) {
                report(out_, h.key_site,
                       fmt::format("unknown precision '{}'{} (one of: {})", h.name, detail::did_you_mean(h.name, names),
                                   detail::join_list(names)));
                continue;
            }
            if (!h.value.IsMap()) {
                report(out_, h.value_site, fmt::format("expected {{alpha, bandwidth}}, got {}", detail::describe(h.value)));
                continue;
            }
            auto r = row(h.value, h.key_site, {"alpha", "bandwidth"});
            if (!r) continue;
            if (auto curve = alpha_beta((*r)["alpha"], (*r)["bandwidth"])) p_.memory_curve[precision_of(h.name)] = *curve;
        }
    }

    std::optional<AlphaBeta> alpha_beta(const Field& alpha, const Field& bandwidth) {
        auto a = detail::read_with_unit(alpha.value, alpha.value_site, "a duration (e.g. '5 us')", parse_duration, out_);
        auto bw = detail::read_with_unit(bandwidth.value, bandwidth.value_site, "a bandwidth (e.g. '3 TB/s')",
                                         parse_bandwidth, out_);
        if (bw && bw->value() <= 0) {
            report(out_, bandwidth.value_site, "must be positive");
            return std::nullopt;
        }
        if (a && !within(a->seconds(), kLatencyBounds, alpha.value_site, alpha.value)) a.reset();
        if (bw && !within(bw->value(), kBandwidthBounds, bandwidth.value_site, bandwidth.value)) bw.reset();
        if (!a || !bw) return std::nullopt;
        return AlphaBeta{*a, *bw};
    }

    // Where the map `path` was written, with `key` as the key path (the top of the file if absent).
    Site inside(const std::string& path, std::string key) const {
        auto it = container_sites_.find(path);
        Site at = it != container_sites_.end() ? it->second : root_site_;
        at.key = std::move(key);
        return at;
    }

    Site entry_site(const std::string& path) const {
        auto it = entry_sites_.find(path);
        return it != entry_sites_.end() ? it->second : inside(parent_of(path), path);
    }

    void cross_checks() {
        if (seen_.contains("compute.dense_peak") && !p_.dense_peak.contains(Precision::bf16) &&
            !has_errors_at("compute.dense_peak"))
            report(out_, inside("compute.dense_peak", "compute.dense_peak.bf16"),
                   "required key is missing (attention efficiencies are fractions of the BF16 peak)");
        for (const auto& [prec, at] : reason_sites_)
            if (p_.dense_peak.contains(prec))
                report(out_, at, fmt::format("{} has a dense_peak and is also listed as unsupported", to_string(prec)));
        for (const auto& [prec, at] : efficiency_sites_)
            if (seen_.contains("compute.dense_peak") && !p_.dense_peak.contains(prec) && !has_errors_at("compute.dense_peak"))
                report(out_, at, fmt::format("gemm_efficiency for {} without a dense_peak for it", to_string(prec)));
        if (p_.nvls && !seen_.contains("interconnect.nvls_efficiency")) missing("interconnect.nvls_efficiency");
        if (seen_.contains("memory.reserved") && seen_.contains("memory.hbm_capacity") &&
            p_.hbm_capacity.value() > 0 && p_.reserved_memory >= p_.hbm_capacity)
            report(out_, entry_site("memory.reserved"),
                   fmt::format("reserved memory {} is not below the HBM capacity {}", format_bytes(p_.reserved_memory),
                               format_bytes(p_.hbm_capacity)));
        if (seen_.contains("memory.hbm_capacity") && p_.hbm_capacity.value() <= 0)
            report(out_, entry_site("memory.hbm_capacity"), "must be positive");
    }

    bool has_errors_at(const std::string& prefix) const {
        return std::any_of(out_.begin(), out_.end(), [&](const Diagnostic& d) { return d.key.starts_with(prefix); });
    }

    std::string file_;
    HardwareProfile& p_;
    Diags& out_;
    Site root_site_;
    Site id_site_;
    std::set<std::string> seen_;
    std::map<std::string, Site> container_sites_;
    std::map<std::string, Site> entry_sites_;
    std::map<Precision, Site> reason_sites_;
    std::map<Precision, Site> efficiency_sites_;
};

HardwareProfile read_profile(const fs::path& file, const std::optional<std::string>& expected_id) {
    const std::string name = file.string();
    Diags out;
    auto text = detail::read_text(file, Site{name, 0, 0, ""}, out);
    if (!text) throw ProfileError(out);
    auto root = detail::parse_yaml(*text, name, out);
    if (!root) throw ProfileError(out);
    if (!root->IsMap()) {
        report(out, Site{name, 1, 1, ""},
               fmt::format("a hardware profile is a map of keys (id, name, compute, memory, ...), got {}",
                           root->IsNull() ? std::string("an empty file") : detail::describe(*root)));
        throw ProfileError(out);
    }
    HardwareProfile p;
    p.source_file = name;
    ProfileReader reader(name, p, out);
    reader.read(*root);
    if (expected_id && !p.id.empty() && p.id != *expected_id)
        report(out, reader.id_site(),
               fmt::format("id '{}' does not match the name it was looked up by ('{}')", p.id, *expected_id));
    if (!out.empty()) throw ProfileError(detail::deduplicate(out));
    return p;
}

// ---------------------------------------------------------------------------------------------
// Writing

// A YAML double-quoted string.
std::string quote(std::string_view s) {
    std::string out = "\"";
    for (const char c : s) {
        switch (c) {
        case '"': out += "\\\""; break;
        case '\\': out += "\\\\"; break;
        case '\n': out += "\\n"; break;
        case '\t': out += "\\t"; break;
        default:
            if (static_cast<unsigned char>(c) < 0x20) out += fmt::format("\\x{:02x}", static_cast<unsigned>(c));
            else out += c;
        }
    }
    return out + "\"";
}

// "<number> <unit>" that `parse` reads back as exactly `v`: the preferred unit for the magnitude
// if its shortest decimal form round-trips, else any unit that does, else the base unit (exact).
template <class Parse>
std::string exact_with_unit(double v, const std::vector<std::pair<const char*, double>>& units, Parse parse) {
    auto try_unit = [&](const std::pair<const char*, double>& u) -> std::optional<std::string> {
        std::string s = fmt::format("{} {}", v / u.second, u.first);
        if (parse(s) == v) return s;
        return std::nullopt;
    };
    for (const auto& u : units)
        if (v >= u.second)
            if (auto s = try_unit(u)) return *s;
    for (const auto& u : units)
        if (auto s = try_unit(u)) return *s;
    return fmt::format("{} {}", v, units.back().first);  // base unit: factor 1, exact
}

std::string format_exact(Bytes b) {
    return exact_with_unit(b.value(), {{"TiB", kTiB}, {"GiB", kGiB}, {"MiB", kMiB}, {"KiB", kKiB}, {"B", 1}},
                           [](const std::string& s) { return parse_bytes(s).value(); });
}
std::string format_exact(Bandwidth bw) {
    return exact_with_unit(bw.value(),
                           {{"TB/s", kTera}, {"GB/s", kGiga}, {"MB/s", kMega}, {"kB/s", kKilo}, {"B/s", 1}},
                           [](const std::string& s) { return parse_bandwidth(s).value(); });
}
std::string format_exact(FlopRate r) {
    return exact_with_unit(r.value(), {{"TFLOP/s", kTera}, {"GFLOP/s", kGiga}, {"MFLOP/s", kMega}, {"FLOP/s", 1}},
                           [](const std::string& s) { return parse_flop_rate(s).value(); });
}
std::string format_exact(Time t) {
    const double ps = static_cast<double>(t.count_ps());
    for (const auto& [unit, factor] : std::vector<std::pair<const char*, double>>{
             {"s", 1e12}, {"ms", 1e9}, {"us", 1e6}, {"ns", 1e3}}) {
        if (ps < factor) continue;
        std::string s = fmt::format("{} {}", ps / factor, unit);
        if (parse_duration(s) == t) return s;
    }
    return fmt::format("{} ps", t.count_ps());
}

// Renders the profile; values without a source are reported in `missing`.
class ProfileWriter {
public:
    ProfileWriter(const HardwareProfile& p, const std::string& file, Diags& missing)
        : p_(p), file_(file), missing_(missing) {}

    std::string render() {
        text_ = fmt::format("# Hardware profile (docs/formats.md section 3). Written by trainsim.\n"
                            "id: {}\nname: {}\nprovenance: {}\n",
                            quote(p_.id), quote(p_.name), to_string(p_.provenance));
        for (const auto& e : kEntries) write_entry(e);
        write_calibrated();
        return text_;
    }

private:
    // Opens the maps leading to `path` (closing those it leaves) and returns its indentation.
    std::string open(const std::string& path) {
        std::vector<std::string> parts;
        for (std::string p = parent_of(path); !p.empty(); p = parent_of(p)) parts.insert(parts.begin(), p);
        std::size_t keep = 0;
        while (keep < open_.size() && keep < parts.size() && open_[keep] == parts[keep]) ++keep;
        open_.resize(keep);
        for (std::size_t i = keep; i < parts.size(); ++i) {
            const std::string leaf = parts[i].substr(parts[i].rfind('.') == std::string::npos ? 0 : parts[i].rfind('.') + 1);
            text_ += fmt::format("{}{}:\n", std::string(2 * i, ' '), leaf);
            open_.push_back(parts[i]);
        }
        return std::string(2 * parts.size(), ' ');
    }

    std::string source_of(const std::string& path) {
        auto it = p_.sources.find(path);
        if (it == p_.sources.end() || it->second.empty()) {
            report(missing_, Site{file_, 0, 0, path}, "no source for this value; refusing to write it without one");
            return quote("");
        }
        return quote(it->second);
    }

    void line(const std::string& path, const std::string& value) {
        const std::string indent = open(path);
        const std::string leaf = path.substr(path.rfind('.') + 1);
        text_ += fmt::format("{}{}: {{value: {}, source: {}}}\n", indent, leaf, value, source_of(path));
    }

    void write_entry(const Entry& e) {
        const std::string path(e.path);
        if (!e.required && e.kind != Kind::reasons && !p_.sources.contains(path) &&
            !(e.kind == Kind::boolean && p_.*e.bool_member) &&
            !(e.kind == Kind::nvls_ratio && p_.nvls))
            return;  // optional and not given
        switch (e.kind) {
        case Kind::integer: line(path, fmt::format("{}", p_.*e.int_member)); break;
        case Kind::boolean: line(path, p_.*e.bool_member ? "true" : "false"); break;
        case Kind::bytes: line(path, quote(format_exact(p_.*e.bytes_member))); break;
        case Kind::bandwidth: line(path, quote(format_exact(p_.*e.bandwidth_member))); break;
        case Kind::duration: line(path, quote(format_exact(p_.*e.time_member))); break;
        case Kind::fraction:
        case Kind::nvls_ratio:
        case Kind::slowdown:
        case Kind::residual:
            line(path, fmt::format("{}", p_.*e.double_member));
            break;
        case Kind::tile: line(path, fmt::format("[{}, {}]", p_.gemm_tile_m, p_.gemm_tile_n)); break;
        case Kind::peaks:
            for (const auto& [prec, rate] : p_.dense_peak)
                line(path + "." + to_string(prec), quote(format_exact(rate)));
            break;
        case Kind::efficiencies:
            for (const auto& [prec, eff] : p_.gemm_efficiency)
                line(path + "." + to_string(prec), fmt::format("{}", eff));
            break;
        case Kind::reasons:
            for (const auto& [prec, reason] : p_.unsupported_reason) {
                const std::string indent = open(path + "." + to_string(prec));
                text_ += fmt::format("{}{}: {}\n", indent, to_string(prec), quote(reason));
            }
            break;
        }
    }

    void write_calibrated() {
        if (p_.gemm_table.empty() && p_.memory_curve.empty() && p_.collectives.empty() && p_.collective_times.empty())
            return;
        open_.clear();
        text_ += fmt::format("calibrated:\n  source: {}\n", source_of("calibrated"));
        if (!p_.gemm_table.empty()) {
            text_ += "  gemm:\n";
            for (const auto& g : p_.gemm_table)
                text_ += fmt::format("    - {{precision: {}, m: {}, n: {}, k: {}, time: {}}}\n", to_string(g.precision),
                                     g.m, g.n, g.k, quote(format_exact(g.time)));
        }
        if (!p_.memory_curve.empty()) {
            text_ += "  memory:\n";
            for (const auto& [prec, c] : p_.memory_curve)
                text_ += fmt::format("    {}: {{alpha: {}, bandwidth: {}}}\n", to_string(prec),
                                     quote(format_exact(c.alpha)), quote(format_exact(c.beta_bw)));
        }
        if (!p_.collectives.empty()) {
            text_ += "  collectives:\n";
            for (const auto& c : p_.collectives)
                text_ += fmt::format("    - {{op: {}, group_size: {}, scope: {}, alpha: {}, bandwidth: {}}}\n", c.op,
                                     c.group_size, c.scope, quote(format_exact(c.curve.alpha)),
                                     quote(format_exact(c.curve.beta_bw)));
        }
        if (!p_.collective_times.empty()) {
            text_ += "  collective_times:\n";
            for (const auto& c : p_.collective_times)
                text_ += fmt::format("    - {{op: {}, group_size: {}, scope: {}, bytes: {}, time: {}}}\n", c.op,
                                     c.group_size, c.scope, quote(format_exact(c.bytes)), quote(format_exact(c.time)));
        }
    }

    const HardwareProfile& p_;
    std::string file_;
    Diags& missing_;
    std::string text_;
    std::vector<std::string> open_;  // maps currently open, outermost first
};

[[noreturn]] void fail(const fs::path& file, std::string message) {
    throw ProfileError({Diagnostic{file.string(), 0, 0, "", std::move(message)}});
}

} // namespace

fs::path profile_path(const std::string& id_or_path, const fs::path& relative_to, const fs::path& data_dir) {
    const bool is_path = id_or_path.find('/') != std::string::npos || id_or_path.ends_with(".yaml") ||
                         id_or_path.ends_with(".yml");
    if (!is_path) return data_dir / "hardware" / (id_or_path + ".yaml");
    const fs::path p = id_or_path;
    return p.is_relative() ? relative_to / p : p;
}

HardwareProfile load_profile(const fs::path& file) { return read_profile(file, std::nullopt); }

HardwareProfile resolve_profile(const std::string& id_or_path, const fs::path& relative_to, const fs::path& data_dir) {
    const fs::path file = profile_path(id_or_path, relative_to, data_dir);
    const fs::path dir = data_dir / "hardware";
    const bool by_id = file == dir / (id_or_path + ".yaml");
    std::error_code ec;
    if (!fs::is_regular_file(file, ec)) {
        if (!by_id) fail(file, "cannot open: no such file");
        const auto ids = list_ids(dir);
        fail(file, fmt::format("unknown hardware profile '{}'{} ({})", id_or_path, detail::did_you_mean(id_or_path, ids),
                               ids.empty() ? "no *.yaml files in " + dir.string()
                                           : "known: " + detail::join_list(ids)));
    }
    return read_profile(file, by_id ? std::optional<std::string>(id_or_path) : std::nullopt);
}

void write_profile(const HardwareProfile& profile, const fs::path& file, bool force) {
    Diags missing;
    const std::string text = ProfileWriter(profile, file.string(), missing).render();
    if (!missing.empty()) throw ProfileError(missing);
    std::error_code ec;
    if (!force && fs::exists(file, ec)) fail(file, "already exists; refusing to overwrite it (use --force)");

    // Write beside the target, then move it into place: a crash leaves the old file or the new
    // one, never half of one.
    std::random_device rd;
    const fs::path tmp = file.parent_path() / fmt::format(".{}.tmp-{:08x}", file.filename().string(), rd());
    {
        std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
        if (!out) fail(file, fmt::format("cannot create temporary file '{}'", tmp.string()));
        out << text;
        out.flush();
        if (!out) {
            out.close();
            fs::remove(tmp, ec);
            fail(file, fmt::format("cannot write temporary file '{}'", tmp.string()));
        }
    }
    if (force) {
        fs::rename(tmp, file, ec);
    } else {
        // A hard link is an atomic create-if-absent: it fails if the file appeared meanwhile.
        fs::create_hard_link(tmp, file, ec);
        if (ec && ec != std::errc::file_exists) {
            // File systems without hard links: fall back to rename after a fresh check.
            std::error_code ec2;
            if (fs::exists(file, ec2)) ec = std::make_error_code(std::errc::file_exists);
            else fs::rename(tmp, file, ec);
        }
        // After a link the temporary is a second name to drop; after a rename it is already gone.
        std::error_code cleanup;
        fs::remove(tmp, cleanup);
    }
    if (ec == std::errc::file_exists) fail(file, "already exists; refusing to overwrite it (use --force)");
    if (ec) {
        std::error_code cleanup;
        fs::remove(tmp, cleanup);
        fail(file, fmt::format("cannot move the written profile into place: {}", ec.message()));
    }
}

} // namespace trainsim::model
