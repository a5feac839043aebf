// libFuzzer target: the sweep-grid reader (model::load_sweep_grid, model/src/input/sweep_grid.cpp)
// and each cell's plan (model::sweep_cell_plan, the scenario loader on the text the cell writes).
// Documented error: SweepGridError (a cell's, at the grid line that wrote the value). A grid that
// loads must give cells whose keys are distinct, and a cell's plan either loads or is refused
// with a diagnostic that names the grid file.
#include "fuzz_support.hpp"

#include "trainsim/model/input/loader.hpp"
#include "trainsim/model/input/sweep_grid.hpp"

#include <cstddef>
#include <cstdint>
#include <set>
#include <string>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    using namespace trainsim;
    static fuzz::InputFile input("grid", ".yaml");
    static const model::LoadOptions opts{fuzz::data_dir(), std::nullopt};
    const auto& file = input.write(data, size);
    model::SweepGrid grid;
    if (!fuzz::read_or_reject<model::SweepGridError>("load_sweep_grid", [&] { grid = model::load_sweep_grid(file); }))
        return 0;
    std::vector<model::SweepCell> cells;
    fuzz::read_or_reject<fuzz::NeverExpected>("sweep_cells", [&] { cells = model::sweep_cells(grid); });
    std::set<std::string> keys;
    for (const auto& c : cells)
        if (!keys.insert(model::sweep_cell_key(grid, c)).second) fuzz::finding("two cells with one key");
    // A few cells' plans (each loads a profile and a model: the first ones are enough).
    for (std::size_t i = 0; i < cells.size() && i < 3; ++i) {
        try {
            (void)model::sweep_cell_plan(grid, cells[i], opts);
        } catch (const model::SweepGridError& e) {
            for (const auto& d : e.diagnostics())
                if (d.file.empty()) fuzz::finding("a cell's diagnostic names no file");
        }
    }
    return 0;
}
