// Subcommands of trainsim-calibrate that live beside calibrate_cli.cpp (internal to cli/).
#pragma once

#include <CLI/CLI.hpp>

#include <filesystem>
#include <optional>
#include <string>

namespace trainsim::calibrate::detail {

// `import run`: a run of the team's own trainer into a row of the published-measurements CSV.
struct RunImportArgs {
    std::string format, log, scenario, plan, id, out, data_dir;
    std::optional<int> warmup;
    bool json = false;
};
// Adds `run` under `import` (CLI11 keeps the options in `a`).
CLI::App* add_import_run_command(CLI::App& import_cmd, RunImportArgs& a);
// data: the folder with models/ and hardware/ the scenario loader reads.
int run_import_run(const RunImportArgs& a, const std::filesystem::path& data);

} // namespace trainsim::calibrate::detail
