#include "cpu_collectives.hpp"

#include <algorithm>
#include <stdexcept>

namespace trainsim::calibrate::detail {

ThreadTeam::ThreadTeam(int ranks)
    : n_(ranks), go_(ranks + 1), done_(ranks + 1), step_(ranks), decide_(ranks, Decide{this}) {
    if (ranks < 1) throw std::invalid_argument("ThreadTeam: at least one rank");
    threads_.reserve(static_cast<std::size_t>(ranks));
    for (int r = 0; r < ranks; ++r) threads_.emplace_back([this, r] { worker(r); });
}

ThreadTeam::~ThreadTeam() {
    if (background_) stop_background();
    quit_ = true;
    go_.arrive_and_wait();
    for (auto& t : threads_) t.join();
}

void ThreadTeam::prepare(const std::string& op, std::size_t bytes) {
    if (op != "all_reduce" && op != "all_gather" && op != "reduce_scatter" && op != "all_to_all" && op != "send_recv")
        throw std::invalid_argument("ThreadTeam: unknown collective '" + op + "'");
    op_ = op;
    const auto n = static_cast<std::size_t>(n_);
    part_ = std::max<std::size_t>(1, bytes / sizeof(float) / n);
    count_ = part_ * n;
    in_.assign(n, {});
    out_.assign(n, {});
    for (std::size_t r = 0; r < n; ++r) {
        in_[r].resize(count_);
        out_[r].resize(count_);
        // Small values that neither overflow nor go denormal when summed over many calls.
        for (std::size_t i = 0; i < count_; ++i) in_[r][i] = 1e-3f * static_cast<float>((i * 7 + r) % 13);
    }
}

void ThreadTeam::run() {
    go_.arrive_and_wait();
    done_.arrive_and_wait();
}

void ThreadTeam::start_background() {
    stop_requested_ = false;
    background_ = true;
    go_.arrive_and_wait();
}

void ThreadTeam::stop_background() {
    stop_requested_ = true;
    done_.arrive_and_wait();
    background_ = false;
}

void ThreadTeam::worker(int rank) {
    for (;;) {
        go_.arrive_and_wait();
        if (quit_) return;
        if (background_) {
            do {
                run_op(rank);
                decide_.arrive_and_wait();  // all ranks agree whether to go on
            } while (keep_going_);
        } else {
            run_op(rank);
        }
        done_.arrive_and_wait();
    }
}

// After n-1 steps rank r holds the sum over all ranks of chunk (r+1) mod n. At step s rank r adds
// its left neighbour's chunk (r-s-1) mod n, which the neighbour finished at step s-1; no two
// ranks touch the same chunk of the same buffer within a step.
void ThreadTeam::ring_reduce_scatter(int rank) {
    const int left = (rank + n_ - 1) % n_;
    auto& mine = in_[static_cast<std::size_t>(rank)];
    const auto& theirs = in_[static_cast<std::size_t>(left)];
    for (int s = 0; s < n_ - 1; ++s) {
        const std::size_t j = static_cast<std::size_t>((rank - s - 1 + 2 * n_) % n_) * part_;
        for (std::size_t i = 0; i < part_; ++i) mine[j + i] += theirs[j + i];
        step_.arrive_and_wait();
    }
}

void ThreadTeam::run_op(int rank) {
    const int left = (rank + n_ - 1) % n_;
    const auto r = static_cast<std::size_t>(rank), l = static_cast<std::size_t>(left);
    if (op_ == "all_reduce") {
        ring_reduce_scatter(rank);
        // Ring all-gather of the reduced chunks: at step s copy chunk (r-s) from the left.
        for (int s = 0; s < n_ - 1; ++s) {
            const std::size_t j = static_cast<std::size_t>((rank - s + n_) % n_) * part_;
            std::copy_n(in_[l].begin() + static_cast<std::ptrdiff_t>(j), part_, in_[r].begin() + static_cast<std::ptrdiff_t>(j));
            step_.arrive_and_wait();
        }
    } else if (op_ == "reduce_scatter") {
        ring_reduce_scatter(rank);
    } else if (op_ == "all_gather") {
        // Own part in place, then n-1 ring steps: at step s copy chunk (r-s-1) from the left.
        std::copy_n(in_[r].begin(), part_, out_[r].begin() + static_cast<std::ptrdiff_t>(r * part_));
        step_.arrive_and_wait();
        for (int s = 0; s < n_ - 1; ++s) {
            const std::size_t j = static_cast<std::size_t>((rank - s - 1 + 2 * n_) % n_) * part_;
            std::copy_n(out_[l].begin() + static_cast<std::ptrdiff_t>(j), part_, out_[r].begin() + static_cast<std::ptrdiff_t>(j));
            step_.arrive_and_wait();
        }
    } else if (op_ == "all_to_all") {
        // Rank r receives part r of every peer's buffer.
        for (int p = 0; p < n_; ++p) {
            const auto pp = static_cast<std::size_t>(p);
            std::copy_n(in_[pp].begin() + static_cast<std::ptrdiff_t>(r * part_), part_,
                        out_[r].begin() + static_cast<std::ptrdiff_t>(pp * part_));
        }
    } else {  // send_recv: every rank receives its left neighbour's buffer
        std::copy_n(in_[l].begin(), count_, out_[r].begin());
    }
}

} // namespace trainsim::calibrate::detail
