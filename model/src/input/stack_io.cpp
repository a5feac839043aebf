// Stack-profile files: strict reading (unknown keys, wrong types, factors outside their physical
// bounds, a covariance of the wrong shape: each with file:line:col and key path) and exact writing.
#include "trainsim/model/input/stack_io.hpp"
#include "trainsim/model/core/stack_discrepancy.hpp"

#include "input_support.hpp"

#include <fmt/format.h>

#include <cmath>
#include <optional>

namespace trainsim::model {
namespace fs = std::filesystem;
using detail::Diags;
using detail::Field;
using detail::report;
using detail::Site;

namespace {

constexpr int kFormatVersion = 1;

std::vector<std::string> param_names() {
    std::vector<std::string> names;
    for (const auto& s : stack_param_specs()) names.emplace_back(s.name);
    return names;
}

std::optional<std::size_t> param_index(const std::string& name) {
    for (std::size_t i = 0; i < kStackParams; ++i)
        if (stack_param_specs()[i].name == name) return i;
    return std::nullopt;
}

class StackReader {
public:
    StackReader(std::string file, StackProfile& s, Diags& out) : file_(std::move(file)), s_(s), out_(out) {}

    void read(const YAML::Node& root) {
        Site root_site = detail::site_at(file_, root.Mark(), "");
        if (root_site.line == 0) root_site = Site{file_, 1, 1, ""};
        if (!root.IsMap()) {
            report(out_, root_site, "a stack profile is a map (stack_profile, name, factors, fit); got " +
                                        detail::describe(root));
            return;
        }
        bool has_version = false, has_name = false, has_factors = false;
        for (const Field& f : detail::fields_of(root, file_, "", out_)) {
            if (f.name == "stack_profile") {
                has_version = true;
                if (auto v = detail::read_int(f.value, f.value_site, 1, out_); v && *v != kFormatVersion)
                    report(out_, f.value_site,
                           fmt::format("format version {} is not one this trainsim reads ({})", *v, kFormatVersion));
            } else if (f.name == "name") {
                has_name = true;
                if (auto v = detail::read_string(f.value, f.value_site, out_)) s_.name = *v;
            } else if (f.name == "description") {
                if (auto v = detail::read_scalar(f.value, f.value_site, "a string", out_)) s_.description = *v;
            } else if (f.name == "factors") {
                has_factors = true;
                read_factors(f);
            } else if (f.name == "fit") {
                read_fit(f);
            } else {
                report(out_, f.key_site,
                       fmt::format("unknown key '{}'{} (stack_profile, name, description, factors, fit)", f.name,
                                   detail::did_you_mean(f.name, {"stack_profile", "name", "description", "factors",
                                                                 "fit"})));
            }
        }
        if (!has_version) report(out_, root_site, "missing key 'stack_profile' (the format version, 1)");
        if (!has_name) report(out_, root_site, "missing key 'name'");
        if (!has_factors) report(out_, root_site, "missing key 'factors' (one factor per stack parameter; see docs)");
    }

private:
    bool expect_map(const Field& f) {
        if (f.value.IsMap()) return true;
        report(out_, f.value_site, "expected a map, got " + detail::describe(f.value));
        return false;
    }

    void read_factors(const Field& f) {
        if (!expect_map(f)) return;
        for (const Field& g : detail::fields_of(f.value, file_, f.key_site.key, out_)) {
            const auto i = param_index(g.name);
            if (!i) {
                report(out_, g.key_site,
                       fmt::format("unknown stack parameter '{}'{} (one of: {})", g.name,
                                   detail::did_you_mean(g.name, param_names()), detail::join_list(param_names())));
                continue;
            }
            const auto& spec = stack_param_specs()[*i];
            if (auto v = detail::read_number(g.value, g.value_site, spec.lo, spec.hi, out_)) s_.factors[*i] = *v;
        }
    }

