// Typed errors of trainsim-calibrate. Only main() turns them into messages and exit codes
// (2 for all of these: bad input or no device).
#pragma once

#include "trainsim/model/core/errors.hpp"

#include <stdexcept>
#include <string>
#include <vector>

namespace trainsim::calibrate {

// Bad calibration data: every problem names the samples file, the line and the sample's key
// (empty file, truncated line, malformed or impossible values, throughput above the peak).
class SampleError : public model::InputError {
public:
    explicit SampleError(std::vector<model::Diagnostic> diags) : InputError("calibration data", std::move(diags)) {}
};

// A command that cannot be carried out as asked (measuring into a directory that already has
// samples without --resume, resuming a run of another plan, an unknown plan name, ...).
class CalibrationInputError : public model::InputError {
public:
    explicit CalibrationInputError(std::vector<model::Diagnostic> diags)
        : InputError("calibration", std::move(diags)) {}
    CalibrationInputError(const std::string& where, const std::string& message)
        : InputError("calibration", {model::Diagnostic{where, 0, 0, "", message}}) {}
};

// The backend asked for has no device to run on ("no CUDA device", or built without CUDA).
class NoDeviceError : public std::runtime_error {
public:
    using std::runtime_error::runtime_error;
};

// One descriptor cannot run on this backend / device (FP8 before sm_89, not enough memory, no
// cuBLASLt algorithm). Not a failure: the sample is recorded as "unsupported" with the reason.
class OpUnsupported : public std::runtime_error {
public:
    using std::runtime_error::runtime_error;
};

} // namespace trainsim::calibrate
