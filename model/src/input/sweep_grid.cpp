// Sweep grids: strict reading and each cell's plan through the scenario loader
// (trainsim/model/input/sweep_grid.hpp; docs/plan-search.md "Sweeps").
#include "trainsim/model/input/sweep_grid.hpp"

#include "trainsim/model/accounting/flops.hpp"
#include "trainsim/model/input/profile_io.hpp"

#include "input_support.hpp"

#include <fmt/format.h>

#include <algorithm>

namespace trainsim::model {
namespace fs = std::filesystem;
using detail::Diags;
using detail::Field;
using detail::report;
using detail::Site;

namespace {

const std::vector<std::string> kTopKeys{"title", "models", "gpus", "counts", "precisions", "tokens", "frameworks",
                                        "stacks", "prices", "training", "run", "constraints"};

// A value that names a file (a '/' in it, or a .yaml / .yml / .json ending) is made absolute against
// the grid's folder, as a scenario's paths are against the scenario's.
bool names_file(const std::string& v) {
    auto ends = [&](std::string_view s) { return v.size() > s.size() && v.compare(v.size() - s.size(), s.size(), s) == 0; };
    return v.find('/') != std::string::npos || ends(".yaml") || ends(".yml") || ends(".json");
}

std::string flow(const YAML::Node& map) {
    YAML::Emitter e;
    e.SetMapFormat(YAML::Flow);
    e.SetSeqFormat(YAML::Flow);
    e << map;
    return e.c_str();
}

class GridReader {
public:
    GridReader(std::string file, fs::path dir, SweepGrid& g, Diags& out)
        : file_(std::move(file)), dir_(std::move(dir)), g_(g), out_(out) {}

    void read(const YAML::Node& root) {
        Site root_site = detail::site_at(file_, root.Mark(), "");
        if (root_site.line == 0) root_site = Site{file_, 1, 1, ""};
        if (!root.IsMap()) {
            report(out_, root_site, "a sweep grid is a map (models, gpus, counts, ...); got " + detail::describe(root));
            return;
        }
        bool has_models = false, has_gpus = false, has_counts = false;
        for (const Field& f : detail::fields_of(root, file_, "", out_)) {
            if (f.name == "title") {
                if (auto v = detail::read_scalar(f.value, f.value_site, "a string", out_)) g_.title = *v;
            } else if (f.name == "models") {
                has_models = true;
                axis(f, g_.models, true);
            } else if (f.name == "gpus") {
                has_gpus = true;
                axis(f, g_.gpus, true);
            } else if (f.name == "precisions") {
                axis(f, g_.precisions, false);
            } else if (f.name == "tokens") {
                axis(f, g_.tokens, false);
            } else if (f.name == "frameworks") {
                axis(f, g_.frameworks, false);
            } else if (f.name == "stacks") {
                axis(f, g_.stacks, true);
            } else if (f.name == "counts") {
                has_counts = true;
                counts(f);
            } else if (f.name == "prices") {
                prices(f);
            } else if (f.name == "training") {
                section(f, g_.training_yaml);
            } else if (f.name == "run") {
                section(f, g_.run_yaml);
            } else if (f.name == "constraints") {
                constraints(f);
            } else {
                report(out_, f.key_site,
                       fmt::format("unknown key '{}'{} ({})", f.name, detail::did_you_mean(f.name, kTopKeys),
                                   detail::join_list(kTopKeys)));
            }
        }
        if (!has_models) report(out_, root_site, "missing key 'models' (model preset ids or config.json files)");
        if (!has_gpus) report(out_, root_site, "missing key 'gpus' (hardware profile ids or files)");
        if (!has_counts) report(out_, root_site, "missing key 'counts' (GPU counts, e.g. [8, 64, 512])");
        for (const auto& p : g_.prices)
            if (!p.gpu.empty() && std::none_of(g_.gpus.begin(), g_.gpus.end(),
                                               [&](const SweepValue& v) { return v.label == p.gpu; }))
                report(out_, Site{file_, p.line, p.col, fmt::format("prices.{}.gpu", p.name)},
                       fmt::format("gpu '{}' is not one of the grid's gpus", p.gpu));
    }

private:
    // A list of distinct non-empty strings.
    void axis(const Field& f, std::vector<SweepValue>& into, bool paths) {
        if (!f.value.IsSequence() || f.value.size() == 0) {
            report(out_, f.value_site, "expected a non-empty list, got " + detail::describe(f.value));
            return;
        }
        for (std::size_t i = 0; i < f.value.size(); ++i) {
            const YAML::Node n = f.value[i];
            Site at = detail::site_at(file_, n.Mark(), fmt::format("{}[{}]", f.name, i));
            if (at.line == 0) at = f.value_site;
            auto v = detail::read_string(n, at, out_);
            if (!v) continue;
            if (std::any_of(into.begin(), into.end(), [&](const SweepValue& w) { return w.label == *v; })) {
                report(out_, at, fmt::format("'{}' is listed twice", *v));
                continue;
            }
            SweepValue sv{*v, *v, at.line, at.col};
            if (paths && names_file(*v) && !fs::path(*v).is_absolute()) sv.value = (dir_ / *v).lexically_normal().string();
            into.push_back(std::move(sv));
        }
    }

