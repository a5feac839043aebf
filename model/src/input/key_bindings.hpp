// How each scenario key is read and stored: one typed binding per key of the table
// (scenario_keys.cpp), applied by the loader to a written value or to the table's default.
// Internal to model/src/input.
#pragma once

#include "trainsim/model/core/scenario.hpp"
#include "trainsim/model/input/loader.hpp"

#include "input_support.hpp"

#include <fmt/format.h>
#include <yaml-cpp/yaml.h>

#include <array>
#include <functional>
#include <stdexcept>
#include <string_view>
#include <vector>

namespace trainsim::model::detail {

// A plan under construction: the Plan plus what `auto` and derived defaults need to know.
struct PlanBuild {
    Plan plan;
    bool dp_auto = false;
};

// A model under construction.
struct ModelBuild {
    ModelArch model;
    bool kv_heads_written = false;
    bool head_dim_written = false;
};

template <class Target> struct Binding {
    std::string_view path;
    std::string_view type;  // must equal the table's type for `path`
    std::function<bool(Target&, const YAML::Node&, const Site&, const KeySpec&, Diags&)> apply;
};

// Every plan key's and every model key's binding (each checked against the table by the loader).
[[nodiscard]] std::vector<Binding<PlanBuild>> make_plan_bindings();
[[nodiscard]] std::vector<Binding<ModelBuild>> make_model_bindings();

// The sections of a plan (the top-level keys that hold plan keys).
inline constexpr std::array<std::string_view, 6> kSections{"training", "parallel", "cluster",
                                                           "pricing",  "run",      "energy"};

// The key table seen from the loader (scenario_keys.cpp): a key's spec, the keys under a
// section, a "did you mean" for an unknown one, and which keys a plan or a model reads.
[[nodiscard]] const KeySpec* find_spec(std::string_view path);
[[nodiscard]] std::vector<std::string> child_names(std::string_view parent);
[[nodiscard]] std::string suggest_key(std::string_view parent, std::string_view name);
[[nodiscard]] bool is_section(std::string_view name);
[[nodiscard]] bool is_plan_leaf(const KeySpec& k);
[[nodiscard]] bool is_model_leaf(const KeySpec& k);
[[nodiscard]] bool has_literal_default(const KeySpec& k);

// The bindings of a load, checked against the table: every table key has exactly one binding of
// its type and every binding a table key. A mismatch is a programming error, not bad input.
struct Bindings {
    std::vector<Binding<PlanBuild>> plan = make_plan_bindings();
    std::vector<Binding<ModelBuild>> model = make_model_bindings();

    Bindings() {
        check(plan, is_plan_leaf);
        check(model, is_model_leaf);
    }

    template <class T> static const Binding<T>& find(const std::vector<Binding<T>>& list, std::string_view path) {
        for (const auto& b : list)
            if (b.path == path) return b;
        throw std::logic_error(fmt::format("loader: no binding for scenario key '{}'", path));
    }

private:
    template <class T, class Pred> static void check(const std::vector<Binding<T>>& list, Pred belongs) {
        std::size_t keys = 0;
        for (const auto& k : scenario_keys()) {
            if (!belongs(k)) continue;
            ++keys;
            const auto& b = find(list, k.path);
            if (b.type != k.type)
                throw std::logic_error(fmt::format("loader: binding of '{}' has type {} but the table says {}",
                                                   k.path, b.type, k.type));
            // Each bound of a range is itself a value the binding accepts.
            for (const std::string* bound : {&k.range_min, &k.range_max}) {
                T scratch{};
                Diags d;
                if (!bound->empty() && !b.apply(scratch, YAML::Node(*bound), Site{"scenario_keys.cpp", 0, 0, k.path}, k, d))
                    throw std::logic_error(fmt::format("scenario_keys: range bound '{}' of '{}' is refused: {}", *bound,
                                                       k.path, d.empty() ? std::string() : d.front().message));
            }
        }
        if (keys != list.size())
            throw std::logic_error("loader: a binding names a key that is not in scenario_keys()");
    }
};

// Applies a table default through the same binding a written value goes through.
template <class T> void apply_default(const Binding<T>& b, T& target, const KeySpec& spec) {
    Diags scratch;
    YAML::Node node;
    try {
        node = YAML::Load(spec.default_value);
    } catch (const YAML::Exception&) {
        throw std::logic_error(fmt::format("scenario_keys: default of '{}' is not YAML", spec.path));
    }
    if (!b.apply(target, node, Site{"scenario_keys.cpp", 0, 0, spec.path}, spec, scratch))
        throw std::logic_error(fmt::format("scenario_keys: default '{}' of '{}' does not parse: {}",
                                           spec.default_value, spec.path,
                                           scratch.empty() ? std::string() : scratch.front().message));
}


} // namespace trainsim::model::detail
