// The CPU backend: the whole calibration pipeline on any machine. GEMMs are Eigen single-
// precision products on one thread (labelled fp32: the CPU has no bf16 / fp8 tensor cores and
// nothing pretends otherwise), memory-bound kernels are plain loops over fp32 arrays, attention
// is unfused (Eigen GEMMs + softmax), and collectives run between std::threads over shared
// memory with the ring / pairwise algorithms NCCL uses. It measures this host, not a GPU: its
// numbers are for testing the pipeline end to end. Under mpirun (a build with MPI) its ranks are
// the MPI processes instead and MPI carries the collectives (calibrate/src/backends/mpi_bootstrap.hpp).
#pragma once

#include "trainsim/calibrate/measure/backend.hpp"

#include <memory>

namespace trainsim::calibrate {

// max_threads: the largest collective group (threads) it will run.
[[nodiscard]] std::unique_ptr<Backend> make_cpu_backend(int max_threads);

} // namespace trainsim::calibrate
