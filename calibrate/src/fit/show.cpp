#include "trainsim/calibrate/fit/show.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <optional>
#include <vector>

namespace trainsim::calibrate {

using model::HardwareProfile;
using model::Precision;
using nlohmann::json;

namespace {

struct Row {
    std::string path;
    std::string text;  // value with its unit
    double number = 0; // for the relative difference
    std::string tag;   // measured | estimated | datasheet
};

std::string tag_of(const HardwareProfile& p, const std::string& path) {
    auto it = p.sources.find(path);
    if (it == p.sources.end()) return "-";
    if (it->second.starts_with("measured")) return "measured";
    if (it->second.starts_with("estimated")) return "estimated";
    return "datasheet";
}

std::vector<Row> rows_of(const HardwareProfile& p) {
    std::vector<Row> rows;
    auto add = [&](const std::string& path, std::string text, double number) {
        rows.push_back(Row{path, std::move(text), number, tag_of(p, path)});
    };
    auto frac = [](double v) { return fmt::format("{:.4g}", v); };
    add("compute.sm_count", fmt::format("{}", p.sm_count), p.sm_count);
    for (const auto& [prec, rate] : p.dense_peak)
        add("compute.dense_peak." + model::to_string(prec), fmt::format("{:.5g} TFLOP/s", rate.value() / 1e12), rate.value());
    for (const auto& [prec, why] : p.unsupported_reason)
        rows.push_back(Row{"compute.unsupported." + model::to_string(prec), why, 0, "-"});
    for (const auto& [prec, eff] : p.gemm_efficiency)
        add("compute.gemm_efficiency." + model::to_string(prec), frac(eff), eff);
    add("compute.gemm_tile", fmt::format("{} x {}", p.gemm_tile_m, p.gemm_tile_n), p.gemm_tile_m * 1e6 + p.gemm_tile_n);
    add("compute.attention_efficiency.fwd", frac(p.attention_fwd_efficiency), p.attention_fwd_efficiency);
    add("compute.attention_efficiency.bwd", frac(p.attention_bwd_efficiency), p.attention_bwd_efficiency);
    if (p.triton_attention_fwd_efficiency > 0)
        add("compute.attention_efficiency.triton_fwd", frac(p.triton_attention_fwd_efficiency),
            p.triton_attention_fwd_efficiency);
    if (p.triton_attention_bwd_efficiency > 0)
        add("compute.attention_efficiency.triton_bwd", frac(p.triton_attention_bwd_efficiency),
            p.triton_attention_bwd_efficiency);
    add("compute.sustained_clock_ratio", frac(p.sustained_clock_ratio), p.sustained_clock_ratio);
    add("compute.fp8_split_accumulate_speed", frac(p.fp8_split_accumulate_speed), p.fp8_split_accumulate_speed);
    add("compute.kernel_overhead", model::format_time(p.kernel_overhead), p.kernel_overhead.seconds());
    add("memory.hbm_capacity", model::format_bytes(p.hbm_capacity), p.hbm_capacity.value());
    add("memory.hbm_bandwidth", model::format_bandwidth(p.hbm_bandwidth), p.hbm_bandwidth.value());
    add("memory.hbm_efficiency", frac(p.hbm_efficiency), p.hbm_efficiency);
    add("memory.reserved", model::format_bytes(p.reserved_memory), p.reserved_memory.value());
    add("interconnect.nvlink_bandwidth", model::format_bandwidth(p.nvlink_bandwidth), p.nvlink_bandwidth.value());
    add("interconnect.nvlink_efficiency", frac(p.nvlink_efficiency), p.nvlink_efficiency);
    add("interconnect.nvls", p.nvls ? "true" : "false", p.nvls ? 1 : 0);
    if (p.nvls) add("interconnect.nvls_efficiency", frac(p.nvls_efficiency), p.nvls_efficiency);
    add("interconnect.pcie_bandwidth", model::format_bandwidth(p.pcie_bandwidth), p.pcie_bandwidth.value());
    add("interconnect.pcie_efficiency", frac(p.pcie_efficiency), p.pcie_efficiency);
    add("interconnect.intra_node_latency", model::format_time(p.intra_node_latency), p.intra_node_latency.seconds());
    add("interconnect.inter_node_latency", model::format_time(p.inter_node_latency), p.inter_node_latency.seconds());
    add("interconnect.nic_efficiency", frac(p.nic_efficiency), p.nic_efficiency);
    add("overlap.comm_compute_slowdown", frac(p.comm_compute_slowdown), p.comm_compute_slowdown);
    add("node.gpus_per_node", fmt::format("{}", p.default_gpus_per_node), p.default_gpus_per_node);
    add("node.nics_per_node", fmt::format("{}", p.default_nics_per_node), p.default_nics_per_node);
    add("node.nic_rate", model::format_bandwidth(p.default_nic_rate), p.default_nic_rate.value());
    return rows;
}

std::optional<double> rel_diff(double a, double b) {
    if (b == 0) return a == 0 ? std::optional<double>(0.0) : std::nullopt;
    return (a - b) / b;
}

std::string gemm_summary(const HardwareProfile& p, Precision prec) {
    double lo = 0, hi = 0;
    int n = 0;
    for (const auto& g : p.gemm_table) {
        if (g.precision != prec || g.time.count_ps() <= 0) continue;
        const double r = 2.0 * static_cast<double>(g.m) * static_cast<double>(g.n) * static_cast<double>(g.k) / g.time.seconds();
        lo = n == 0 ? r : std::min(lo, r);
        hi = std::max(hi, r);
        ++n;
    }
    if (n == 0) return "-";
    return fmt::format("{} shapes, {:.4g}..{:.4g} TFLOP/s", n, lo / 1e12, hi / 1e12);
}

std::string curve_text(const model::AlphaBeta& c) {
    return fmt::format("t0 {}  BW {}", model::format_time(c.alpha), model::format_bandwidth(c.beta_bw));
}

const model::CollectiveCurve* find_curve(const HardwareProfile& p, const model::CollectiveCurve& c) {
    for (const auto& x : p.collectives)
        if (x.op == c.op && x.group_size == c.group_size && x.scope == c.scope) return &x;
    return nullptr;
}

} // namespace

std::string show_profile(const HardwareProfile& p, const HardwareProfile* vs) {
    std::string s = fmt::format("{}: {} (provenance {}){}\n", p.id, p.name, model::to_string(p.provenance),
                                p.source_file.empty() ? "" : "  [" + p.source_file + "]");
    if (vs != nullptr)
        s += fmt::format("vs {}: {} (provenance {}){}\n", vs->id, vs->name, model::to_string(vs->provenance),
                         vs->source_file.empty() ? "" : "  [" + vs->source_file + "]");
    const auto rows = rows_of(p);
    std::map<std::string, Row> other;
    if (vs != nullptr)
        for (auto& r : rows_of(*vs)) other[r.path] = r;
    s += fmt::format("\n{:<40} {:<18} {:<10}", "entry", "value", "source");
    if (vs != nullptr) s += fmt::format(" {:<18} {:<10} {:>8}", "vs", "source", "diff");
    s += "\n";
    for (const auto& r : rows) {
        s += fmt::format("{:<40} {:<18} {:<10}", r.path, r.text, r.tag);
        if (vs != nullptr) {
            auto it = other.find(r.path);
            if (it == other.end()) {
                s += fmt::format(" {:<18} {:<10} {:>8}", "(absent)", "", "");
            } else {
                const auto d = rel_diff(r.number, it->second.number);
                s += fmt::format(" {:<18} {:<10} {:>8}", it->second.text, it->second.tag,
                                 d ? (std::abs(*d) < 5e-4 ? "=" : fmt::format("{:+.1f}%", 100.0 * *d)) : "n/a");
            }
        }
        s += "\n";
    }
    if (vs != nullptr)
        for (const auto& [path, r] : other)
            if (std::none_of(rows.begin(), rows.end(), [&](const Row& x) { return x.path == path; }))
                s += fmt::format("{:<40} {:<18} {:<10} {:<18} {:<10}\n", path, "(absent)", "", r.text, r.tag);

    const bool tables = !p.gemm_table.empty() || !p.memory_curve.empty() || !p.collectives.empty();
    const bool vs_tables =
        vs != nullptr && (!vs->gemm_table.empty() || !vs->memory_curve.empty() || !vs->collectives.empty());
    if (tables || vs_tables) {
        s += "\ncalibrated tables";
        if (auto it = p.sources.find("calibrated"); it != p.sources.end()) s += " (" + it->second + ")";
        s += "\n";
        for (auto prec : {Precision::bf16, Precision::fp16, Precision::fp8}) {
            const std::string a = gemm_summary(p, prec), b = vs != nullptr ? gemm_summary(*vs, prec) : "-";
            if (a == "-" && b == "-") continue;
            s += fmt::format("  gemm {:<5} {:<40}{}\n", model::to_string(prec), a, vs != nullptr ? "  vs " + b : "");
        }
        for (auto prec : {Precision::bf16, Precision::fp16, Precision::fp8}) {
            auto it = p.memory_curve.find(prec);
            const bool in_vs = vs != nullptr && vs->memory_curve.contains(prec);
            if (it == p.memory_curve.end() && !in_vs) continue;
            s += fmt::format("  memory {:<5} {:<38}{}\n", model::to_string(prec),
                             it != p.memory_curve.end() ? curve_text(it->second) : "-",
                             vs != nullptr ? "  vs " + (in_vs ? curve_text(vs->memory_curve.at(prec)) : "-") : "");
        }
        for (const auto& c : p.collectives) {
            const auto* o = vs != nullptr ? find_curve(*vs, c) : nullptr;
            s += fmt::format("  {:<14} g={:<3} {:<10} {:<36}{}\n", c.op, c.group_size, c.scope, curve_text(c.curve),
                             vs != nullptr ? "  vs " + (o != nullptr ? curve_text(o->curve) : "- (analytic model)") : "");
        }
    }
    return s;
}

json show_profile_json(const HardwareProfile& p, const HardwareProfile* vs) {
    json j;
    j["id"] = p.id;
    j["name"] = p.name;
    j["provenance"] = model::to_string(p.provenance);
    std::map<std::string, Row> other;
    if (vs != nullptr) {
        j["vs"] = {{"id", vs->id}, {"name", vs->name}, {"provenance", model::to_string(vs->provenance)}};
        for (auto& r : rows_of(*vs)) other[r.path] = r;
    }
    j["entries"] = json::array();
    for (const auto& r : rows_of(p)) {
        json e{{"path", r.path}, {"value", r.text}, {"number", r.number}, {"source", r.tag}};
        if (auto it = p.sources.find(r.path); it != p.sources.end()) e["source_text"] = it->second;
        if (auto it = other.find(r.path); it != other.end()) {
            e["vs_value"] = it->second.text;
            e["vs_number"] = it->second.number;
            e["vs_source"] = it->second.tag;
            if (auto d = rel_diff(r.number, it->second.number)) e["diff_rel"] = *d;
        }
        j["entries"].push_back(e);
    }
    j["gemm_table_rows"] = p.gemm_table.size();
    j["memory_curves"] = json::object();
    for (const auto& [prec, c] : p.memory_curve)
        j["memory_curves"][model::to_string(prec)] = {{"alpha_s", c.alpha.seconds()}, {"bandwidth", c.beta_bw.value()}};
    j["collectives"] = json::array();
    for (const auto& c : p.collectives) {
        json e{{"op", c.op}, {"group_size", c.group_size}, {"scope", c.scope}, {"alpha_s", c.curve.alpha.seconds()},
               {"busbw", c.curve.beta_bw.value()}};
        if (vs != nullptr)
            if (const auto* o = find_curve(*vs, c))
                e["vs"] = {{"alpha_s", o->curve.alpha.seconds()}, {"busbw", o->curve.beta_bw.value()}};
        j["collectives"].push_back(e);
    }
    return j;
}

} // namespace trainsim::calibrate
