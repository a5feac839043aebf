// The one strict loader: the only code that reads scenario, preset, profile and HF config files.
// It collects every problem with file:line:col and key path and throws them together.
#pragma once

#include "trainsim/model/core/errors.hpp"
#include "trainsim/model/core/hardware_profile.hpp"
#include "trainsim/model/core/scenario.hpp"
#include "trainsim/model/input/profile_io.hpp"

#include <filesystem>
#include <optional>
#include <string>
#include <vector>

namespace trainsim::model {

struct LoadOptions {
    // Root holding models/ (presets) and hardware/ (profiles).
    std::filesystem::path data_dir;
    // When set, replaces every plan's cluster.gpu profile (trainsim simulate --profile).
    std::optional<std::filesystem::path> profile_override;
    // When set, the stack profile every plan runs with, in place of its parallel.stack
    // (trainsim simulate / compare / report / plan --stack).
    std::optional<std::filesystem::path> stack_override;
};

// Throws ScenarioError (all problems) or ProfileError.
[[nodiscard]] Scenario load_scenario(const std::filesystem::path& file, const LoadOptions& opts);
// Same, from text held in memory (tests); `name` is used as the file name in diagnostics.
[[nodiscard]] Scenario load_scenario_text(const std::string& text, const std::string& name,
                                          const LoadOptions& opts);

// A model preset by id (data_dir/models/<id>.yaml) and a Hugging Face config.json.
[[nodiscard]] ModelArch load_preset(const std::string& id, const std::filesystem::path& data_dir);
[[nodiscard]] ModelArch load_hf_config(const std::filesystem::path& file);

// The one table of scenario keys: drives unknown-key rejection, defaults and `trainsim keys`.
struct KeySpec {
    std::string path;         // "parallel.tp"
    std::string type;         // int | bool | count | fraction | bytes | bandwidth | enum | string | ...
    std::string unit;         // "" when unitless
    std::string default_value;
    std::string description;
    // A scenario cannot omit it (for model.* keys: an inline model cannot omit it).
    bool required = false;
    // For type "enum": the accepted spellings, in enumerator order.
    std::vector<std::string> allowed;
    // For numbers (int, count, number, bandwidth, duration): the physical range a written value
    // must lie in, as values of the key's own type ("1 Gbit/s", "10 Tbit/s"; empty: that side is
    // open), and where the bounds come from. A value outside is an input error at its line.
    std::string range_min, range_max, range_basis;
};
[[nodiscard]] const std::vector<KeySpec>& scenario_keys();

// The problems of `text` written as the value of the plan or model key `key` ("cluster.nic_rate",
// "1e-9 Gbit/s"), read exactly as a scenario's value would be (type, unit, physical range);
// empty when it is fine. For command-line options that stand for a scenario key.
[[nodiscard]] std::vector<std::string> check_key_value(const std::string& key, const std::string& text);

// " (did you mean 'x'?)" for the candidate within typo distance of `word`, else empty: the hint
// every reader gives, for the command line too.
[[nodiscard]] std::string did_you_mean(const std::string& word, const std::vector<std::string>& candidates);

} // namespace trainsim::model
