// trainsim-calibrate: the only place that turns exceptions into messages and exit codes:
// 0 ok, 1 internal error (including a CUDA / NCCL failure mid-run), 2 bad input, bad data or
// no device. A result that did not reach standard output (a full disk, /dev/full, a closed
// descriptor) is an error too (2, said on standard error).
#include "trainsim/calibrate/cli/calibrate_cli.hpp"
#include "trainsim/calibrate/core/calibrate_error.hpp"
#include "trainsim/model/core/errors.hpp"
#include "trainsim/model/core/file_io.hpp"

#ifdef TRAINSIM_HAVE_CUDA
#include "trainsim/calibrate/backends/cuda_backend.hpp"
#endif

#include <exception>
#include <iostream>

namespace {

int run(int argc, char** argv) {
    using namespace trainsim::calibrate;
    CudaEntry cuda;
#ifdef TRAINSIM_HAVE_CUDA
    cuda.make = [](const CudaOptions& o) { return make_cuda_backend(o); };
    cuda.device_count = [] { return cuda_device_count(); };
    cuda.environment = [] { return cuda_environment(); };
#endif
    try {
        return run_cli(argc, argv, cuda);
    } catch (const trainsim::model::InputError& e) {
        std::cerr << "trainsim-calibrate: " << e.what() << "\n";
        return kExitBadInput;
    } catch (const NoDeviceError& e) {
        std::cerr << "trainsim-calibrate: " << e.what() << "\n";
        return kExitBadInput;
    } catch (const std::exception& e) {
        std::cerr << "trainsim-calibrate: error: " << e.what() << "\n";
        return kExitInternal;
    }
}

} // namespace

int main(int argc, char** argv) {
    trainsim::model::guard_standard_descriptors();
    const int rc = run(argc, argv);
    if (std::string why; !trainsim::model::standard_streams_ok(why)) {
        std::cerr << "trainsim-calibrate: " << why << "\n" << std::flush;
        return rc != trainsim::calibrate::kExitOk ? rc : trainsim::calibrate::kExitBadInput;
    }
    return rc;
}
