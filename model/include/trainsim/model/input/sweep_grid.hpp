// Sweep grids (`trainsim sweep GRID.yaml`, docs/plan-search.md "Sweeps"): axes of models, GPU
// profiles, GPU counts, precisions, token counts, frameworks, stack profiles and prices, whose
// product is a table of plan searches. Read strictly (unknown keys, wrong types, empty axes: each
// with file:line:col and key); every cell becomes a plan through the one scenario loader, and a
// problem the loader finds in a cell is reported at the grid line that wrote the value.
#pragma once

#include "trainsim/model/core/errors.hpp"
#include "trainsim/model/core/scenario.hpp"
#include "trainsim/model/input/loader.hpp"

#include <cstddef>
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace trainsim::model {

class SweepGridError : public InputError {
public:
    explicit SweepGridError(std::vector<Diagnostic> diags) : InputError("sweep grid", std::move(diags)) {}
};

// One value of an axis as written, with its place.
struct SweepValue {
    std::string value; // as written (a path made absolute against the grid's folder where it is one)
    std::string label; // as written, for the rows
    int line = 0, col = 0;
};

// A price: a scenario pricing block (its keys checked by the loader), named, for every GPU or one.
struct SweepPrice {
    std::string name;
    std::string gpu;  // empty: every GPU of the grid
    std::string yaml; // the pricing block without name and gpu, as a YAML flow map
    int line = 0, col = 0;
    std::map<std::string, std::pair<int, int>> key_sites; // "rate" -> (line, col)
};

struct SweepGrid {
    std::string file;
    std::string title;
    std::vector<SweepValue> models, gpus, precisions, tokens, frameworks, stacks;
    std::vector<int> counts; // ascending, distinct
    std::vector<SweepPrice> prices;
    // Scenario sections passed to every cell (flow maps; empty: the key table's defaults), and
    // where their keys were written.
    std::string training_yaml, run_yaml;
    std::map<std::string, std::pair<int, int>> key_sites; // "training.seq_len" -> (line, col)
    // constraints:
    std::optional<double> deadline_days, budget;
    std::string days = "expected";   // expected | steady
    std::string memory_headroom;     // a fraction ("5%"); empty: the plan search's default
    std::string text;                // the file's text (its fingerprint keys resumed outputs)
};

// One cell of the grid but for its GPU count (a plan search over every count of the grid): indices
// into the axes; price is npos without prices (no money in the rows).
struct SweepCell {
    std::size_t model = 0, gpu = 0, precision = 0, tokens = 0, framework = 0, stack = 0;
    std::size_t price = static_cast<std::size_t>(-1);
};

[[nodiscard]] SweepGrid load_sweep_grid(const std::filesystem::path& file);
[[nodiscard]] SweepGrid load_sweep_grid_text(const std::string& text, const std::string& name,
                                             const std::filesystem::path& base_dir = {});

// Every cell, in a fixed order: models, then GPUs, precisions, tokens, frameworks, stacks, and the
// prices that apply to the GPU (those without a gpu, and the GPU's own).
[[nodiscard]] std::vector<SweepCell> sweep_cells(const SweepGrid& grid);

// "llama2-7b|h100-sxm|bf16|1T|-|-|on-demand": the cell's labels, for the rows and for --resume.
[[nodiscard]] std::string sweep_cell_key(const SweepGrid& grid, const SweepCell& cell);

// The cell's plan on one node (the search sets the GPU count) through the scenario loader; without a
// tokens axis, the compute-optimal count for the model (kSweepTokensPerParam per parameter). A
// problem is thrown as a SweepGridError at the grid line that wrote the offending value.
inline constexpr double kSweepTokensPerParam = 20.0; // Hoffmann et al. 2022, Table 3
[[nodiscard]] Plan sweep_cell_plan(const SweepGrid& grid, const SweepCell& cell, const LoadOptions& opts);

} // namespace trainsim::model
