// A tiny deterministic discrete-event scheduler (after ns-3's Simulator and SimGrid's engine):
// a binary heap ordered by (time, insertion sequence), so ties run FIFO and every run is
// identical. One Engine per simulation; no globals, so many can run on several threads.
#pragma once

#include "trainsim/model/units.hpp"

#include <cstdint>
#include <functional>
#include <stdexcept>
#include <vector>

namespace trainsim::sim {

using model::Time;

// An internal invariant was broken (a bug, not bad input). Stays on in Release.
class InternalError : public std::logic_error {
public:
    using std::logic_error::logic_error;
};

// Handle of a scheduled event, usable with Engine::cancel. A default-constructed handle refers to
// no event (cancelling it is a no-op).
struct EventId {
    std::uint64_t seq = UINT64_MAX;
};

class Engine {
public:
    using Callback = std::function<void()>;

    [[nodiscard]] Time now() const { return now_; }
    // Schedules cb at absolute time t. Throws InternalError if t is in the past.
    EventId schedule_at(Time t, Callback cb);
    EventId schedule_after(Time delay, Callback cb);
    // Cancels a pending event; cancelling one that already ran or was cancelled is a no-op.
    void cancel(EventId id);
    // Runs until the queue is empty. Returns the number of events executed.
    std::uint64_t run();
    [[nodiscard]] bool empty() const { return live_ == 0; }
    void reserve(std::size_t n) { heap_.reserve(n); }

private:
    struct Entry {
        Time t;
        std::uint64_t seq;
        Callback cb;
    };
    struct Later {
        bool operator()(const Entry& a, const Entry& b) const {
            return a.t != b.t ? a.t > b.t : a.seq > b.seq;
        }
    };
    std::vector<Entry> heap_;
    std::vector<bool> cancelled_;  // indexed by seq
    std::uint64_t next_seq_ = 0;
    std::uint64_t live_ = 0;
    Time now_;
};

} // namespace trainsim::sim