    void read_fit(const Field& f) {
        if (!expect_map(f)) return;
        s_.fitted = true;
        const std::vector<std::string> keys{"fitted_with", "fitted_on",  "residual_sd_log", "loo_sd_log", "parameters",
                                            "covariance_log", "evidence", "runs",           "notes", "discrepancy"};
        bool has_cov = false;
        for (const Field& g : detail::fields_of(f.value, file_, f.key_site.key, out_)) {
            if (g.name == "fitted_with") {
                if (auto v = detail::read_scalar(g.value, g.value_site, "a string", out_)) s_.fitted_with = *v;
            } else if (g.name == "fitted_on") {
                if (auto v = detail::read_scalar(g.value, g.value_site, "a string", out_)) s_.fitted_on = *v;
            } else if (g.name == "residual_sd_log") {
                if (auto v = detail::read_number(g.value, g.value_site, 0, 10, out_)) s_.residual_sd_log = *v;
            } else if (g.name == "loo_sd_log") {
                if (auto v = detail::read_number(g.value, g.value_site, 0, 10, out_)) s_.loo_sd_log = *v;
            } else if (g.name == "parameters") {
                read_parameters(g);
            } else if (g.name == "covariance_log") {
                has_cov = true;
                (void)read_covariance(g);
            } else if (g.name == "evidence") {
                read_evidence(g);
            } else if (g.name == "runs") {
                read_runs(g);
            } else if (g.name == "notes") {
                read_strings(g, s_.notes);
            } else if (g.name == "discrepancy") {
                read_discrepancy(g);
            } else {
                report(out_, g.key_site, fmt::format("unknown key '{}'{} ({})", g.name, detail::did_you_mean(g.name, keys),
                                                     detail::join_list(keys)));
            }
        }
        if (!has_cov) report(out_, f.key_site, "missing key 'covariance_log' (the fit's 8 x 8 covariance)");
        if (s_.runs.empty()) report(out_, f.key_site, "a fit names the runs it was fitted on: 'runs' is missing or empty");
        if (s_.discrepancy.present && s_.runs.size() > kDiscrepancyMaxRuns) {
            report(out_, f.key_site, fmt::format("a discrepancy is fitted over at most {} runs (its solve is cubic in "
                                                 "them); this profile lists {}",
                                                 kDiscrepancyMaxRuns, s_.runs.size()));
        } else if (s_.discrepancy.present) {
            for (const auto& r : s_.runs)
                if (r.shape.empty() || r.micro_batch < 1 || !(r.fitted > 0)) {
                    report(out_, f.key_site, fmt::format("a discrepancy needs every run's shape, micro_batch and fitted "
                                                         "throughput; run '{}' lacks one",
                                                         r.id));
                    break;
                }
            if (out_.empty()) {
                prepare_discrepancy(s_.discrepancy, s_.runs);
                if (!s_.discrepancy.present)
                    report(out_, f.key_site, "the discrepancy's kernel matrix over the runs is not positive definite");
            }
        }
        if (s_.evidence.max_gpus == 0)
            report(out_, f.key_site, "a fit states what its runs covered: 'evidence' with max_gpus is missing");
        // The covariance must be one: symmetric, and no correlation beyond +-1.
        for (std::size_t a = 0; a < kStackParams && has_cov; ++a)
            for (std::size_t b = a + 1; b < kStackParams; ++b) {
                const double ab = s_.covariance_log[a * kStackParams + b], ba = s_.covariance_log[b * kStackParams + a];
                const double bound = std::sqrt(s_.covariance_log[a * kStackParams + a] * s_.covariance_log[b * kStackParams + b]);
                if (std::abs(ab - ba) > 1e-9 * std::max(1.0, std::abs(ab)) || std::abs(ab) > bound * (1 + 1e-9) + 1e-300) {
                    report(out_, f.key_site,
                           fmt::format("covariance_log[{}][{}] = {} is not a covariance with [{}][{}] = {} and the "
                                       "variances {} and {} (symmetric, |c_ab| <= sqrt(c_aa c_bb))",
                                       a, b, ab, b, a, ba, s_.covariance_log[a * kStackParams + a],
                                       s_.covariance_log[b * kStackParams + b]));
                    a = kStackParams;
                    break;
                }
            }
    }

