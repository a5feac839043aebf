// Runs independent simulations on all cores (validation rows, plan-search candidates).
#pragma once

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <exception>
#include <thread>
#include <vector>

namespace trainsim::sim {

// Calls f(i) for every i in [0, n) on `threads` workers (the caller is one of them); items are
// taken in order from a shared counter. Rethrows the first exception a worker raised, after all
// workers stopped. f must be safe to call concurrently for different i.
template <class F> void parallel_for(std::size_t n, unsigned threads, F&& f) {
    threads = std::max(1u, threads);
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
    for (unsigned w = 1; w < threads; ++w) pool.emplace_back(worker, w);
    worker(0);
    for (auto& t : pool) t.join();
    for (auto& e : errors)
        if (e) std::rethrow_exception(e);
}

} // namespace trainsim::sim
