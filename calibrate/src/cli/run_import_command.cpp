// `trainsim-calibrate import run`: a run of the team's own trainer (its log, and the scenario that
// describes it) appended as one row to a published-measurements CSV (docs/calibration.md
// "Importing a run of your own trainer").
#include "calibrate_commands.hpp"

#include "trainsim/calibrate/cli/calibrate_cli.hpp"
#include "trainsim/calibrate/core/calibrate_error.hpp"
#include "trainsim/calibrate/import/run_import.hpp"
#include "trainsim/model/input/loader.hpp"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <iostream>

namespace trainsim::calibrate::detail {

namespace fs = std::filesystem;

namespace {

// Every problem, each saying its reason first ("truncated: ..."), as one input error (exit 2).
void refuse_if(const std::vector<RunProblem>& problems) {
    if (problems.empty()) return;
    std::vector<model::Diagnostic> diags;
    for (const auto& p : problems) {
        model::Diagnostic d = p.where;
        d.message = fmt::format("{}: {}", to_string(p.reason), d.message);
        diags.push_back(std::move(d));
    }
    throw CalibrationInputError(std::move(diags));
}

} // namespace

CLI::App* add_import_run_command(CLI::App& import_cmd, RunImportArgs& a) {
    auto* cmd = import_cmd.add_subcommand(
        "run", "append a run of your own trainer (its log + the scenario it ran) to a published-measurements CSV");
    cmd->add_option("--format", a.format,
                    "the trainer that printed the log: megatron | torchtitan | hf-trainer | "
                    "deepspeed")
        ->required()
        ->check(CLI::IsMember({"megatron", "torchtitan", "hf-trainer", "deepspeed"}));
    cmd->add_option("--log", a.log, "the trainer's log (hf-trainer: trainer_state.json or all_results.json)")
        ->required();
    cmd->add_option("--scenario", a.scenario, "scenario YAML describing the run (model, GPUs, layout, framework)")
        ->required();
    cmd->add_option("--plan", a.plan, "the scenario's plan the run used (needed when it has several)");
    cmd->add_option("--id", a.id, "row id (default: the log file's stem); an id already in the CSV is refused");
    cmd->add_option("--warmup", a.warmup, "logged step records to drop as warm-up (default: the first max(2, 10%))")
        ->check(CLI::Range(0, 1 << 20));  // a readable range (NonNegativeNumber's end is DBL_MAX)
    cmd->add_option("--out", a.out, "the CSV to append the row to (created with the header when absent)")->required();
    cmd->add_option("--data-dir", a.data_dir,
                    "folder with models/ and hardware/ (default: $TRAINSIM_DATA_DIR or "
                    "scenarios/)");
    cmd->add_flag("--json", a.json, "print the row and how it was measured as JSON");
    return cmd;
}

int run_import_run(const RunImportArgs& a, const fs::path& data) {
    const auto format = trainer_format_of(a.format);
    if (!format) throw CalibrationInputError("--format", "unknown trainer format '" + a.format + "'");
    // The loader reads with a stream: a FIFO or a device given as the scenario would block it.
    std::error_code ec;
    if (!fs::is_regular_file(a.scenario, ec))
        throw CalibrationInputError(a.scenario, fs::exists(a.scenario, ec) ? "is not a regular file (a folder, FIFO "
                                                                             "or device): pass the scenario YAML"
                                                                           : "no such file");
    if (a.id.find_first_of("\r\n") != std::string::npos) throw CalibrationInputError("--id", "a row id is one line");
    model::LoadOptions lo;
    lo.data_dir = data;
    const model::Scenario scenario = model::load_scenario(a.scenario, lo);
    for (const auto& w : scenario.warnings) std::cerr << "trainsim-calibrate: warning: " << w << "\n";
    const model::Plan& plan = pick_plan(scenario, a.plan);

    const RunLog log = parse_run_log(read_run_file(a.log), a.log, *format);
    refuse_if(log.problems);
    const RunMeasurement m = measure_run(log, plan, a.warmup);
    refuse_if(m.problems);

    const std::string id = a.id.empty() ? fs::path(a.log).stem().string() : a.id;
    const ValidationRowCells row = validation_row(plan, log, m, id);
    append_validation_row(a.out, row);

    if (a.json) {
        nlohmann::json j;
        j["out"] = a.out;
        j["row"] = row;
        j["run"] = to_json(log, m);
        std::cout << j.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) << "\n";
        return kExitOk;
    }
    std::cout << fmt::format("{}: {} ({}), plan '{}'\n  {}\n  {}\n", a.log, log.printer, to_string(log.format),
                             plan.name, m.derivation, m.notes)
              << fmt::format("Appended row '{}' to {}: {} tokens/s/GPU\n", id, a.out, row.at("tokens_per_s_per_gpu"));
    return kExitOk;
}

} // namespace trainsim::calibrate::detail
