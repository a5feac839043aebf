// The CUDA backend (library trainsim_calibrate_cuda, built only when CUDA is found): runs
// descriptors through trainsim::kernels on one GPU per process. With several processes, rank 0
// runs single-GPU operations and writes the samples, the first group_size ranks run each
// collective, and per-sample times are reduced (max) across the group.
#pragma once

#include "trainsim/calibrate/backend.hpp"

#include <filesystem>
#include <memory>
#include <string>
#include <vector>

namespace trainsim::calibrate {

struct CudaOptions {
    int rank = 0;
    int world = 1;
    int device = -1;  // GPU ordinal; -1: local rank (rank modulo the visible GPUs)
    std::filesystem::path rendezvous_dir;  // bootstrap directory (world > 1)
    std::string session;                   // rendezvous session name (world > 1)
};

// Throws NoDeviceError ("no CUDA device: ...") when no GPU is visible, KernelError otherwise.
[[nodiscard]] std::unique_ptr<Backend> make_cuda_backend(const CudaOptions& opts);
// Usable GPUs (0 without a device or driver; never throws).
[[nodiscard]] int cuda_device_count();

} // namespace trainsim::calibrate
