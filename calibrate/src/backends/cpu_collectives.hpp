// Collectives between std::threads over shared memory (internal to the CPU backend). Each thread
// is a rank with its own buffers; data moves between ranks by copying, step by step, with the
// algorithms NCCL uses: ring reduce-scatter + ring all-gather for all-reduce, rings for
// all-gather and reduce-scatter, pairwise exchange for all-to-all, a ring shift for send/recv.
// A barrier separates ring steps, as the NCCL protocol's flags do.
#pragma once

#include "trainsim/calibrate/measure/backend.hpp"

#include <atomic>
#include <barrier>
#include <cstddef>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

namespace trainsim::calibrate::detail {

// What the CPU backend's collective ops drive: a team of threads in this process (ThreadTeam),
// or, under MPI, this process's part of a group of processes (mpi_bootstrap.cpp).
class CollectiveGroup {
public:
    virtual ~CollectiveGroup() = default;
    // Buffers for `op` over `bytes` in the nccl-tests convention (fp32 elements).
    virtual void prepare(const std::string& op, std::size_t bytes) = 0;
    // One collective; returns when this rank's part is done.
    virtual void run() = 0;
    // The prepared op repeatedly, until stop_background() (the overlap measure).
    virtual void start_background() = 0;
    virtual void stop_background() = 0;
};

// The CPU backend with one rank per process (an MPI launch): this process is `rank` of `world`.
struct ProcessRanks {
    int rank = 0;
    int world = 1;
    std::vector<std::string> hosts;  // host of every rank
    std::string description;         // provenance: what carries the collectives
    // This rank's part of the group of ranks [0, size); called only by those ranks, in one order.
    std::function<std::unique_ptr<CollectiveGroup>(int size)> make_group;
    // Element-wise max of per-sample times over ranks [0, size): the slowest rank decides.
    std::function<void(int size, std::vector<double>& times)> max_over_group;
};

// Rank 0 runs single-process ops and writes the samples; ranks [0, group) run each collective.
[[nodiscard]] std::unique_ptr<Backend> make_process_cpu_backend(ProcessRanks ranks);

class ThreadTeam : public CollectiveGroup {
public:
    explicit ThreadTeam(int ranks);
    ~ThreadTeam() override;
    ThreadTeam(const ThreadTeam&) = delete;
    ThreadTeam& operator=(const ThreadTeam&) = delete;

    void prepare(const std::string& op, std::size_t bytes) override;
    // One collective on every rank; returns when all ranks are done.
    void run() override;
    void start_background() override;
    void stop_background() override;
    [[nodiscard]] int ranks() const { return n_; }
    // Rank r's input (all_reduce / reduce_scatter work in place in it) and output buffers, to
    // check the arithmetic in tests. Valid between run() calls.
    [[nodiscard]] const std::vector<float>& input(int r) const { return in_[static_cast<std::size_t>(r)]; }
    [[nodiscard]] const std::vector<float>& output(int r) const { return out_[static_cast<std::size_t>(r)]; }

private:
    struct Decide {
        ThreadTeam* team;
        void operator()() noexcept { team->keep_going_ = !team->stop_requested_.load(); }
    };
    void worker(int rank);
    void run_op(int rank);
    void ring_reduce_scatter(int rank);

    int n_;
    std::string op_;
    std::size_t count_ = 0, part_ = 0;  // elements per buffer, per rank's chunk
    std::vector<std::vector<float>> in_, out_;
    std::barrier<> go_, done_;  // the caller and every rank
    std::barrier<> step_;       // the ranks, between ring steps
    std::barrier<Decide> decide_;
    std::atomic<bool> quit_{false}, background_{false}, stop_requested_{false};
    bool keep_going_ = false;  // written by Decide while every rank waits in decide_
    std::vector<std::thread> threads_;
};

} // namespace trainsim::calibrate::detail