    void read_discrepancy(const Field& f) {
        if (!expect_map(f)) return;
        auto& d = s_.discrepancy;
        d.present = true;
        bool has_len = false;
        for (const Field& g : detail::fields_of(f.value, file_, f.key_site.key, out_)) {
            double* x = g.name == "signal_var"   ? &d.signal_var
                        : g.name == "noise_var"  ? &d.noise_var
                        : g.name == "loo_sd_log" ? &d.loo_sd_log
                                                 : nullptr;
            if (x != nullptr) {
                if (auto v = detail::read_number(g.value, g.value_site, 0, 10, out_)) *x = *v;
            } else if (g.name == "length") {
                has_len = true;
                if (!g.value.IsSequence() || g.value.size() != d.length.size()) {
                    report(out_, g.value_site, fmt::format("expected {} length scales (log2 of tp, pp, cp, dp, "
                                                           "micro-batch), got {}",
                                                           d.length.size(), detail::describe(g.value)));
                    continue;
                }
                for (std::size_t k = 0; k < d.length.size(); ++k)
                    if (auto v = detail::read_number(g.value[k], g.value_site, 1e-3, 1e6, out_)) d.length[k] = *v;
            } else {
                report(out_, g.key_site,
                       fmt::format("unknown key '{}' (signal_var, noise_var, length, loo_sd_log)", g.name));
            }
        }
        if (!has_len) report(out_, f.key_site, "missing key 'length' (5 length scales)");
        if (!(d.noise_var > 0)) report(out_, f.key_site, "noise_var must be above 0");
    }

    void read_parameters(const Field& f) {
        if (!expect_map(f)) return;
        for (const Field& g : detail::fields_of(f.value, file_, f.key_site.key, out_)) {
            const auto i = param_index(g.name);
            if (!i) {
                report(out_, g.key_site, fmt::format("unknown stack parameter '{}'{}", g.name,
                                                     detail::did_you_mean(g.name, param_names())));
                continue;
            }
            if (!expect_map(g)) continue;
            for (const Field& h : detail::fields_of(g.value, file_, g.key_site.key, out_)) {
                bool* flag = h.name == "free"          ? &s_.free[*i]
                             : h.name == "constrained" ? &s_.constrained[*i]
                             : h.name == "at_bound"    ? &s_.at_bound[*i]
                                                       : nullptr;
                if (flag == nullptr) {
                    report(out_, h.key_site, fmt::format("unknown key '{}' (free, constrained, at_bound)", h.name));
                    continue;
                }
                if (auto v = detail::read_bool(h.value, h.value_site, out_)) *flag = *v;
            }
        }
    }

    bool read_covariance(const Field& f) {
        if (!f.value.IsSequence() || f.value.size() != kStackParams) {
            report(out_, f.value_site, fmt::format("expected a list of {} rows, got {}", kStackParams,
                                                   detail::describe(f.value)));
            return false;
        }
        bool ok = true;
        for (std::size_t r = 0; r < kStackParams; ++r) {
            const YAML::Node row = f.value[r];
            Site at = detail::site_at(file_, row.Mark(), fmt::format("{}[{}]", f.key_site.key, r));
            if (at.line == 0) at = f.value_site;
            if (!row.IsSequence() || row.size() != kStackParams) {
                report(out_, at, fmt::format("expected a row of {} numbers, got {}", kStackParams, detail::describe(row)));
                ok = false;
                continue;
            }
            for (std::size_t c = 0; c < kStackParams; ++c) {
                if (auto v = detail::read_number(row[c], at, -100, 100, out_)) s_.covariance_log[r * kStackParams + c] = *v;
                else ok = false;
            }
            if (s_.covariance_log[r * kStackParams + r] < 0) {
                report(out_, at, "a variance (the diagonal) cannot be negative");
                ok = false;
            }
        }
        return ok;
    }

    void read_evidence(const Field& f) {
        if (!expect_map(f)) return;
        auto& e = s_.evidence;
        for (const Field& g : detail::fields_of(f.value, file_, f.key_site.key, out_)) {
            int* n = g.name == "min_gpus"    ? &e.min_gpus
                     : g.name == "max_gpus"  ? &e.max_gpus
                     : g.name == "max_nodes" ? &e.max_nodes
                     : g.name == "max_tp"    ? &e.max_tp
                     : g.name == "max_pp"    ? &e.max_pp
                     : g.name == "max_cp"    ? &e.max_cp
                                             : nullptr;
            if (n != nullptr) {
                if (auto v = detail::read_int(g.value, g.value_site, 1, out_)) *n = *v;
            } else if (g.name == "gpus") {
                read_strings(g, e.gpus);
            } else if (g.name == "frameworks") {
                read_strings(g, e.frameworks);
            } else {
                report(out_, g.key_site, fmt::format("unknown key '{}' (min_gpus, max_gpus, max_nodes, max_tp, "
                                                     "max_pp, max_cp, gpus, frameworks)",
                                                     g.name));
            }
        }
    }