    void counts(const Field& f) {
        if (!f.value.IsSequence() || f.value.size() == 0) {
            report(out_, f.value_site, "expected a non-empty list of GPU counts, got " + detail::describe(f.value));
            return;
        }
        for (std::size_t i = 0; i < f.value.size(); ++i) {
            const YAML::Node n = f.value[i];
            Site at = detail::site_at(file_, n.Mark(), fmt::format("counts[{}]", i));
            if (at.line == 0) at = f.value_site;
            auto v = detail::read_int(n, at, 1, out_);
            if (!v) continue;
            if (std::find(g_.counts.begin(), g_.counts.end(), *v) != g_.counts.end()) {
                report(out_, at, fmt::format("{} is listed twice", *v));
                continue;
            }
            g_.counts.push_back(*v);
        }
        std::sort(g_.counts.begin(), g_.counts.end());
    }

    void prices(const Field& f) {
        if (!f.value.IsSequence() || f.value.size() == 0) {
            report(out_, f.value_site,
                   "expected a non-empty list of pricing blocks ({name, basis, rate, currency, ...}), got " +
                       detail::describe(f.value));
            return;
        }
        for (std::size_t i = 0; i < f.value.size(); ++i) {
            const YAML::Node n = f.value[i];
            Site at = detail::site_at(file_, n.Mark(), fmt::format("prices[{}]", i));
            if (at.line == 0) at = f.value_site;
            if (!n.IsMap()) {
                report(out_, at, "a price is a scenario pricing block with a name; got " + detail::describe(n));
                continue;
            }
            SweepPrice p;
            p.line = at.line;
            p.col = at.col;
            YAML::Node block(YAML::NodeType::Map);
            for (const Field& k : detail::fields_of(n, file_, at.key, out_)) {
                p.key_sites[k.name] = {k.value_site.line, k.value_site.col};
                if (k.name == "name") {
                    if (auto v = detail::read_string(k.value, k.value_site, out_)) p.name = *v;
                } else if (k.name == "gpu") {
                    if (auto v = detail::read_string(k.value, k.value_site, out_)) p.gpu = *v;
                } else {
                    block[k.name] = k.value; // checked by the loader as pricing.<key>
                }
            }
            if (p.name.empty()) {
                report(out_, at, "missing key 'name' (how the rows name this price)");
                continue;
            }
            if (std::any_of(g_.prices.begin(), g_.prices.end(), [&](const SweepPrice& q) { return q.name == p.name; })) {
                report(out_, at, fmt::format("price name '{}' is used twice", p.name));
                continue;
            }
            p.yaml = flow(block);
            g_.prices.push_back(std::move(p));
        }
    }

    // training / run: scenario sections passed to every cell (their keys checked by the loader).
    void section(const Field& f, std::string& into) {
        if (!f.value.IsMap()) {
            report(out_, f.value_site, "expected a map of scenario keys, got " + detail::describe(f.value));
            return;
        }
        YAML::Node block(YAML::NodeType::Map);
        for (const Field& k : detail::fields_of(f.value, file_, f.name, out_)) {
            if (f.name == "training" && k.name == "tokens") {
                report(out_, k.key_site, "the token counts are the grid's own axis: write them as 'tokens: [...]' at the top");
                continue;
            }
            g_.key_sites[f.name + "." + k.name] = {k.value_site.line, k.value_site.col};
            block[k.name] = k.value;
        }
        g_.key_sites[f.name] = {f.value_site.line, f.value_site.col};
        into = flow(block);
    }

