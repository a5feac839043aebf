// Stack-profile files (docs/formats.md "Stack profiles"): read strictly (every problem with
// file:line:col and key path, thrown together as StackProfileError) and rendered so that they read
// back exactly. `trainsim fit-stack` writes them; `--stack FILE` and `parallel.stack: FILE` read them.
#pragma once

#include "trainsim/model/core/errors.hpp"
#include "trainsim/model/core/stack_profile.hpp"

#include <filesystem>
#include <string>

namespace trainsim::model {

[[nodiscard]] StackProfile load_stack_profile(const std::filesystem::path& file);
// Same, from text held in memory (tests); `name` is used as the file name in diagnostics.
[[nodiscard]] StackProfile load_stack_profile_text(const std::string& text, const std::string& name);
// The YAML text of a stack profile (every double written so that it parses back exactly).
[[nodiscard]] std::string render_stack_profile(const StackProfile& stack);

} // namespace trainsim::model