    void read_runs(const Field& f) {
        if (!f.value.IsSequence()) {
            report(out_, f.value_site, "expected a list of runs, got " + detail::describe(f.value));
            return;
        }
        for (std::size_t k = 0; k < f.value.size(); ++k) {
            const YAML::Node item = f.value[k];
            const std::string prefix = fmt::format("{}[{}]", f.key_site.key, k);
            Site at = detail::site_at(file_, item.Mark(), prefix);
            if (!item.IsMap()) {
                report(out_, at, "expected a map, got " + detail::describe(item));
                continue;
            }
            StackFitRun run;
            for (const Field& g : detail::fields_of(item, file_, prefix, out_)) {
                int* n = g.name == "gpus"    ? &run.gpus
                         : g.name == "nodes" ? &run.nodes
                         : g.name == "tp"    ? &run.tp
                         : g.name == "pp"    ? &run.pp
                         : g.name == "cp"    ? &run.cp
                         : g.name == "dp"    ? &run.dp
                         : g.name == "micro_batch" ? &run.micro_batch
                                             : nullptr;
                double* x = g.name == "measured"        ? &run.measured
                            : g.name == "prior"         ? &run.prior
                            : g.name == "fitted"        ? &run.fitted
                            : g.name == "loo_error_pct" ? &run.loo_error_pct
                                                        : nullptr;
                if (g.name == "id") {
                    if (auto v = detail::read_scalar(g.value, g.value_site, "a string", out_)) run.id = *v;
                } else if (g.name == "shape") {
                    if (auto v = detail::read_scalar(g.value, g.value_site, "a string", out_)) run.shape = *v;
                } else if (n != nullptr) {
                    if (auto v = detail::read_int(g.value, g.value_site, 1, out_)) *n = *v;
                } else if (x != nullptr) {
                    const double lo = g.name == "loo_error_pct" ? -1e6 : 0;
                    if (auto v = detail::read_number(g.value, g.value_site, lo, 1e12, out_)) *x = *v;
                } else {
                    report(out_, g.key_site, fmt::format("unknown key '{}' (id, gpus, nodes, tp, pp, cp, dp, micro_batch, "
                                                         "shape, measured, prior, fitted, loo_error_pct)",
                                                         g.name));
                }
            }
            for (const char* key : {"id", "gpus", "nodes", "measured"})
                if (!item[key]) report(out_, at, fmt::format("a run needs '{}'", key));
            s_.runs.push_back(run);
        }
    }

    void read_strings(const Field& f, std::vector<std::string>& into) {
        if (!f.value.IsSequence()) {
            report(out_, f.value_site, "expected a list of strings, got " + detail::describe(f.value));
            return;
        }
        for (const auto& item : f.value) {
            Site at = detail::site_at(file_, item.Mark(), f.key_site.key);
            if (auto v = detail::read_scalar(item, at.line == 0 ? f.value_site : at, "a string", out_)) into.push_back(*v);
        }
    }

