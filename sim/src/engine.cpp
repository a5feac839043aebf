#include "trainsim/sim/engine.hpp"

#include <algorithm>
#include <string>

namespace trainsim::sim {

EventId Engine::schedule_at(Time t, Callback cb) {
    if (t < now_) {
        throw InternalError("event scheduled in the past: at " + std::to_string(t.count_ps()) + " ps, now " +
                            std::to_string(now_.count_ps()) + " ps");
    }
    const std::uint64_t seq = next_seq_++;
    cancelled_.push_back(false);
    heap_.push_back(Entry{t, seq, std::move(cb)});
    std::push_heap(heap_.begin(), heap_.end(), Later{});
    ++live_;
    return EventId{seq};
}

EventId Engine::schedule_after(Time delay, Callback cb) { return schedule_at(now_ + delay, std::move(cb)); }

void Engine::cancel(EventId id) {
    if (id.seq < cancelled_.size() && !cancelled_[id.seq]) {
        cancelled_[id.seq] = true;
        --live_;
    }
}

std::uint64_t Engine::run() {
    std::uint64_t executed = 0;
    while (!heap_.empty()) {
        std::pop_heap(heap_.begin(), heap_.end(), Later{});
        Entry e = std::move(heap_.back());
        heap_.pop_back();
        if (cancelled_[e.seq]) continue;
        cancelled_[e.seq] = true;  // ran: a later cancel is a no-op
        --live_;
        now_ = e.t;
        e.cb();
        ++executed;
    }
    return executed;
}

} // namespace trainsim::sim
