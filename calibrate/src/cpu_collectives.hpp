// Collectives between std::threads over shared memory (internal to the CPU backend). Each thread
// is a rank with its own buffers; data moves between ranks by copying, step by step, with the
// algorithms NCCL uses: ring reduce-scatter + ring all-gather for all-reduce, rings for
// all-gather and reduce-scatter, pairwise exchange for all-to-all, a ring shift for send/recv.
// A barrier separates ring steps, as the NCCL protocol's flags do.
#pragma once

#include <atomic>
#include <barrier>
#include <cstddef>
#include <string>
#include <thread>
#include <vector>

namespace trainsim::calibrate::detail {

class ThreadTeam {
public:
    explicit ThreadTeam(int ranks);
    ~ThreadTeam();
    ThreadTeam(const ThreadTeam&) = delete;
    ThreadTeam& operator=(const ThreadTeam&) = delete;

    // Buffers for `op` over `bytes` in the nccl-tests convention (fp32 elements).
    void prepare(const std::string& op, std::size_t bytes);
    // One collective on every rank; returns when all ranks are done.
    void run();
    // The prepared op repeatedly on every rank, until stop_background() (the overlap measure).
    void start_background();
    void stop_background();
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
