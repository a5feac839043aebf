// Runs independent simulations on all cores (validation rows, plan-search candidates).
#pragma once

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <exception>
#include <system_error>
#include <thread>
#include <vector>

namespace trainsim::sim {

// Calls f(i) for every i in [0, n) on `threads` workers (the caller is one of them); items are
// taken in order from a shared counter. Rethrows the first exception a worker raised, after all
// workers stopped. f must be safe to call concurrently for different i.
// More workers than items or than four per core buy nothing: `threads` is capped there. A worker
// the system cannot start (std::thread throws) is done without; the others take its share.
template <class F> void parallel_for(std::size_t n, unsigned threads, F&& f) {
    const std::size_t useful = std::min<std::size_t>(n, 4ull * std::max(1u, std::thread::hardware_concurrency()));
    threads = static_cast<unsigned>(std::clamp<std::size_t>(threads, 1, std::max<std::size_t>(1, useful)));
    std::atomic<std::size_t> next{0};
    std::vector<std::exception_ptr> errors(threads);
    auto worker = [&](unsigned w) {
        try {
            for (std::size_t i = next++; i < n; i = next++) f(i);
        } catch (...) {
            errors[w] = std::current_exception();
            next = n;  // stop the others soon
        }
    };
    std::vector<std::thread> pool;
    pool.reserve(threads);
    for (unsigned w = 1; w < threads; ++w) {
        try {
            pool.emplace_back(worker, w);
        } catch (const std::system_error&) {
            break;  // out of threads: the workers running (and this one) finish the items
        }
    }
    worker(0);
    for (auto& t : pool) t.join();
    for (auto& e : errors)
        if (e) std::rethrow_exception(e);
}

} // namespace trainsim::sim
