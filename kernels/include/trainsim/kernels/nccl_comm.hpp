// NCCL collectives, one process per GPU. The NCCL id is made by rank 0 (make_nccl_id) and
// handed to the other ranks by the caller's bootstrap (MPI broadcast, or a file in a shared
// directory: trainsim/calibrate/measure/rendezvous.hpp); this layer only sees its 128 bytes.
#pragma once

#include "trainsim/kernels/gpu_device.hpp"

#include <array>
#include <cstddef>
#include <memory>
#include <vector>

namespace trainsim::kernels {

// ncclUniqueId's bytes (NCCL_UNIQUE_ID_BYTES = 128).
using NcclId = std::array<unsigned char, 128>;

// Rank 0 only. Throws KernelError.
[[nodiscard]] NcclId make_nccl_id();

class NcclComm {
public:
    // ncclCommInitRank: returns once all `nranks` ranks have joined (a barrier).
    NcclComm(GpuDevice& device, const NcclId& id, int nranks, int rank);
    ~NcclComm();
    NcclComm(const NcclComm&) = delete;
    NcclComm& operator=(const NcclComm&) = delete;

    [[nodiscard]] int rank() const;
    [[nodiscard]] int size() const;
    // ncclCommSplit, collective over this communicator: ranks with the same color >= 0 form a new
    // communicator (ordered by key); color < 0 returns nullptr (not a member).
    [[nodiscard]] std::unique_ptr<NcclComm> split(int color, int key);
    // Element-wise maximum over the ranks, in place (the slowest rank decides a collective's time).
    void max_over_ranks(std::vector<double>& values);

    struct Impl;
    [[nodiscard]] Impl& impl() { return *impl_; }

private:
    NcclComm(GpuDevice& device, std::unique_ptr<Impl> impl);
    GpuDevice& device_;
    std::unique_ptr<Impl> impl_;
};

enum class CollectiveKind { all_reduce, all_gather, reduce_scatter, all_to_all, send_recv };
[[nodiscard]] const char* to_string(CollectiveKind k);

// One collective of `bytes` in the nccl-tests convention ("size" column): all_reduce and
// all_to_all: the per-rank buffer; all_gather: the gathered output (n x each rank's part);
// reduce_scatter: the input (n x each rank's result); send_recv: what each rank sends (to
// rank+1, receiving from rank-1, as nccl-tests sendrecv_perf). BF16 elements, sum.
// Precondition: bytes is a positive multiple of 2 x size() (KernelUnsupported otherwise).
class Collective {
public:
    Collective(GpuDevice& device, NcclComm& comm, CollectiveKind kind, std::size_t bytes);
    ~Collective();
    Collective(const Collective&) = delete;
    Collective& operator=(const Collective&) = delete;

    void run();
    [[nodiscard]] static std::size_t bytes_needed(CollectiveKind kind, std::size_t bytes, int ranks);

    struct Impl;

private:
    friend class OverlapGemm;  // runs the collective on its own communication stream
    std::unique_ptr<Impl> impl_;
};

class OverlapGemm;

} // namespace trainsim::kernels