    void constraints(const Field& f) {
        if (!f.value.IsMap()) {
            report(out_, f.value_site, "expected a map (deadline_days, budget, days, memory_headroom), got " +
                                           detail::describe(f.value));
            return;
        }
        const std::vector<std::string> keys{"deadline_days", "budget", "days", "memory_headroom"};
        for (const Field& k : detail::fields_of(f.value, file_, "constraints", out_)) {
            if (k.name == "deadline_days") {
                if (auto v = detail::read_number(k.value, k.value_site, 0, 1e9, out_)) {
                    if (*v > 0) g_.deadline_days = *v;
                    else report(out_, k.value_site, "must be positive");
                }
            } else if (k.name == "budget") {
                if (auto v = detail::read_number(k.value, k.value_site, 0, 1e18, out_)) {
                    if (*v > 0) g_.budget = *v;
                    else report(out_, k.value_site, "must be positive");
                }
            } else if (k.name == "days") {
                if (auto v = detail::read_enum(k.value, k.value_site, {"expected", "steady"}, out_)) g_.days = *v;
            } else if (k.name == "memory_headroom") {
                if (auto v = detail::read_string(k.value, k.value_site, out_)) {
                    try {
                        const double h = parse_fraction(*v);
                        if (h >= 0.5) report(out_, k.value_site, "must be below 50% of the HBM");
                        else g_.memory_headroom = *v;
                    } catch (const UnitError& e) {
                        report(out_, k.value_site, e.what());
                    }
                }
            } else {
                report(out_, k.key_site,
                       fmt::format("unknown key '{}'{} ({})", k.name, detail::did_you_mean(k.name, keys),
                                   detail::join_list(keys)));
            }
        }
    }