    std::string file_;
    StackProfile& s_;
    Diags& out_;
};

StackProfile parse(const std::string& text, const std::string& name) {
    Diags out;
    StackProfile s;
    s.source_file = name;
    if (const auto root = detail::parse_yaml(text, name, out)) StackReader(name, s, out).read(*root);
    if (!out.empty()) throw StackProfileError(out);
    return s;
}

// A YAML double-quoted string.
std::string quote(std::string_view s) {
    std::string out = "\"";
    for (const char c : s) {
        if (c == '"' || c == '\\') out += '\\';
        if (c == '\n') out += "\\n";
        else if (static_cast<unsigned char>(c) < 0x20) out += fmt::format("\\x{:02x}", static_cast<unsigned>(c));
        else out += c;
    }
    return out + "\"";
}

} // namespace

StackProfile load_stack_profile(const fs::path& file) {
    Diags out;
    // read_text refuses a FIFO (which would block the read until a writer came) or a device
    // (which may never end) before opening it.
    const auto text = detail::read_text(file, Site{file.string(), 0, 0, ""}, out);
    if (!text) throw StackProfileError(out);
    return parse(*text, file.string());
}

StackProfile load_stack_profile_text(const std::string& text, const std::string& name) { return parse(text, name); }

std::string render_stack_profile(const StackProfile& s) {
    // {} writes the shortest decimal form that reads back as the same double.
    std::string o;
    o += "# trainsim stack profile: factors on a hardware profile's values, as the stack reaches them\n";
    o += "# (docs/calibration.md \"Calibrating on your own runs\"; 1 = the hardware profile as it is).\n";
    o += fmt::format("stack_profile: {}\nname: {}\n", kFormatVersion, quote(s.name));
    if (!s.description.empty()) o += fmt::format("description: {}\n", quote(s.description));
    o += "factors:\n";
    for (const auto& spec : stack_param_specs())
        o += fmt::format("  {}: {}   # x {}\n", spec.name, s.factors[static_cast<std::size_t>(spec.param)], spec.scales);
    if (!s.fitted) return o;
    o += "fit:\n";
    o += fmt::format("  fitted_with: {}\n  fitted_on: {}\n", quote(s.fitted_with), quote(s.fitted_on));
    o += fmt::format("  residual_sd_log: {}\n  loo_sd_log: {}\n", s.residual_sd_log, s.loo_sd_log);
    o += "  parameters:\n";
    for (const auto& spec : stack_param_specs()) {
        const auto i = static_cast<std::size_t>(spec.param);
        o += fmt::format("    {}: {{free: {}, constrained: {}, at_bound: {}}}   # sd of log factor {:.3g}\n", spec.name,
                         s.free[i], s.constrained[i], s.at_bound[i], s.sd_log(spec.param));
    }
    o += "  covariance_log:   # of the log factors, in the order above\n";
    for (std::size_t r = 0; r < kStackParams; ++r) {
        o += "    - [";
        for (std::size_t c = 0; c < kStackParams; ++c)
            o += fmt::format("{}{}", c ? ", " : "", s.covariance_log[r * kStackParams + c]);
        o += "]\n";
    }
    const auto& e = s.evidence;
    o += fmt::format("  evidence: {{min_gpus: {}, max_gpus: {}, max_nodes: {}, max_tp: {}, max_pp: {}, max_cp: {}}}\n",
                     std::max(1, e.min_gpus), std::max(1, e.max_gpus), std::max(1, e.max_nodes), e.max_tp, e.max_pp,
                     e.max_cp);
    auto list = [&](const std::vector<std::string>& v) {
        std::string l = "[";
        for (std::size_t k = 0; k < v.size(); ++k) l += (k ? ", " : "") + quote(v[k]);
        return l + "]";
    };
    // The evidence's lists go in a second map line so that the first stays short.
    o.pop_back();
    o.pop_back();
    o += fmt::format(", gpus: {}, frameworks: {}}}\n", list(e.gpus), list(e.frameworks));
    o += "  runs:\n";
    for (const auto& r : s.runs)
        o += fmt::format("    - {{id: {}, gpus: {}, nodes: {}, tp: {}, pp: {}, cp: {}, dp: {}{}{}, measured: {}, "
                         "prior: {}, fitted: {}, loo_error_pct: {}}}\n",
                         quote(r.id), r.gpus, r.nodes, r.tp, r.pp, r.cp, r.dp,
                         r.micro_batch > 0 ? fmt::format(", micro_batch: {}", r.micro_batch) : std::string(),
                         r.shape.empty() ? std::string() : ", shape: " + quote(r.shape), r.measured, r.prior, r.fitted,
                         r.loo_error_pct);
    if (s.discrepancy.present) {
        const auto& d = s.discrepancy;
        o += "  # The runs' residuals after the factors as a Gaussian process over the layout (docs/calibration.md\n";
        o += "  # \"The discrepancy\"): variances in log^2, length scales in log2 of tp, pp, cp, dp, micro-batch.\n";
        o += fmt::format("  discrepancy: {{signal_var: {}, noise_var: {}, length: [{}, {}, {}, {}, {}], loo_sd_log: {}}}\n",
                         d.signal_var, d.noise_var, d.length[0], d.length[1], d.length[2], d.length[3], d.length[4],
                         d.loo_sd_log);
    }
    o += "  notes: " + (s.notes.empty() ? std::string("[]") : std::string()) + "\n";
    for (const auto& n : s.notes) o += "    - " + quote(n) + "\n";
    return o;
}

} // namespace trainsim::model
