// `trainsim sweep` over MPI ranks (docs/plan-search.md "Sweeps over MPI ranks"). Internal to
// sim/src/cli; no MPI header leaks from here. Built with MPI when CMake found it (TRAINSIM_HAVE_MPI);
// without it, SweepWorld cannot be made and a launch by mpirun with more than one rank is refused
// (every rank would run the whole grid and write the same file).
//
// Protocol (MPI_COMM_WORLD, only the main thread of a process calls MPI: MPI_THREAD_FUNNELED):
// rank 0 reads the grid and the partial output, and broadcasts where the sweep starts; every other
// rank builds the same cells and tasks from the same grid, asks rank 0 for as many tasks as it has
// worker threads, runs them, sends each one's rows back (and so asks for the next), until rank 0
// has answered "stop" to each of its threads. Rank 0 hands tasks out in SweepQueue's order, runs
// tasks itself on its own worker threads, and appends each task's rows to the output in the grid's
// order as soon as every earlier task is in: the file is the one a single process writes, byte for
// byte, and a killed sweep resumes from it as from a single process's. Within a process the tasks
// run on std::thread workers; the plan search keeps no mutable global state (design.md: no
// singletons; its caches are per search or thread_local), so concurrent searches are safe.
#pragma once

#include <cstddef>
#include <functional>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

namespace trainsim::sim::cli {

// Whether this trainsim was built with MPI.
[[nodiscard]] bool sweep_built_with_mpi();

// Whether an MPI launcher started this process: Open MPI's mpirun (OMPI_COMM_WORLD_SIZE), MPICH /
// Hydra and srun --mpi=pmi2 (PMI_SIZE) or a PMIx launcher such as srun --mpi=pmix (PMIX_RANK).
// Slurm's SLURM_* variables alone are not: a batch script's own step has them too.
[[nodiscard]] bool launched_by_mpi(const std::function<const char*(const char*)>& env);

// The number of ranks the launcher's environment states (OMPI_COMM_WORLD_SIZE, else PMI_SIZE); 1
// when it states none (a PMIx launch states its size only through MPI).
[[nodiscard]] int launcher_world_size(const std::function<const char*(const char*)>& env);

// What one task returns: its cells' text, one string per cell, in the cells' order.
using SweepTaskRows = std::vector<std::string>;

// A task that failed on some rank, as rank 0 reports it: `input` when the rank's error was bad
// input (model::InputError: exit 2), else an internal error (exit 1).
struct SweepRankFailure {
    int rank = 0;
    std::string host;
    bool input = false;
    std::string message;
};
class SweepRankFailed : public std::runtime_error {
public:
    explicit SweepRankFailed(SweepRankFailure f)
        : std::runtime_error("rank " + std::to_string(f.rank) + " failed: " + f.message), failure(std::move(f)) {}
    SweepRankFailure failure;
};

// A sweep's tasks as the process that writes the output sees them.
struct SweepTasks {
    std::size_t count = 0;
    // The next task to start, given the first task not yet delivered; `count` when none is left.
    // Called on the calling thread only.
    std::function<std::size_t(std::size_t first_undelivered)> order;
    // Runs on worker threads, several at once.
    std::function<SweepTaskRows(std::size_t)> compute;
    // On the calling thread, in task order.
    std::function<void(std::size_t, SweepTaskRows)> deliver;
};

// One process: the tasks on `workers` threads (>= 1), delivered in order on this thread. A task's
// exception is rethrown here (after the tasks running on the other threads finish).
void run_sweep_tasks(const SweepTasks& t, unsigned workers);

class SweepWorld {
public:
    // MPI_Init_thread(MPI_THREAD_FUNNELED). Throws std::runtime_error where MPI was not built in.
    SweepWorld();
    // MPI_Finalize (after a barrier waited for without spinning), unless abandon() was called: then
    // the process ends without it and the launcher ends the other ranks.
    ~SweepWorld();
    SweepWorld(const SweepWorld&) = delete;
    SweepWorld& operator=(const SweepWorld&) = delete;

    [[nodiscard]] int rank() const;
    [[nodiscard]] int size() const;
    // Ranks on this rank's node (MPI_COMM_TYPE_SHARED): the node's cores are shared among them.
    [[nodiscard]] int local_size() const;
    [[nodiscard]] std::string host() const;

    // Rank 0's `value` on every rank; waited for without spinning.
    [[nodiscard]] std::string broadcast(const std::string& value) const;

    // Rank 0: the tasks over every rank, `workers` of them at once on this rank's threads beside
    // the MPI loop, delivered in task order on this thread. A failure on any rank (or here)
    // abandons the world and throws: SweepRankFailed for another rank's, else the local exception.
    void run_root(const SweepTasks& t, unsigned workers);
    // Every other rank: asks rank 0 for `workers` tasks at once, runs them on as many threads and
    // sends each one's rows back (which asks for the next), until rank 0 says stop for each.
    void run_worker(const std::function<SweepTaskRows(std::size_t)>& compute, unsigned workers);
    // Every other rank, when it cannot take part (its own grid could not be read): tells rank 0,
    // which stops the sweep with this message, and waits to be ended.
    [[noreturn]] void fail_worker(const SweepRankFailure& why);

    void abandon() { abandoned_ = true; }

private:
    struct Impl;
    std::unique_ptr<Impl> impl_;
    bool abandoned_ = false;
};

} // namespace trainsim::sim::cli
