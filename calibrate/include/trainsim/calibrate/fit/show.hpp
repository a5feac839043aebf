// `trainsim-calibrate show PROFILE [--vs OTHER]`: a profile's numbers with their units and
// whether each was measured or taken from a datasheet; with --vs, another profile side by side
// and the relative difference of each value.
#pragma once

#include "trainsim/model/core/hardware_profile.hpp"

#include <nlohmann/json.hpp>

#include <string>

namespace trainsim::calibrate {

[[nodiscard]] std::string show_profile(const model::HardwareProfile& p, const model::HardwareProfile* vs = nullptr);
[[nodiscard]] nlohmann::json show_profile_json(const model::HardwareProfile& p,
                                               const model::HardwareProfile* vs = nullptr);

} // namespace trainsim::calibrate
