// The CUDA backend (library trainsim_calibrate_cuda, built only when CUDA is found): runs
// descriptors through trainsim::kernels on one GPU per process. With several processes, rank 0
// runs single-GPU operations and writes the samples, the first group_size ranks run each
// collective, and per-sample times are reduced (max) across the group.
#pragma once

#include "trainsim/calibrate/measure/backend.hpp"

#include <nlohmann/json.hpp>

#include <filesystem>
#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace trainsim::calibrate {

struct CudaOptions {
    int rank = 0;
    int world = 1;
    int device = -1;  // GPU ordinal; -1: the local rank (modulo the visible GPUs)
    // This rank's index among the ranks of its host (the launcher's OMPI_COMM_WORLD_LOCAL_RANK,
    // SLURM_LOCALID, ...; from `hosts` under MPI); -1: unknown, the global rank is used (a
    // single-node launch, where the two agree). Cyclic placement (mpirun --map-by node) makes the
    // global rank modulo the GPUs pick one GPU twice on a host (NCCL "duplicate GPU").
    int local_rank = -1;
    std::filesystem::path rendezvous_dir;  // bootstrap directory (world > 1)
    std::string session;                   // rendezvous session name (world > 1)
    // MPI bootstrap (set by `measure` when started by mpirun; replaces the file rendezvous):
    // share_id runs on every rank and returns rank 0's id (it calls make on rank 0 only, then
    // MPI_Bcast), hosts lists every rank's host, and max_over_group reduces per-sample times over
    // ranks [0, size) (MPI_Allreduce). Empty: file rendezvous and NCCL's own max.
    std::function<std::vector<unsigned char>(const std::function<std::vector<unsigned char>()>& make)> share_id;
    std::vector<std::string> hosts;
    std::function<void(int size, std::vector<double>& times)> max_over_group;
    // Every wait on the GPU gives up after this long, aborting the NCCL communicators (a dead or
    // stuck peer; `measure --gpu-timeout`); default kernels::GpuDevice::kDefaultWaitTimeoutSeconds.
    double wait_timeout_s = 600.0;
};

// Throws NoDeviceError ("no CUDA device: ...") when no GPU is visible, KernelError otherwise.
[[nodiscard]] std::unique_ptr<Backend> make_cuda_backend(const CudaOptions& opts);
// Usable GPUs (0 without a device or driver; never throws).
[[nodiscard]] int cuda_device_count();
// What the process finds at run time, for `trainsim-calibrate env`: devices (or why none), CUDA
// runtime and driver, cuBLASLt, and the NCCL library opened (or every place it was looked for).
[[nodiscard]] nlohmann::json cuda_environment();

} // namespace trainsim::calibrate
