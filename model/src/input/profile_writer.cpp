// Writing hardware profiles (docs/formats.md section 3): values in a unit that parses back to the
// same double (or in the base unit when none does), each with its source; written whole or not at
// all.
#include "trainsim/model/input/profile_io.hpp"
#include "trainsim/model/core/file_io.hpp"

#include "profile_schema.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <fstream>
#include <optional>
#include <random>

namespace trainsim::model {
namespace fs = std::filesystem;
using detail::Diags;
using detail::Field;
using detail::report;
using detail::Site;
using namespace profile_schema;

namespace {
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
std::string format_exact(Power w) {
    return exact_with_unit(w.value(), {{"kW", kKilo}, {"W", 1}},
                           [](const std::string& s) { return parse_power(s).value(); });
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
        if (!p_.base.empty()) text_ += fmt::format("base: {}\n", quote(p_.base));
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
        case Kind::power:
            line(path, quote(format_exact(p_.*e.power_member)));
            break;
        case Kind::fraction:
        case Kind::nvls_ratio:
        case Kind::slowdown:
        case Kind::residual:
        case Kind::speed:
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
        if (!p_.measured_on.empty()) {
            std::vector<std::string> items;
            for (const auto& [key, figure] : p_.measured_on) items.push_back(fmt::format("{}: {}", key, quote(figure)));
            text_ += fmt::format("  measured_on: {{{}}}\n", fmt::join(items, ", "));
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

} // namespace

std::map<std::string, std::string> datasheet_fingerprint(const HardwareProfile& p) {
    std::map<std::string, std::string> out;
    for (const auto& [prec, rate] : p.dense_peak)
        out[fmt::format("compute.dense_peak.{}", to_string(prec))] = format_exact(rate);
    out["memory.hbm_bandwidth"] = format_exact(p.hbm_bandwidth);
    out["interconnect.nvlink_bandwidth"] = format_exact(p.nvlink_bandwidth);
    out["node.nic_rate"] = format_exact(p.default_nic_rate);
    // A figure of 0 (no NVLink) cannot be a unit string the reader takes as positive: left out.
    std::erase_if(out, [](const auto& kv) { return kv.second.starts_with("0 "); });
    return out;
}

void write_profile(const HardwareProfile& profile, const fs::path& file, bool force) {
    Diags missing;
    const std::string text = ProfileWriter(profile, file.string(), missing).render();
    if (!missing.empty()) throw ProfileError(missing);
    // Validated before anything is written: a profile nothing can load (a fit whose every sample
    // was unsupported) must not land on disk, let alone over a good one.
    try {
        (void)load_profile_text(text, file.string());
    } catch (const ProfileError& e) {
        std::vector<Diagnostic> diags = e.diagnostics();
        for (auto& d : diags)
            d.message += " (in the profile about to be written; nothing was written)";
        throw ProfileError(std::move(diags));
    }
    try {
        (void)write_file_atomically(file, "--out", [&](std::ostream& os) { os << text; },
                                    OutputOptions{.replace = force, .durable = true});
    } catch (const OutputError& e) {
        throw ProfileError(e.diagnostics());
    }
}

} // namespace trainsim::model