    std::string file_;
    fs::path dir_;
    SweepGrid& g_;
    Diags& out_;
};

SweepGrid parse(const std::string& text, const std::string& name, const fs::path& dir) {
    Diags out;
    SweepGrid g;
    g.file = name;
    g.text = text;
    if (const auto root = detail::parse_yaml(text, name, out)) GridReader(name, dir, g, out).read(*root);
    if (g.precisions.empty()) g.precisions.push_back({"bf16", "bf16", 0, 0});
    if (!out.empty()) throw SweepGridError(out);
    return g;
}

} // namespace

SweepGrid load_sweep_grid(const fs::path& file) {
    Diags out;
    // read_text refuses folders, FIFOs and devices before opening them, and caps the size.
    const auto text = detail::read_text(file, Site{file.string(), 0, 0, ""}, out);
    if (!text) throw SweepGridError(out);
    return parse(*text, file.string(), file.parent_path());
}

SweepGrid load_sweep_grid_text(const std::string& text, const std::string& name, const fs::path& base_dir) {
    return parse(text, name, base_dir);
}

std::vector<SweepCell> sweep_cells(const SweepGrid& g) {
    std::vector<SweepCell> cells;
    const std::size_t nt = std::max<std::size_t>(1, g.tokens.size()), nf = std::max<std::size_t>(1, g.frameworks.size()),
                      ns = std::max<std::size_t>(1, g.stacks.size());
    for (std::size_t m = 0; m < g.models.size(); ++m)
        for (std::size_t u = 0; u < g.gpus.size(); ++u)
            for (std::size_t p = 0; p < g.precisions.size(); ++p)
                for (std::size_t t = 0; t < nt; ++t)
                    for (std::size_t f = 0; f < nf; ++f)
                        for (std::size_t s = 0; s < ns; ++s) {
                            SweepCell c{m, u, p, t, f, s};
                            if (g.prices.empty()) {
                                cells.push_back(c);
                                continue;
                            }
                            for (std::size_t q = 0; q < g.prices.size(); ++q)
                                if (g.prices[q].gpu.empty() || g.prices[q].gpu == g.gpus[u].label) {
                                    c.price = q;
                                    cells.push_back(c);
                                }
                        }
    return cells;
}

std::string sweep_cell_key(const SweepGrid& g, const SweepCell& c) {
    auto at = [](const std::vector<SweepValue>& v, std::size_t i) { return v.empty() ? std::string("-") : v[i].label; };
    return fmt::format("{}|{}|{}|{}|{}|{}|{}", g.models[c.model].label, g.gpus[c.gpu].label,
                       g.precisions[c.precision].label, g.tokens.empty() ? std::string("20/param") : g.tokens[c.tokens].label,
                       at(g.frameworks, c.framework), at(g.stacks, c.stack),
                       c.price < g.prices.size() ? g.prices[c.price].name : std::string("-"));
}

namespace {

// YAML double-quoted.
std::string q(std::string_view s) {
    YAML::Emitter e;
    e << YAML::DoubleQuoted << std::string(s);
    return e.c_str();
}

// Where in the grid the value behind a cell's scenario key was written.
Diagnostic to_grid(const SweepGrid& g, const SweepCell& c, const Diagnostic& d, const std::string& name,
                   const std::string& cell) {
    // A problem inside another file (a profile, a config.json, a stack) keeps its own place.
    if (!d.file.empty() && d.file != name) {
        Diagnostic own = d;
        own.message = fmt::format("cell {}: {}", cell, d.message);
        return own;
    }
    auto site = [&](const SweepValue& v, std::string key) { return Diagnostic{g.file, v.line, v.col, std::move(key), {}}; };
    auto starts = [&](std::string_view p) { return d.key.compare(0, p.size(), p) == 0; };
    Diagnostic out{g.file, 0, 0, d.key, {}};
    if (starts("pricing") && c.price < g.prices.size()) {
        const auto& p = g.prices[c.price];
        const std::string sub = d.key.size() > 8 ? d.key.substr(8) : std::string();
        out = Diagnostic{g.file, p.line, p.col, fmt::format("prices.{}{}", p.name, sub.empty() ? "" : "." + sub), {}};
        if (auto it = p.key_sites.find(sub); it != p.key_sites.end()) {
            out.line = it->second.first;
            out.col = it->second.second;
        }
    } else if (starts("training.tokens") && !g.tokens.empty()) {
        out = site(g.tokens[c.tokens], fmt::format("tokens[{}]", c.tokens));
    } else if (starts("training") || starts("run")) {
        const auto dot = d.key.find('.');
        const std::string section = d.key.substr(0, dot);
        auto it = g.key_sites.find(d.key);
        if (it == g.key_sites.end()) it = g.key_sites.find(section);
        if (it != g.key_sites.end()) out = Diagnostic{g.file, it->second.first, it->second.second, d.key, {}};
    } else if (starts("model")) {
        out = site(g.models[c.model], fmt::format("models[{}]", c.model));
    } else if (starts("cluster")) {
        out = site(g.gpus[c.gpu], fmt::format("gpus[{}]", c.gpu));
    } else if (starts("precision")) {
        out = site(g.precisions[c.precision], fmt::format("precisions[{}]", c.precision));
    } else if (starts("parallel.framework") && !g.frameworks.empty()) {
        out = site(g.frameworks[c.framework], fmt::format("frameworks[{}]", c.framework));
    } else if (starts("parallel.stack") && !g.stacks.empty()) {
        out = site(g.stacks[c.stack], fmt::format("stacks[{}]", c.stack));
    }
    out.message = fmt::format("cell {}: {}", cell, d.message);
    return out;
}

} // namespace

Plan sweep_cell_plan(const SweepGrid& g, const SweepCell& c, const LoadOptions& opts) {
    const std::string cell = sweep_cell_key(g, c);
    const std::string name = fmt::format("{} cell {}", g.file, cell);
    const auto& model = g.models[c.model];
    const bool hf = model.label.size() > 5 && model.label.compare(model.label.size() - 5, 5, ".json") == 0;
    std::vector<Diagnostic> diags;
    try {
        const auto hw = resolve_profile(g.gpus[c.gpu].value, fs::current_path(), opts.data_dir);
        std::string training = g.training_yaml.empty() ? std::string("{}") : g.training_yaml;
        // The flow map's closing brace: the tokens, and the defaults of `plan`'s flag form for what
        // the grid does not write (sequence 4096, 1024 sequences per step, micro-batch 1: the search
        // chooses the micro-batch), go inside.
        training.pop_back();
        const std::string sep = training.size() > 1 ? ", " : "";
        training += fmt::format("{}tokens: {}", sep, q(g.tokens.empty() ? std::string("1T") : g.tokens[c.tokens].value));
        for (const auto& [key, value] : {std::pair{"seq_len", "4096"}, {"global_batch", "1024"}, {"micro_batch", "1"}})
            if (g.key_sites.count(std::string("training.") + key) == 0) training += fmt::format(", {}: {}", key, value);
        training += "}";
        std::string parallel = "{tp: 1, pp: 1, dp: auto";
        if (!g.frameworks.empty()) parallel += ", framework: " + q(g.frameworks[c.framework].value);
        if (!g.stacks.empty()) parallel += ", stack: " + q(g.stacks[c.stack].value);
        parallel += "}";
        std::string yaml = fmt::format("model: {}\ntraining: {}\nparallel: {}\nprecision: {}\n"
                                       "cluster: {{gpu: {}, nodes: 1, gpus_per_node: {}}}\n",
                                       hf ? fmt::format("{{hf_config: {}}}", q(model.value)) : q(model.value), training,
                                       parallel, q(g.precisions[c.precision].value), q(g.gpus[c.gpu].value),
                                       hw.default_gpus_per_node);
        if (c.price < g.prices.size()) yaml += fmt::format("pricing: {}\n", g.prices[c.price].yaml);
        if (!g.run_yaml.empty()) yaml += fmt::format("run: {}\n", g.run_yaml);
        yaml += fmt::format("plans:\n  - name: {}\n", q(cell));
        auto plan = load_scenario_text(yaml, name, opts).plans.front();
        if (g.tokens.empty()) plan.training.tokens = kSweepTokensPerParam * count_params(plan.model).total;
        return plan;
    } catch (const InputError& e) {
        for (const auto& d : e.diagnostics()) diags.push_back(to_grid(g, c, d, name, cell));
    }
    throw SweepGridError(detail::deduplicate(diags));
}

} // namespace trainsim::model
