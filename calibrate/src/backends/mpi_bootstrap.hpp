// The MPI bootstrap of a multi-process `measure` (internal; compiled only when CMake found MPI,
// which defines TRAINSIM_HAVE_MPI). Under mpirun every rank calls MPI_Init through MpiSession;
// rank 0 makes the NCCL unique id and MPI_Bcast's it, host names are MPI_Allgather'ed, per-sample
// times are reduced with MPI_Allreduce (max over the group), and the CPU backend's collectives
// run between the processes with MPI (the CPU stand-in for NCCL). No shared file system is needed;
// launches without MPI keep the file rendezvous (rendezvous.hpp). No MPI header leaks from here.
#pragma once

#include "cpu_collectives.hpp"

#include <memory>
#include <string>
#include <vector>

namespace trainsim::calibrate::detail {

// Whether an MPI launcher started this process: Open MPI's mpirun (OMPI_COMM_WORLD_SIZE), MPICH /
// Hydra (PMI_SIZE) or a PMIx launcher (PMIX_RANK, e.g. srun --mpi=pmix). Slurm's SLURM_PROCID
// alone is not enough: plain srun without PMI cannot bootstrap MPI.
[[nodiscard]] bool launched_by_mpi();

// MPI_Init_thread (MPI_THREAD_SERIALIZED: the overlap measure's background collective runs on its
// own thread) on construction, MPI_Finalize on destruction; if MPI was already initialised, the
// session neither initialises nor finalises it. While an exception unwinds past it, MPI_Finalize
// is skipped: the other ranks may be blocked in a collective, and the launcher tears the job down
// when a rank exits without finalising. MPI failures throw std::runtime_error ("MPI_...: reason").
class MpiSession {
public:
    MpiSession();
    ~MpiSession();
    MpiSession(const MpiSession&) = delete;
    MpiSession& operator=(const MpiSession&) = delete;

    [[nodiscard]] int rank() const;
    [[nodiscard]] int world() const;
    // Host name of every rank, by rank (MPI_Allgather).
    [[nodiscard]] std::vector<std::string> hosts() const;
    // Rank 0's `value` on every rank (MPI_Bcast of its length, then its bytes).
    [[nodiscard]] std::string broadcast(const std::string& value) const;
    void barrier() const;
    // Element-wise max of `times` over ranks [0, size); called by exactly those ranks.
    void max_over_group(int size, std::vector<double>& times);
    // This rank's part of the collectives among ranks [0, size); called by exactly those ranks.
    [[nodiscard]] std::unique_ptr<CollectiveGroup> group(int size);
    // The CPU backend's view of this session (holds a pointer to it: keep the session alive).
    [[nodiscard]] ProcessRanks process_ranks();
    // "Open MPI v4.1.4, ..." (MPI_Get_library_version, first line).
    [[nodiscard]] std::string library() const;

private:
    struct Impl;
    std::unique_ptr<Impl> impl_;
};

} // namespace trainsim::calibrate::detail
