// The one strict loader for scenarios and model presets (docs/formats.md sections 1 and 2).
//
// How a scenario becomes plans:
//   1. The YAML tree is read into layers: the top level (the defaults) and one layer per plan
//      item. Each layer maps canonical key paths ("parallel.tp") to the value written and its
//      place; unknown keys are reported here, with a suggestion.
//   2. Each plan walks the key table (scenario_keys.cpp): the plan's own value, else the default
//      section's, else the table's default (parsed like a written value). A binding below reads
//      each key by its type (checked against the table's) and stores it in the Plan.
//   3. The model and the hardware profile are resolved, dp is derived, and check_layout's
//      problems are attached to the place their key was written.
// Nothing throws until the whole file has been seen; then every problem is thrown together.
#include "trainsim/model/input/loader.hpp"

#include "trainsim/model/accounting/layout.hpp"
#include "trainsim/model/framework/framework_profile.hpp"
#include "trainsim/model/input/stack_io.hpp"

#include "input_support.hpp"
#include "key_bindings.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <array>
#include <functional>
#include <limits>
#include <map>
#include <set>
#include <stdexcept>

namespace trainsim::model {
namespace fs = std::filesystem;
using detail::Diags;
using detail::Field;
using detail::report;
using detail::Site;
using detail::Binding;
using detail::ModelBuild;
using detail::PlanBuild;
using detail::make_model_bindings;
using detail::make_plan_bindings;
using detail::apply_default;
using detail::Bindings;
using detail::child_names;
using detail::find_spec;
using detail::has_literal_default;
using detail::is_model_leaf;
using detail::is_plan_leaf;
using detail::is_section;
using detail::suggest_key;
using detail::kSections;

namespace {

// ---------------------------------------------------------------------------------------------
// Reading the YAML tree

// A value written in a scenario or preset, with its place.
struct Written {
    YAML::Node value;
    Site key_site;
    Site value_site;
};

Written written(const Field& f) { return Written{f.value, f.key_site, f.value_site}; }

Site with_key(Site s, std::string key) {
    s.key = std::move(key);
    return s;
}

// The keys of the top level or of one plan item.
struct Layer {
    std::string prefix;                     // "" (top level) or "plans[2]"
    Site site;                              // the item itself (or the document)
    std::map<std::string, Written> values;  // canonical path ("parallel.tp") -> value
    std::map<std::string, Site> sections;   // "parallel" -> where `parallel:` was written
    std::optional<Written> model;
};

// Everything a scenario load shares between plans.
struct Context {
    std::string file;  // as named in diagnostics
    fs::path dir;      // relative paths in the scenario start here
    const LoadOptions& opts;
    Diags& out;
    Bindings bindings;
    Diags warnings; // said, not fatal
    std::optional<HardwareProfile> override_profile;
    std::shared_ptr<const StackProfile> override_stack;
    // Stack profiles by parallel.stack as written, like `profiles`.
    std::map<std::string, std::pair<std::shared_ptr<const StackProfile>, Diags>> stacks;
    // Profiles by cluster.gpu as written: the profile, or the problems found loading it (the first
    // problem is re-reported at each place that names the profile, the others once).
    std::map<std::string, std::pair<std::optional<HardwareProfile>, Diags>> profiles;
    // Layout problems of the plans of a `plans` list, with the plan they were found in: one written
    // in a shared section is reported once, naming the plans it affects (merge_layout_problems).
    struct PlanProblem {
        Site at;
        std::string message;
        std::string plan;
    };
    std::vector<PlanProblem> plan_problems;
};

// Reads the keys under a section (recursing into nested sections such as pricing.discounts).
void read_section(const Field& section, const std::string& canonical, Layer& layer, Context& ctx) {
    if (section.value.IsNull()) return;  // `parallel:` with nothing under it changes nothing
    if (!section.value.IsMap()) {
        report(ctx.out, section.value_site,
               fmt::format("expected a map of keys ({}), got {}", detail::join_list(child_names(canonical)),
                           detail::describe(section.value)));
        return;
    }
    for (const Field& f : detail::fields_of(section.value, ctx.file, section.key_site.key, ctx.out)) {
        const std::string path = canonical + "." + f.name;
        const KeySpec* spec = find_spec(path);
        if (spec == nullptr) {
            report(ctx.out, f.key_site, fmt::format("unknown key '{}'{}", f.name, suggest_key(canonical, f.name)));
        } else if (spec->type == "section") {
            read_section(f, path, layer, ctx);
        } else {
            layer.values[path] = written(f);
        }
    }
}

// Reads one layer. `extra` handles the keys only this kind of layer has (title, plans, name) and
// returns false for a key it does not know.
void read_layer(const YAML::Node& map, Layer& layer, Context& ctx, const std::vector<std::string>& allowed,
                const std::function<bool(const Field&)>& extra) {
    for (const Field& f : detail::fields_of(map, ctx.file, layer.prefix, ctx.out)) {
        if (is_section(f.name)) {
            layer.sections[f.name] = f.key_site;
            read_section(f, f.name, layer, ctx);
        } else if (f.name == "precision") {
            layer.values["precision"] = written(f);
        } else if (f.name == "model") {
            layer.model = written(f);
        } else if (!extra(f)) {
            const bool top_only = !layer.prefix.empty() && find_spec(f.name) != nullptr;
            if (top_only)
                report(ctx.out, f.key_site, fmt::format("'{}' is only allowed at the top level, not in a plan", f.name));
            else {
                std::string hint = detail::did_you_mean(f.name, allowed);
                if (hint.empty()) hint = suggest_key("", f.name);
                report(ctx.out, f.key_site, fmt::format("unknown key '{}'{}", f.name, hint));
            }
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Models

// The fields of a preset file (by model key name, without `id`), or nullopt after reporting.
std::optional<std::map<std::string, Written>> read_preset_fields(const fs::path& file, const std::string& id,
                                                                 Diags& out) {
    const std::string name = file.string();
    const Site file_site{name, 0, 0, ""};
    const auto before = out.size();
    auto text = detail::read_text(file, file_site, out);
    if (!text) return std::nullopt;
    auto root = detail::parse_yaml(*text, name, out);
    if (!root) return std::nullopt;
    if (!root->IsMap()) {
        report(out, detail::site_at(name, root->Mark(), ""),
               fmt::format("a model preset is a map of keys (id, name, source, layers, ...), got {}",
                           detail::describe(*root)));
        return std::nullopt;
    }
    std::vector<std::string> allowed{"id"};
    for (const auto& k : scenario_keys())
        if (is_model_leaf(k)) allowed.push_back(k.path.substr(6));
    std::map<std::string, Written> fields;
    bool has_id = false;
    for (const Field& f : detail::fields_of(*root, name, "", out)) {
        if (std::find(allowed.begin(), allowed.end(), f.name) == allowed.end()) {
            report(out, f.key_site, fmt::format("unknown key '{}'{}", f.name, detail::did_you_mean(f.name, allowed)));
        } else if (f.name == "id") {
            has_id = true;
            auto v = detail::read_string(f.value, f.value_site, out);
            if (v && *v != id)
                report(out, f.value_site, fmt::format("id '{}' does not match the file name '{}.yaml'", *v, id));
        } else {
            fields[f.name] = written(f);
        }
    }
    // A preset is a reference: everything but kv_heads and head_dim is written out, with a source.
    const Site root_site = detail::site_at(name, root->Mark(), "");
    for (const char* key : {"name", "source", "layers", "hidden", "heads", "ffn", "ffn_type", "vocab",
                            "tied_embeddings"}) {
        if (!fields.contains(key)) report(out, Site{name, root_site.line, root_site.col, key}, "required key is missing");
    }
    if (!has_id) report(out, Site{name, root_site.line, root_site.col, "id"}, "required key is missing");
    if (out.size() != before) return std::nullopt;
    return fields;
}

// Builds a model from its written fields (keyed by model key name). `missing_at` is where a
// missing required key is reported (its key is the model's path).
std::optional<ModelArch> build_model(const std::map<std::string, Written>& fields, const Site& missing_at,
                                     const Bindings& bindings, Diags& out) {
    ModelBuild b;
    bool ok = true;
    for (const auto& spec : scenario_keys()) {
        if (!is_model_leaf(spec)) continue;
        const std::string leaf = spec.path.substr(6);
        const auto& binding = Bindings::find(bindings.model, spec.path);
        if (auto it = fields.find(leaf); it != fields.end()) {
            ok = binding.apply(b, it->second.value, it->second.value_site, spec, out) && ok;
        } else if (spec.required) {
            report(out, Site{missing_at.file, missing_at.line, missing_at.col, detail::join_key(missing_at.key, leaf)},
                   "required key is missing (an inline model needs layers, hidden, heads, ffn and vocab)");
            ok = false;
        } else if (has_literal_default(spec)) {
            apply_default(binding, b, spec);
        }
    }
    if (!ok) return std::nullopt;
    auto site_of = [&](const std::string& leaf) {
        auto it = fields.find(leaf);
        return it != fields.end() ? it->second.key_site
                                  : Site{missing_at.file, missing_at.line, missing_at.col,
                                         detail::join_key(missing_at.key, leaf)};
    };
    ModelArch m = b.model;
    // Invariant: heads is required and read with a minimum of 1.
    if (m.heads < 1) throw std::logic_error("build_model: heads < 1 after a successful read");
    if (!b.kv_heads_written) m.kv_heads = m.heads;
    if (!b.head_dim_written) m.head_dim = m.hidden / m.heads;
    for (const auto& p : detail::check_model_shape(m, b.head_dim_written)) {
        report(out, site_of(p.key), p.key == "heads" ? p.message + "; write head_dim" : p.message);
        ok = false;
    }
    if (!ok) return std::nullopt;
    return m;
}

std::string known_ids_note(const fs::path& dir) {
    const auto ids = list_ids(dir);
    return ids.empty() ? fmt::format("no *.yaml files in {}", dir.string())
                       : fmt::format("known: {}", detail::join_list(ids));
}

// A preset, with inline keys written next to `preset:` overriding its values.
std::optional<ModelArch> model_from_preset(const std::string& id, const Site& at,
                                           const std::map<std::string, Written>& overrides, Context& ctx) {
    const fs::path dir = ctx.opts.data_dir / "models";
    const fs::path file = dir / (id + ".yaml");
    std::error_code ec;
    if (id.find('/') != std::string::npos || !fs::is_regular_file(file, ec)) {
        report(ctx.out, at,
               fmt::format("unknown model preset '{}'{} ({})", id, detail::did_you_mean(id, list_ids(dir)),
                           known_ids_note(dir)));
        return std::nullopt;
    }
    Diags preset_diags;
    auto fields = read_preset_fields(file, id, preset_diags);
    // The preset must be valid on its own before inline keys are laid over it.
    if (fields && !build_model(*fields, Site{file.string(), 1, 1, ""}, ctx.bindings, preset_diags)) fields.reset();
    if (!fields) {
        report(ctx.out, at,
               fmt::format("model preset '{}' ({}) has {} problem(s), listed with it", id, file.string(),
                           preset_diags.size()));
        ctx.out.insert(ctx.out.end(), preset_diags.begin(), preset_diags.end());
        return std::nullopt;
    }
    if (overrides.empty()) return build_model(*fields, at, ctx.bindings, ctx.out);
    for (const auto& [k, v] : overrides) (*fields)[k] = v;
    Diags merged_diags;
    auto model = build_model(*fields, at, ctx.bindings, merged_diags);
    // A rule broken by the combination may be blamed on a preset line: say where it was combined.
    const bool blames_preset = std::any_of(merged_diags.begin(), merged_diags.end(),
                                           [&](const Diagnostic& d) { return d.file != ctx.file; });
    if (blames_preset)
        report(ctx.out, at, fmt::format("model preset '{}' combined with the keys written next to it is invalid", id));
    ctx.out.insert(ctx.out.end(), merged_diags.begin(), merged_diags.end());
    return model;
}

std::optional<ModelArch> model_from_hf(const std::string& path, const Site& at, Context& ctx) {
    fs::path file = path;
    if (file.is_relative()) file = ctx.dir / file;
    try {
        return load_hf_config(file);
    } catch (const ScenarioError& e) {
        report(ctx.out, at,
               fmt::format("HF config '{}' cannot be used: {} problem(s), listed with it", file.string(),
                           e.diagnostics().size()));
        ctx.out.insert(ctx.out.end(), e.diagnostics().begin(), e.diagnostics().end());
        return std::nullopt;
    }
}

std::optional<ModelArch> resolve_model(const Written& w, Context& ctx) {
    const YAML::Node& v = w.value;
    if (v.IsScalar()) return model_from_preset(v.Scalar(), w.value_site, {}, ctx);
    if (!v.IsMap()) {
        report(ctx.out, w.value_site,
               fmt::format("expected a preset id or a map (preset, hf_config or inline keys), got {}",
                           detail::describe(v)));
        return std::nullopt;
    }
    std::optional<Field> preset;
    std::optional<Field> hf;
    std::map<std::string, Written> inline_fields;
    bool ok = true;
    for (const Field& f : detail::fields_of(v, ctx.file, w.key_site.key, ctx.out)) {
        if (find_spec("model." + f.name) == nullptr) {
            report(ctx.out, f.key_site, fmt::format("unknown key '{}'{}", f.name, suggest_key("model", f.name)));
            ok = false;
        } else if (f.name == "preset") {
            preset = f;
        } else if (f.name == "hf_config") {
            hf = f;
        } else {
            inline_fields[f.name] = written(f);
        }
    }
    if (preset && hf) {
        report(ctx.out, hf->key_site, "'preset' and 'hf_config' exclude one another");
        return std::nullopt;
    }
    if (hf) {
        // The shape comes from the config alone; only its labels (name, source) may be written.
        std::optional<std::string> name, source;
        for (const auto& [key, field] : inline_fields) {
            if (key == "name" || key == "source") {
                auto text = detail::read_string(field.value, field.value_site, ctx.out);
                if (!text) ok = false;
                (key == "name" ? name : source) = text;
                continue;
            }
            report(ctx.out, field.key_site,
                   "hf_config stands alone: the shape keys cannot be combined with it, only name and source (use an "
                   "inline model)");
            return std::nullopt;
        }
        auto path = detail::read_string(hf->value, hf->value_site, ctx.out);
        if (!path || !ok) return std::nullopt;
        auto m = model_from_hf(*path, hf->value_site, ctx);
        if (m && name) m->name = *name;
        if (m && source) m->source = *source;
        return m;
    }
    if (preset) {
        auto id = detail::read_string(preset->value, preset->value_site, ctx.out);
        if (!id || !ok) return std::nullopt;
        return model_from_preset(*id, preset->value_site, inline_fields, ctx);
    }
    if (!ok) return std::nullopt;
    return build_model(inline_fields, w.key_site, ctx.bindings, ctx.out);
}

// ---------------------------------------------------------------------------------------------
// Hardware

// The profile named by cluster.gpu, or nothing after reporting at `at` why it cannot be used.
std::optional<HardwareProfile> resolve_hardware(const std::string& gpu, const Site& at, Context& ctx) {
    auto cached = ctx.profiles.find(gpu);
    if (cached == ctx.profiles.end()) {
        std::optional<HardwareProfile> result;
        Diags problems;
        const Site here{};  // filled with `at` below, for every place that names this profile
        const fs::path file = profile_path(gpu, ctx.dir, ctx.opts.data_dir);
        const fs::path dir = ctx.opts.data_dir / "hardware";
        std::error_code ec;
        if (!fs::is_regular_file(file, ec)) {
            if (file == dir / (gpu + ".yaml"))
                report(problems, here,
                       fmt::format("unknown hardware profile '{}'{} ({})", gpu,
                                   detail::did_you_mean(gpu, list_ids(dir)), known_ids_note(dir)));
            else
                report(problems, here, fmt::format("cannot open hardware profile '{}'", file.string()));
        } else {
            try {
                result = resolve_profile(gpu, ctx.dir, ctx.opts.data_dir);
                ctx.warnings.insert(ctx.warnings.end(), result->warnings.begin(), result->warnings.end());
            } catch (const ProfileError& e) {
                report(problems, here,
                       fmt::format("hardware profile '{}' ({}) has {} problem(s), listed with it", gpu, file.string(),
                                   e.diagnostics().size()));
                problems.insert(problems.end(), e.diagnostics().begin(), e.diagnostics().end());
            }
        }
        cached = ctx.profiles.emplace(gpu, std::pair{std::move(result), std::move(problems)}).first;
    }
    const auto& [profile, problems] = cached->second;
    for (std::size_t i = 0; i < problems.size(); ++i) {
        Diagnostic d = problems[i];
        if (i == 0) d = Diagnostic{at.file, at.line, at.col, at.key, d.message};
        ctx.out.push_back(std::move(d));
    }
    return profile;
}

// ---------------------------------------------------------------------------------------------
// Plans

class PlanBuilder {
public:
    PlanBuilder(const Layer& defaults, const Layer* own, std::string name, bool in_list, Context& ctx)
        : defaults_(defaults), own_(own), in_list_(in_list), ctx_(ctx) {
        b_.plan.name = std::move(name);
    }

    std::optional<Plan> build() {
        const auto before = ctx_.out.size();
        read_keys();
        check_pricing();
        resolve_finetune();
        auto model = read_model();
        auto hardware = read_hardware();
        resolve_dp();
        // The framework fills what the scenario does not write once the model is known: a default
        // can follow the model's size (llm-foundry's recipes recompute from 2B parameters up).
        if (model) b_.plan.model = *model;
        apply_framework();
        if (model) {
            if (hardware) b_.plan.hardware = *hardware;
            else bad_.insert("precision");  // cannot be judged without the GPU
            if (hardware) apply_stack_profile();
            attach_layout_problems();
        }
        if (ctx_.out.size() != before || layout_problem_) return std::nullopt;
        return b_.plan;
    }

private:
    const Written* lookup(const std::string& path) const {
        if (own_ != nullptr)
            if (auto it = own_->values.find(path); it != own_->values.end()) return &it->second;
        if (auto it = defaults_.values.find(path); it != defaults_.values.end()) return &it->second;
        return nullptr;
    }

    // Where to blame `path`: where it was written, else its section in this plan or the
    // defaults, else the plan item, else the document.
    Site site_for(const std::string& path) const {
        if (const Written* w = lookup(path)) return w->key_site;
        const std::string section = path.substr(0, path.find('.'));
        if (own_ != nullptr)
            if (auto it = own_->sections.find(section); it != own_->sections.end())
                return with_key(it->second, detail::join_key(own_->prefix, path));
        if (auto it = defaults_.sections.find(section); it != defaults_.sections.end())
            return with_key(it->second, path);
        if (own_ != nullptr) return with_key(own_->site, detail::join_key(own_->prefix, path));
        return with_key(defaults_.site, path);
    }

    std::string in_plan() const { return in_list_ ? fmt::format("in plan '{}': ", b_.plan.name) : std::string(); }

    // A fine-tune's token count: epochs x dataset_tokens (training.tokens is then not written), and
    // QLoRA's base weights in NF4 unless training.base_format says otherwise.
    void resolve_finetune() {
        auto& t = b_.plan.training;
        if (t.method == Method::qlora && lookup("training.base_format") == nullptr) t.base_format = BaseFormat::nf4;
        const Written* data = lookup("training.dataset_tokens");
        const Written* epochs = lookup("training.epochs");
        if (epochs != nullptr && !bad_.contains("training.epochs") && !(t.epochs > 0)) {
            plan_problem(epochs->value_site, "must be more than 0 (passes over training.dataset_tokens)");
            bad_.insert("training.epochs");
        }
        if (data == nullptr) {
            if (epochs != nullptr && !bad_.contains("training.epochs"))
                plan_problem(epochs->key_site,
                             "epochs multiplies training.dataset_tokens, which is not written (training.tokens is "
                             "the whole count)");
            return;
        }
        if (lookup("training.tokens") != nullptr) {
            plan_problem(data->key_site,
                         "write training.tokens (the whole count) or training.dataset_tokens (times "
                         "training.epochs), not both");
            bad_.insert("training.tokens");
            return;
        }
        if (bad_.contains("training.dataset_tokens") || bad_.contains("training.epochs")) {
            bad_.insert("training.tokens");
            return;
        }
        t.tokens = t.epochs * t.dataset_tokens;
    }

    // What the pricing keys mean together: spot needs its rate, a spot rate its preemption rate,
    // and spot capacity is billed by the hour.
    void check_pricing() {
        const auto& pr = b_.plan.pricing;
        const bool spot_rate = lookup("pricing.spot.rate") != nullptr;
        if (pr.commitment == Commitment::spot && !spot_rate && !bad_.contains("pricing.commitment") &&
            !bad_.contains("pricing.spot.rate"))
            plan_problem(site_for("pricing.commitment"), "commitment spot needs pricing.spot.rate (the spot price)");
        if (spot_rate && lookup("pricing.spot.preemption_rate") == nullptr)
            plan_problem(site_for("pricing.spot.rate"),
                         "a spot rate needs pricing.spot.preemption_rate (how often a node is taken back, e.g. "
                         "'0.002/h'): the run model charges the work each preemption loses");
        if (spot_rate && pr.basis == PriceBasis::machine_month && !bad_.contains("pricing.basis"))
            plan_problem(site_for("pricing.spot.rate"),
                         "spot capacity is billed by the hour: write pricing.basis gpu_hour or machine_hour");
    }

    void read_keys() {
        for (const auto& spec : scenario_keys()) {
            if (!is_plan_leaf(spec)) continue;
            const auto& binding = Bindings::find(ctx_.bindings.plan, spec.path);
            if (const Written* w = lookup(spec.path)) {
                if (!binding.apply(b_, w->value, w->value_site, spec, ctx_.out)) bad_.insert(spec.path);
            } else if (spec.required && !(spec.path == "cluster.gpu" && ctx_.override_profile) &&
                       !(spec.path == "training.tokens" && lookup("training.dataset_tokens") != nullptr)) {
                const Site at = site_for(spec.path);
                const bool at_defaults = own_ == nullptr || !at.key.starts_with(own_->prefix + ".");
                report(ctx_.out, at,
                       fmt::format("{}required key is missing{}", at_defaults ? "" : in_plan(),
                                   in_list_ && at_defaults ? " (write it in the top-level section or in every plan)"
                                                           : ""));
                bad_.insert(spec.path);
            } else if (has_literal_default(spec)) {
                apply_default(binding, b_, spec);
            }
        }
    }

    // parallel.framework: its profile fills the properties the scenario does not write.
    void apply_framework() {
        const Written* w = lookup("parallel.framework");
        if (w == nullptr || bad_.contains("parallel.framework")) return;
        const std::string& name = b_.plan.parallel.framework;
        if (!known_framework(name)) {
            // Modelled, as validate does, with a generic PyTorch eager profile rather than
            // Megatron-Core's tuned one, and said.
            report(ctx_.warnings, w->value_site,
                   fmt::format("{}unknown framework '{}'{}: modelled as a generic PyTorch eager stack (eager "
                               "element-wise ops and launches, SDPA FlashAttention-2, foreach AdamW); known: {}, "
                               "optionally followed by -<release>, e.g. nemo-24.07, or a stack that runs one "
                               "(docs/accuracy.md \"Framework names\"), or fit a stack on a run of yours: "
                               "trainsim fit-stack (docs/calibration.md)",
                               in_plan(), name, detail::did_you_mean(canonical_name(name), framework_families()),
                               fmt::join(framework_families(), ", ")));
        }
        apply_framework_profile(framework_profile(name), b_.plan,
                                [this](std::string_view key) { return lookup(std::string(key)) != nullptr; });
    }

    std::optional<ModelArch> read_model() {
        const Written* w = nullptr;
        if (own_ != nullptr && own_->model) w = &*own_->model;
        else if (defaults_.model) w = &*defaults_.model;
        if (w == nullptr) {
            const Site at = own_ != nullptr ? with_key(own_->site, detail::join_key(own_->prefix, "model"))
                                            : with_key(defaults_.site, "model");
            report(ctx_.out, at, "required key is missing (a preset id, {preset: id}, {hf_config: path} or an inline model)");
            return std::nullopt;
        }
        return resolve_model(*w, ctx_);
    }

    // parallel.stack (or --stack): the plan's hardware as the stack runs it.
    void apply_stack_profile() {
        std::shared_ptr<const StackProfile> stack = ctx_.override_stack;
        if (!stack) {
            const Written* w = lookup("parallel.stack");
            if (w == nullptr || bad_.contains("parallel.stack") || b_.plan.parallel.stack.empty()) return;
            const std::string& path = b_.plan.parallel.stack;
            auto cached = ctx_.stacks.find(path);
            if (cached == ctx_.stacks.end()) {
                std::pair<std::shared_ptr<const StackProfile>, Diags> entry;
                const fs::path file = fs::path(path).is_absolute() ? fs::path(path) : ctx_.dir / path;
                try {
                    entry.first = std::make_shared<const StackProfile>(load_stack_profile(file));
                } catch (const StackProfileError& e) {
                    report(entry.second, w->value_site,
                           fmt::format("stack profile '{}' ({}) has {} problem(s), listed with it", path, file.string(),
                                       e.diagnostics().size()));
                    entry.second.insert(entry.second.end(), e.diagnostics().begin(), e.diagnostics().end());
                }
                cached = ctx_.stacks.emplace(path, std::move(entry)).first;
            }
            for (const auto& d : cached->second.second) ctx_.out.push_back(d);
            stack = cached->second.first;
            if (!stack) return;
        }
        b_.plan.stack = stack;
        b_.plan.parallel.stack = stack->source_file;
        b_.plan.hardware = apply_stack(b_.plan.hardware, *stack);
    }

    std::optional<HardwareProfile> read_hardware() {
        std::optional<HardwareProfile> hw;
        if (ctx_.override_profile) {
            hw = ctx_.override_profile;
            b_.plan.cluster.gpu = hw->source_file;
        } else if (const Written* w = lookup("cluster.gpu"); w != nullptr && !bad_.contains("cluster.gpu")) {
            hw = resolve_hardware(b_.plan.cluster.gpu, w->value_site, ctx_);
        }
        if (lookup("cluster.gpus_per_node") == nullptr) {
            if (hw) b_.plan.cluster.gpus_per_node = hw->default_gpus_per_node;
            else bad_.insert("cluster.gpus_per_node");  // unknown without the profile
        }
        // The NICs of the GPU's typical node (DGX datasheets) unless the scenario says otherwise.
        if (hw && lookup("cluster.nics_per_node") == nullptr) b_.plan.cluster.nics_per_node = hw->default_nics_per_node;
        if (hw && lookup("cluster.nic_rate") == nullptr) b_.plan.cluster.nic_rate = hw->default_nic_rate;
        // A GPU whose typical node pairs its cards with NVLink bridges (no NVSwitch exists for it).
        if (hw && hw->nvlink_bridge_pairs && lookup("cluster.intra_node") == nullptr)
            b_.plan.cluster.intra = IntraFabric::nvlink_bridge;
        return hw;
    }

    void resolve_dp() {
        if (!b_.dp_auto) return;
        for (const char* k : {"parallel.tp", "parallel.pp", "parallel.cp", "cluster.nodes", "cluster.gpus_per_node"}) {
            if (bad_.contains(k)) {
                bad_.insert("parallel.dp");
                return;
            }
        }
        const auto& p = b_.plan.parallel;
        const int gpus = b_.plan.num_gpus();
        const int dp = derive_dp(gpus, p.tp, p.pp, p.cp);
        if (dp > 0) {
            b_.plan.parallel.dp = dp;
            return;
        }
        // Blame dp if written (`auto`), else the first degree written, plan's own first.
        Site at = site_for("parallel.dp");
        if (lookup("parallel.dp") == nullptr) {
            for (const char* k : {"parallel.tp", "parallel.pp", "parallel.cp"}) {
                if (const Written* w = lookup(k)) {
                    at = w->key_site;
                    break;
                }
            }
        }
        plan_problem(at, fmt::format("dp: auto needs tp*pp*cp = {}*{}*{} = {} to divide the {} GPUs ({} nodes x {})",
                                     p.tp, p.pp, p.cp, p.tp * p.pp * p.cp, gpus, b_.plan.cluster.nodes,
                                     b_.plan.cluster.gpus_per_node));
        bad_.insert("parallel.dp");
    }

    bool any_bad(std::initializer_list<const char*> keys) const {
        return std::any_of(keys.begin(), keys.end(), [&](const char* k) { return bad_.contains(k); });
    }

    void attach_layout_problems() {
        // Rules whose inputs are unknown (unreadable or missing) cannot be judged: skip them
        // rather than report a consequence of a problem already reported.
        if (any_bad({"parallel.tp", "parallel.pp", "parallel.cp", "parallel.dp", "cluster.nodes",
                     "cluster.gpus_per_node"}))
            bad_.insert({"parallel.dp", "training.global_batch", "parallel.vp"});
        if (any_bad({"training.global_batch", "training.micro_batch"}))
            bad_.insert({"training.global_batch", "parallel.vp"});
        // Rules of other keys that read a degree: with the degree unknown (tp: abc), their
        // verdict would be about the default (tp = 1: "sequence parallelism needs tp > 1"), a
        // consequence of the problem already reported, not a second one.
        if (any_bad({"parallel.tp"})) bad_.insert("parallel.sequence_parallel");
        if (any_bad({"parallel.pp", "parallel.vp"})) bad_.insert({"parallel.recompute_layers", "parallel.vp"});
        if (any_bad({"parallel.pp", "parallel.dp", "cluster.nodes", "cluster.gpus_per_node"}))
            bad_.insert("parallel.sharding");
        if (any_bad({"training.seq_len"})) bad_.insert("parallel.cp");
        for (const auto& problem : check_layout(b_.plan)) {
            if (bad_.contains(problem.key)) continue;  // already reported as unreadable
            plan_problem(site_for(problem.key), problem.message);
        }
    }

    // A problem of this plan's layout: in a `plans` list, merged with the other plans' (the same
    // mistake in a shared section is said once, merge_layout_problems).
    void plan_problem(const Site& at, const std::string& message) {
        layout_problem_ = true;
        if (in_list_) ctx_.plan_problems.push_back({at, message, b_.plan.name});
        else report(ctx_.out, at, message);
    }

    const Layer& defaults_;
    const Layer* own_;
    bool in_list_;
    Context& ctx_;
    PlanBuild b_;
    std::set<std::string> bad_;  // keys whose value is unknown (unreadable or missing)
    bool layout_problem_ = false;
};

// Each plan layout problem once per place and message, naming the plans that have it: none when
// every plan of the list has it (a shared section's mistake, said once as docs/formats.md says).
void merge_layout_problems(Context& ctx, std::size_t plans) {
    std::vector<std::pair<Context::PlanProblem, std::vector<std::string>>> groups;
    for (const auto& p : ctx.plan_problems) {
        auto g = std::find_if(groups.begin(), groups.end(), [&](const auto& x) {
            return x.first.at.file == p.at.file && x.first.at.line == p.at.line && x.first.at.col == p.at.col &&
                   x.first.at.key == p.at.key && x.first.message == p.message;
        });
        if (g == groups.end()) groups.push_back({p, {p.plan}});
        else if (std::find(g->second.begin(), g->second.end(), p.plan) == g->second.end()) g->second.push_back(p.plan);
    }
    for (const auto& [p, names] : groups) {
        std::string quoted;
        for (const auto& n : names) quoted += fmt::format("{}'{}'", quoted.empty() ? "" : ", ", n);
        const std::string prefix = names.size() == plans && plans > 1 ? std::string()
                                   : names.size() == 1                ? fmt::format("in plan {}: ", quoted)
                                                                      : fmt::format("in plans {}: ", quoted);
        report(ctx.out, p.at, prefix + p.message);
    }
}

std::vector<std::string> plan_keys() {
    std::vector<std::string> keys{"name", "model"};
    for (auto s : kSections) keys.emplace_back(s);
    keys.emplace_back("precision");
    return keys;
}

void read_plans(const Field& plans, const Layer& top, std::vector<Plan>& out_plans, Context& ctx) {
    if (!plans.value.IsSequence() || plans.value.size() == 0) {
        report(ctx.out, plans.value_site,
               fmt::format("expected a non-empty list of plans ('- name: ...'), got {}",
                           plans.value.IsSequence() ? "an empty list" : detail::describe(plans.value)));
        return;
    }
    std::map<std::string, int> first_line;  // plan name -> line of its first use
    std::size_t i = 0;
    for (auto it = plans.value.begin(); it != plans.value.end(); ++it, ++i) {
        const YAML::Node item = *it;
        Layer own;
        own.prefix = fmt::format("plans[{}]", i);
        own.site = detail::site_at(ctx.file, item.Mark(), own.prefix);
        if (own.site.line == 0) own.site = detail::Site{ctx.file, plans.key_site.line, plans.key_site.col, own.prefix};
        if (!item.IsMap()) {
            report(ctx.out, own.site,
                   fmt::format("a plan is a map with a name and the keys it overrides, got {}", detail::describe(item)));
            continue;
        }
        std::optional<std::string> name;
        bool name_written = false;
        read_layer(item, own, ctx, plan_keys(), [&](const Field& f) {
            if (f.name != "name") return false;
            name_written = true;
            name = detail::read_string(f.value, f.value_site, ctx.out);
            if (name) {
                auto [first, fresh] = first_line.emplace(*name, f.value_site.line);
                if (!fresh)
                    report(ctx.out, f.value_site,
                           fmt::format("duplicate plan name '{}' (first used at line {})", *name, first->second));
            }
            return true;
        });
        if (!name_written) report(ctx.out, with_key(own.site, own.prefix + ".name"), "required key is missing");
        PlanBuilder builder(top, &own, name.value_or(own.prefix), true, ctx);
        if (auto plan = builder.build()) out_plans.push_back(std::move(*plan));
    }
}

// Diagnostics sorted by their place in the scenario file; a diagnostic located in another file
// (a preset, a profile, a config.json) stays right after the scenario diagnostic that introduced it.
Diags in_file_order(const Diags& diags, const std::string& file) {
    std::vector<Diags> groups;
    for (const auto& d : diags) {
        if (d.file != file && !groups.empty()) groups.back().push_back(d);
        else groups.push_back({d});
    }
    std::stable_sort(groups.begin(), groups.end(), [](const Diags& a, const Diags& b) {
        return std::pair(a.front().line, a.front().col) < std::pair(b.front().line, b.front().col);
    });
    Diags out;
    for (const auto& g : groups) out.insert(out.end(), g.begin(), g.end());
    return out;
}

} // namespace

std::string did_you_mean(const std::string& word, const std::vector<std::string>& candidates) {
    return detail::did_you_mean(word, candidates);
}

std::vector<std::string> check_key_value(const std::string& key, const std::string& text) {
    static const Bindings bindings;
    const auto& keys = scenario_keys();
    const auto spec = std::find_if(keys.begin(), keys.end(), [&](const KeySpec& k) { return k.path == key; });
    Diags out;
    if (spec != keys.end() && is_plan_leaf(*spec)) {
        PlanBuild scratch;
        (void)Bindings::find(bindings.plan, key).apply(scratch, YAML::Node(text), Site{"", 0, 0, key}, *spec, out);
    } else if (spec != keys.end() && is_model_leaf(*spec)) {
        ModelBuild scratch;
        (void)Bindings::find(bindings.model, key).apply(scratch, YAML::Node(text), Site{"", 0, 0, key}, *spec, out);
    } else {
        throw std::logic_error(fmt::format("check_key_value: '{}' is not a plan or model key", key));
    }
    std::vector<std::string> messages;
    for (const auto& d : out) messages.push_back(d.message);
    return messages;
}

Scenario load_scenario_text(const std::string& text, const std::string& name, const LoadOptions& opts) {
    Diags out;
    Context ctx{name, fs::path(name).parent_path(), opts, out, Bindings{}, {}, std::nullopt, {}, {}, {}, {}};
    // A broken --profile is not this scenario's fault: its ProfileError propagates as it is.
    if (opts.profile_override) {
        ctx.override_profile = load_profile(*opts.profile_override);
        ctx.warnings.insert(ctx.warnings.end(), ctx.override_profile->warnings.begin(),
                            ctx.override_profile->warnings.end());
    }
    // Likewise a broken --stack: its StackProfileError propagates.
    if (opts.stack_override) ctx.override_stack = std::make_shared<const StackProfile>(load_stack_profile(*opts.stack_override));

    Scenario sc;
    sc.file = name;
    const std::string stem = fs::path(name).stem().string();
    auto root = detail::parse_yaml(text, name, out);
    if (!root) throw ScenarioError(out);
    if (root->IsNull()) {
        report(out, Site{name, 1, 1, ""}, "the file is empty; a scenario needs at least model, training and cluster");
        throw ScenarioError(out);
    }
    if (!root->IsMap()) {
        report(out, detail::site_at(name, root->Mark(), ""),
               fmt::format("a scenario is a map of keys (title, model, training, ...), got {}", detail::describe(*root)));
        throw ScenarioError(out);
    }

    Layer top;
    top.site = detail::site_at(name, root->Mark(), "");
    std::optional<std::string> title;
    std::optional<Field> plans;
    read_layer(*root, top, ctx, child_names(""), [&](const Field& f) {
        if (f.name == "title") title = detail::read_string(f.value, f.value_site, out);
        else if (f.name == "description") (void)detail::read_scalar(f.value, f.value_site, "a string", out);
        else if (f.name == "plans") plans = f;
        else return false;
        return true;
    });
    sc.title = title.value_or(stem);

    if (plans) {
        read_plans(*plans, top, sc.plans, ctx);
        merge_layout_problems(ctx, plans->value.IsSequence() ? plans->value.size() : 0);
    } else if (auto plan = PlanBuilder(top, nullptr, sc.title, false, ctx).build()) sc.plans.push_back(std::move(*plan));

    if (const auto q = detail::unclosed_quote(text)) {
        // A value that runs on over lines: the likely cause of the problems found, or worth a word.
        report(out.empty() ? ctx.warnings : out, Site{name, q->first, q->second, ""},
               "this quote is not closed on its line: the value runs on over the following lines to a later quote");
    }
    if (!out.empty()) throw ScenarioError(in_file_order(detail::deduplicate(out), name));
    for (const auto& w : in_file_order(detail::deduplicate(ctx.warnings), name)) sc.warnings.push_back(w.format());
    return sc;
}

Scenario load_scenario(const std::filesystem::path& file, const LoadOptions& opts) {
    Diags out;
    auto text = detail::read_text(file, Site{file.string(), 0, 0, ""}, out);
    if (!text) throw ScenarioError(out);
    return load_scenario_text(*text, file.string(), opts);
}

ModelArch load_preset(const std::string& id, const std::filesystem::path& data_dir) {
    const fs::path dir = data_dir / "models";
    const fs::path file = dir / (id + ".yaml");
    Diags out;
    std::error_code ec;
    if (id.empty() || id.find('/') != std::string::npos || !fs::is_regular_file(file, ec)) {
        report(out, Site{file.string(), 0, 0, ""},
               fmt::format("unknown model preset '{}'{} ({})", id, detail::did_you_mean(id, list_ids(dir)),
                           known_ids_note(dir)));
        throw ScenarioError(out);
    }
    auto fields = read_preset_fields(file, id, out);
    if (fields) {
        const Bindings bindings;
        auto model = build_model(*fields, Site{file.string(), 1, 1, ""}, bindings, out);
        if (model && out.empty()) return *model;
    }
    throw ScenarioError(out);
}


} // namespace trainsim::model
