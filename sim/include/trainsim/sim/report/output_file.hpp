// Result files (traces, HTML reports, error models): the checked, atomic output writer shared
// with trainsim-calibrate lives in model/ (trainsim/model/core/file_io.hpp, which says what a
// path that names a regular file, a device, a FIFO or a symlink gets); the simulator's code
// names it from here.
#pragma once

#include "trainsim/model/core/file_io.hpp"

namespace trainsim::sim {

using model::OutputBatch;
using model::OutputError;
using model::write_file_atomically;

} // namespace trainsim::sim
