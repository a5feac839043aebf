// The trainsim-calibrate command line: measure, fit, show. main() maps exceptions to exit codes.
#pragma once

#include "trainsim/calibrate/backends/cuda_backend.hpp"
#include "trainsim/calibrate/measure/backend.hpp"

#include <functional>
#include <memory>

namespace trainsim::calibrate {

inline constexpr int kExitOk = 0;
inline constexpr int kExitInternal = 1;
inline constexpr int kExitBadInput = 2;  // bad input, bad data, no device

// The CUDA backend lives in its own library (only built with CUDA) so that programs that do not
// measure GPUs — the tests among them — do not load the CUDA libraries; main() hands it in.
struct CudaEntry {
    std::function<std::unique_ptr<Backend>(const CudaOptions&)> make;  // empty: built without CUDA
    std::function<int()> device_count;
    std::function<nlohmann::json()> environment; // cuda_environment(): what `env` prints
};

// Parses argv and runs the command. Throws model::InputError (bad input, bad data),
// NoDeviceError, or backend errors; returns the exit code otherwise.
int run_cli(int argc, char** argv, const CudaEntry& cuda);

} // namespace trainsim::calibrate
