// The polling loop behind every wait on the GPU (GpuDevice::Impl::wait), without CUDA or NCCL
// types so that its logic is tested on machines without a GPU (tests/test_calibrate_plan.cpp).
// Internal to kernels/.
#pragma once

#include <chrono>
#include <optional>
#include <string>
#include <thread>

namespace trainsim::kernels::detail {

enum class WaitEnd { done, async_error, timeout };

// Polls until `ready()` is true. Between polls it asks `async_error()` (an error text, or nothing
// while every communicator is healthy) and yields the CPU; gives up on an error or once
// `timeout_s` have passed since the call (measured with Clock). `ready()` may throw (a CUDA error
// other than "not ready"). `why` receives the error text on async_error.
template <class Ready, class AsyncError, class Clock = std::chrono::steady_clock>
WaitEnd wait_until(Ready&& ready, AsyncError&& async_error, double timeout_s, std::string* why = nullptr) {
    const auto t0 = Clock::now();
    for (;;) {
        if (ready()) return WaitEnd::done;
        if (std::optional<std::string> e = async_error()) {
            if (why != nullptr) *why = std::move(*e);
            return WaitEnd::async_error;
        }
        if (std::chrono::duration<double>(Clock::now() - t0).count() > timeout_s) return WaitEnd::timeout;
        std::this_thread::yield(); // sched_yield, as nccl-tests between polls
    }
}

} // namespace trainsim::kernels::detail
