// The one strict loader: the only code that reads scenario, preset, profile and HF config files.
// It collects every problem with file:line:col and key path and throws them together.
#pragma once

#include "trainsim/model/errors.hpp"
#include "trainsim/model/hardware_profile.hpp"
#include "trainsim/model/scenario.hpp"

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
};

// Throws ScenarioError (all problems) or ProfileError.
[[nodiscard]] Scenario load_scenario(const std::filesystem::path& file, const LoadOptions& opts);
// Same, from text held in memory (tests); `name` is used as the file name in diagnostics.
[[nodiscard]] Scenario load_scenario_text(const std::string& text, const std::string& name,
                                          const LoadOptions& opts);

// A profile by path, or by id looked up in data_dir/hardware/<id>.yaml.
[[nodiscard]] HardwareProfile load_profile(const std::filesystem::path& file);
[[nodiscard]] HardwareProfile resolve_profile(const std::string& id_or_path,
                                              const std::filesystem::path& relative_to,
                                              const std::filesystem::path& data_dir);
// The file resolve_profile reads (it need not exist): id_or_path is a path when it contains a '/'
// or ends in .yaml / .yml (relative paths are taken from relative_to), else an id looked up as
// data_dir/hardware/<id>.yaml.
[[nodiscard]] std::filesystem::path profile_path(const std::string& id_or_path,
                                                 const std::filesystem::path& relative_to,
                                                 const std::filesystem::path& data_dir);
// Writes a profile in the same format (used by trainsim-calibrate fit). Never overwrites unless
// force; throws ProfileError naming the file otherwise.
void write_profile(const HardwareProfile& profile, const std::filesystem::path& file, bool force);

// A model preset by id (data_dir/models/<id>.yaml) and a Hugging Face config.json.
[[nodiscard]] ModelArch load_preset(const std::string& id, const std::filesystem::path& data_dir);
[[nodiscard]] ModelArch load_hf_config(const std::filesystem::path& file);
// Ids (file stems) of the *.yaml files in dir, sorted; empty when dir does not exist.
[[nodiscard]] std::vector<std::string> list_ids(const std::filesystem::path& dir);

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
