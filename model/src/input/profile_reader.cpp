// Reading hardware profiles (docs/formats.md section 3), strictly: every problem with its
// file:line:col and key path, all at once.
#include "trainsim/model/input/profile_io.hpp"

#include "profile_schema.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <fstream>
#include <map>
#include <tuple>
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
            } else if (f.name == "base") {
                if (auto v = detail::read_string(f.value, f.value_site, out_)) {
                    if (v->empty())
                        report(out_, f.value_site, "is empty (the id of the profile this one was fitted on)");
                    p_.base = *v;
                }
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
        if (out_.empty()) check_measured_on();
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
            if (auto x = detail::read_int(n, at, e.zero_means_none ? 0 : 1, out_);
                x && ((e.zero_means_none && *x == 0) || within(*x, kIntegerBounds, at, n)))
                p_.*e.int_member = *x;
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
            // "0 GB/s" is how a card without NVLink says so (docs/formats.md): the one bandwidth that
            // may be zero.
            if (auto x = detail::read_with_unit(n, at, "a bandwidth (e.g. '450 GB/s')", parse_bandwidth, out_);
                x && ((e.zero_means_none && x->value() == 0) || within(x->value(), kBandwidthBounds, at, n)))
                p_.*e.bandwidth_member = *x;
            break;
        case Kind::duration:
            if (auto x = detail::read_with_unit(n, at, "a duration (e.g. '4 us')", parse_duration, out_);
                x && within(x->seconds(), kLatencyBounds, at, n))
                p_.*e.time_member = *x;
            break;
        case Kind::power:
            if (auto x = detail::read_with_unit(n, at, "a power (e.g. '700 W', '2.8 kW')", parse_power, out_);
                x && within(x->value(), e.power_member == &model::HardwareProfile::power_node_overhead ? kNodePowerBounds
                                                                                                  : kGpuPowerBounds,
                            at, n))
                p_.*e.power_member = *x;
            break;
        case Kind::fraction:
        case Kind::nvls_ratio:
        case Kind::slowdown:
        case Kind::residual:
        case Kind::speed:
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

    static constexpr double kMinRatio = 1e-6;

    // A plain number in (0, 1], (0, 2] for the NVLS ratio, (0, 4] for a speed (no server CPU's
    // single thread is 4x another's of the same decade), or [0, 1] for the slowdown.
    std::optional<double> read_ratio(Kind kind, const YAML::Node& n, const Site& at) {
        const double hi = kind == Kind::nvls_ratio ? 2.0 : kind == Kind::speed ? 4.0 : 1.0;
        const bool zero_ok = kind == Kind::slowdown || kind == Kind::residual;
        auto x = detail::read_number(n, at, -HUGE_VAL, HUGE_VAL, out_);
        if (x && (*x > hi || *x < 0.0 || (*x == 0.0 && !zero_ok))) {
            report(out_, at, fmt::format("must lie in {}0, {}], got {}", zero_ok ? "[" : "(", hi, *x));
            return std::nullopt;
        }
        // An efficiency or speed is a fraction of a peak that something reaches; the slowest thing
        // a profile describes is a CPU core timed against a GPU's peak (~5e-5 of an H100's BF16
        // peak, the CPU calibration backend). Far below that (1e-300) no device runs: every time
        // built on it would overflow the step clock (int64 picoseconds, ~106 days).
        if (x && !zero_ok && *x < kMinRatio) {
            report(out_, at,
                   fmt::format("{} is below {}, less than any device reaches (a CPU core against a GPU's peak is "
                               "~5e-5): must lie in [{}, {}]",
                               *x, kMinRatio, kMinRatio, hi));
            return std::nullopt;
        }
        return x;
    }

    void read_tile(const YAML::Node& n, const Site& at) {
        if (!n.IsSequence() || n.size() != 2) {
            report(out_, at, fmt::format("expected [M, N], two integers, got {}", detail::describe(n)));
            return;
        }
        // A CTA tile holds at least one tensor-core MMA: the smallest shape of FP16 / BF16 / FP8
        // mma.sync is m16n8 (PTX ISA, "Matrix shape" of mma: m16n8k8 / m16n8k16 / m16n8k32), so
        // M >= 16 and N >= 8. Below that no kernel exists, and the cost model's half and quarter
        // tiles (M/2, N/2) of a 1-wide tile would be 0 wide.
        auto m = detail::read_int(n[0], detail::site_at(file_, n[0].Mark(), at.key + "[0]"), 16, out_);
        auto nn = detail::read_int(n[1], detail::site_at(file_, n[1].Mark(), at.key + "[1]"), 8, out_);
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
            } else if (g.name == "measured_on") {
                read_measured_on(g);
            } else {
                report(out_, g.key_site,
                       fmt::format("unknown key '{}'{}", g.name,
                                   detail::did_you_mean(g.name, {"source", "gemm", "memory", "collectives",
                                                                 "collective_times", "measured_on"})));
            }
        }
        if (!has_source)
            report(out_, f.key_site, "missing source: say which measurements the calibrated tables come from");
    }

    // calibrated.measured_on: {key: figure} for keys of kMeasuredOnKeys, each figure with its unit.
    void read_measured_on(const Field& f) {
        if (!f.value.IsMap()) {
            report(out_, f.value_site,
                   fmt::format("expected a map of profile keys to the figures the tables were "
                               "measured on, got {}",
                               detail::describe(f.value)));
            return;
        }
        std::vector<std::string> keys(std::begin(kMeasuredOnKeys), std::end(kMeasuredOnKeys));
        for (const Field& g : detail::fields_of(f.value, file_, "calibrated.measured_on", out_)) {
            if (std::find(keys.begin(), keys.end(), g.name) == keys.end()) {
                report(out_, g.key_site,
                       fmt::format("unknown key '{}'{} (one of: {})", g.name, detail::did_you_mean(g.name, keys),
                                   detail::join_list(keys)));
                continue;
            }
            const bool peak = g.name.starts_with("compute.dense_peak.");
            const auto s = detail::read_scalar(g.value, g.value_site, "a figure with its unit", out_);
            if (!s) continue;
            try {
                const double v = peak ? parse_flop_rate(*s).value() : parse_bandwidth(*s).value();
                if (!(v > 0)) {
                    report(out_, g.value_site, "must be positive");
                    continue;
                }
            } catch (const UnitError& e) {
                report(out_, g.value_site, e.what());
                continue;
            }
            p_.measured_on[g.name] = *s;
            measured_on_sites_[g.name] = g.value_site;
        }
    }

    // A measured table taken on other datasheet figures than the profile now states (a profile
    // copied and edited by hand: an A800's NVLink rate over an A100's measured collectives) would
    // silently override the edit: the tables the changed figure governs are dropped, with a
    // warning naming the key (issue #45). Run after the whole file is read.
    void check_measured_on() {
        for (const auto& [key, written] : p_.measured_on) {
            const bool peak = key.starts_with("compute.dense_peak.");
            double was = 0, now = 0;
            std::string unit;
            Precision prec = Precision::bf16;
            if (peak) {
                was = parse_flop_rate(written).value();
                const std::string name = key.substr(std::string("compute.dense_peak.").size());
                prec = name == "fp8" ? Precision::fp8 : name == "fp16" ? Precision::fp16 : Precision::bf16;
                if (auto it = p_.dense_peak.find(prec); it != p_.dense_peak.end()) now = it->second.value();
                unit = "TFLOP/s";
            } else {
                was = parse_bandwidth(written).value();
                now = key == "memory.hbm_bandwidth"            ? p_.hbm_bandwidth.value()
                      : key == "interconnect.nvlink_bandwidth" ? p_.nvlink_bandwidth.value()
                                                               : p_.default_nic_rate.value();
                unit = "GB/s";
            }
            if (std::abs(now - was) <= 1e-9 * std::max(std::abs(now), std::abs(was))) continue;
            std::vector<std::string> dropped;
            auto drop_scope = [&](const std::string& scope) {
                const auto n1 =
                    p_.collectives.erase_if([&](const CollectiveCurve& c) { return c.scope == scope; });
                const auto n2 =
                    p_.collective_times.erase_if([&](const CollectiveSample& c) { return c.scope == scope; });
                if (n1 > 0) dropped.push_back(fmt::format("calibrated.collectives ({} {} curve(s))", n1, scope));
                if (n2 > 0) dropped.push_back(fmt::format("calibrated.collective_times ({} {} row(s))", n2, scope));
            };
            if (peak) {
                const auto n = p_.gemm_table.erase_if([&](const GemmSample& g) { return g.precision == prec; });
                if (n > 0) dropped.push_back(fmt::format("calibrated.gemm ({} {} row(s))", n, to_string(prec)));
            } else if (key == "memory.hbm_bandwidth") {
                if (!p_.memory_curve.empty()) dropped.push_back("calibrated.memory");
                p_.memory_curve.clear();
            } else {
                drop_scope(key == "interconnect.nvlink_bandwidth" ? "intra_node" : "inter_node");
            }
            const double scale = peak ? 1e12 : 1e9;
            Site at = measured_on_sites_.at(key);
            at.key = "calibrated.measured_on." + key;
            Diagnostic d{at.file, at.line, at.col, at.key,
                         fmt::format("{} is {:.6g} {} in this profile, but the calibrated tables were measured on "
                                     "{:.6g} {}: {} (the analytic model is used instead; re-measure, or restore "
                                     "the figure)",
                                     key, now / scale, unit, was / scale, unit,
                                     dropped.empty() ? std::string("no table it governs is present")
                                                     : fmt::format("dropped {}", detail::join_list(dropped)))};
            p_.warnings.push_back(std::move(d));
        }
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
        // One time per size of a curve: two would make the interpolation take whichever sorts
        // first and drop the other without a word.
        if (op && group_ok && scope && bytes_ok) {
            const auto [first, fresh] = collective_time_lines_.try_emplace(
                std::tuple{*op, *group, *scope, b->value()}, f["bytes"].value_site.line);
            if (!fresh) {
                report(out_, f["bytes"].value_site,
                       fmt::format("{} of {} ranks ({}) at {} is measured twice (first at line {}): keep one row per "
                                   "size (the median of the runs)",
                                   *op, *group, *scope, format_bytes(*b), first->second));
                return;
            }
        }
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
        // Each precision with a peak needs the fraction of it GEMMs reach, or its plans would
        // run at a made-up one. FP16 alone may be left out: it runs on the same tensor-core path
        // at the same rate as BF16 (A100 / H100 datasheets) and takes BF16's (compute_cost.cpp).
        if (seen_.contains("compute.dense_peak") && seen_.contains("compute.gemm_efficiency") &&
            !has_errors_at("compute.gemm_efficiency") && !has_errors_at("compute.dense_peak"))
            for (const auto& [prec, peak] : p_.dense_peak)
                if (prec != Precision::fp16 && !p_.gemm_efficiency.contains(prec))
                    report(out_, inside("compute.gemm_efficiency", "compute.gemm_efficiency." + to_string(prec)),
                           fmt::format("required key is missing: {} has a dense_peak, so the fraction of it that "
                                       "large GEMMs reach is needed",
                                       to_string(prec)));
        if (p_.nvls && !seen_.contains("interconnect.nvls_efficiency")) missing("interconnect.nvls_efficiency");
        if (p_.nvls && seen_.contains("interconnect.nvlink_bandwidth") && p_.nvlink_bandwidth.value() == 0 &&
            !has_errors_at("interconnect.nvlink_bandwidth"))
            report(out_, entry_site("interconnect.nvls"),
                   "NVLS runs in the NVSwitches over NVLink; with nvlink_bandwidth \"0 GB/s\" (no NVLink) write nvls: "
                   "false");
        // Without peer-to-peer the intra-node traffic streams through host DRAM: its rate is needed.
        if (p_.pcie_p2p_disabled && !seen_.contains("node.host_memory_bandwidth"))
            report(out_, inside("node", "node.host_memory_bandwidth"),
                   "required key is missing (interconnect.pcie_p2p_disabled routes GPU-to-GPU traffic through host "
                   "memory, bounded by its bandwidth)");
        if (p_.nvlink_bridge_pairs && seen_.contains("interconnect.nvlink_bandwidth") &&
            p_.nvlink_bandwidth.value() <= 0)
            report(out_, entry_site("node.nvlink_bridge_pairs"), "NVLink bridge pairs need a positive nvlink_bandwidth");
        power_checks();
        if (seen_.contains("memory.reserved") && seen_.contains("memory.hbm_capacity") &&
            p_.hbm_capacity.value() > 0 && p_.reserved_memory >= p_.hbm_capacity)
            report(out_, entry_site("memory.reserved"),
                   fmt::format("reserved memory {} is not below the HBM capacity {}", format_bytes(p_.reserved_memory),
                               format_bytes(p_.hbm_capacity)));
        if (seen_.contains("memory.hbm_capacity") && p_.hbm_capacity.value() <= 0)
            report(out_, entry_site("memory.hbm_capacity"), "must be positive");
    }

    // The power section is all or nothing (energy needs every term), and a GPU draws less idle
    // than with only memory-bound work, and less with that than with its tensor cores busy.
    void power_checks() {
        const bool any = std::any_of(kPowerPaths.begin(), kPowerPaths.end(),
                                     [&](std::string_view p) { return seen_.contains(std::string(p)); });
        if (!any) return;
        for (const auto p : kPowerPaths)
            if (!seen_.contains(std::string(p)))
                report(out_, inside("power", std::string(p)),
                       "required key is missing (the power section gives all of compute_busy, comm_busy, idle and "
                       "node_overhead, or none)");
        if (has_errors_at("power")) return;
        if (!(p_.power_idle <= p_.power_comm_busy && p_.power_comm_busy <= p_.power_compute_busy))
            report(out_, entry_site("power.comm_busy"),
                   fmt::format("expected idle <= comm_busy <= compute_busy, got {} W, {} W, {} W",
                               p_.power_idle.value(), p_.power_comm_busy.value(), p_.power_compute_busy.value()));
    }

    bool has_errors_at(const std::string& prefix) const {
        return std::any_of(out_.begin(), out_.end(), [&](const Diagnostic& d) { return d.key.starts_with(prefix); });
    }

    std::string file_;
    HardwareProfile& p_;
    Diags& out_;
    // Each collective_times row's (op, group size, scope, bytes) and its line (duplicates).
    std::map<std::tuple<std::string, int, std::string, double>, int> collective_time_lines_;
    Site root_site_;
    Site id_site_;
    std::set<std::string> seen_;
    std::map<std::string, Site> container_sites_;
    std::map<std::string, Site> measured_on_sites_;
    std::map<std::string, Site> entry_sites_;
    std::map<Precision, Site> reason_sites_;
    std::map<Precision, Site> efficiency_sites_;
};

HardwareProfile parse_profile(const std::string& text, const std::string& name,
                              const std::optional<std::string>& expected_id) {
    Diags out;
    auto root = detail::parse_yaml(text, name, out);
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

HardwareProfile read_profile(const fs::path& file, const std::optional<std::string>& expected_id) {
    const std::string name = file.string();
    Diags out;
    auto text = detail::read_text(file, Site{name, 0, 0, ""}, out);
    if (!text) throw ProfileError(out);
    return parse_profile(*text, name, expected_id);
}

} // namespace

HardwareProfile load_profile_text(const std::string& text, const std::string& name) {
    return parse_profile(text, name, std::nullopt);
}

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


std::vector<std::string> list_ids(const std::filesystem::path& dir) {
    std::vector<std::string> ids;
    std::error_code ec;
    if (!fs::is_directory(dir, ec)) return ids;
    for (const auto& entry : fs::directory_iterator(dir, ec)) {
        if (entry.path().extension() == ".yaml" && entry.is_regular_file(ec)) ids.push_back(entry.path().stem().string());
    }
    std::sort(ids.begin(), ids.end());
    return ids;
}

} // namespace trainsim::model
