// A tiny deterministic discrete-event scheduler (after ns-3's Simulator and SimGrid's engine):
// a binary heap ordered by (time, insertion sequence), so ties run FIFO and every run is
// identical. One queue per simulation; no globals, so many can run on several threads.
//
// EventQueue<Payload> holds typed events (the step executor's are two integers and a kind, run
// by a switch); Engine is the same queue of callbacks, for everything else.
#pragma once

#include "trainsim/model/core/units.hpp"

#include <algorithm>
#include <cstdint>
#include <functional>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace trainsim::sim {

using model::Time;

// An internal invariant was broken (a bug, not bad input). Stays on in Release.
class InternalError : public std::logic_error {
public:
    using std::logic_error::logic_error;
};

// Handle of a scheduled event, usable with cancel. A default-constructed handle refers to no
// event (cancelling it is a no-op).
struct EventId {
    std::uint64_t seq = UINT64_MAX;
    std::uint32_t slot = 0; // where the queue keeps the event's payload
};

template <class Payload>
class EventQueue {
public:
    [[nodiscard]] Time now() const { return now_; }
    // Schedules `p` at absolute time t. Throws InternalError if t is in the past.
    EventId schedule_at(Time t, Payload p) {
        if (t < now_) {
            throw InternalError("event scheduled in the past: at " + std::to_string(t.count_ps()) + " ps, now " +
                                std::to_string(now_.count_ps()) + " ps");
        }
        const std::uint64_t seq = next_seq_++;
        std::uint32_t slot = 0;
        if (!free_.empty()) {
            slot = free_.back();
            free_.pop_back();
        } else {
            slot = static_cast<std::uint32_t>(slots_.size());
            slots_.emplace_back();
        }
        slots_[slot].seq = seq;
        slots_[slot].payload = std::move(p);
        if (t == now_) {
            now_fifo_.push_back(Entry{t, seq, slot}); // see `now_fifo_`: already in order
        } else {
            heap_.push_back(Entry{t, seq, slot});
            std::push_heap(heap_.begin(), heap_.end(), Later{});
        }
        ++live_;
        return EventId{seq, slot};
    }
    EventId schedule_after(Time delay, Payload p) { return schedule_at(now_ + delay, std::move(p)); }
    // Cancels a pending event; cancelling one that already ran or was cancelled is a no-op.
    void cancel(EventId id) {
        if (id.seq == UINT64_MAX || id.slot >= slots_.size()) return; // a default handle: no event
        auto& s = slots_[id.slot];
        if (s.seq != id.seq) return; // already ran or cancelled (the slot may serve a later event)
        release(id.slot);
    }
    // Runs until the queue is empty, calling handle(payload) for each event at its time. Returns
    // the number of events run.
    template <class Handler>
    std::uint64_t run(Handler&& handle) {
        std::uint64_t executed = 0;
        for (;;) {
            Entry e{};
            if (!heap_.empty() && (heap_.front().t == now_ || fifo_head_ == now_fifo_.size())) {
                std::pop_heap(heap_.begin(), heap_.end(), Later{});
                e = heap_.back();
                heap_.pop_back();
            } else if (fifo_head_ < now_fifo_.size()) {
                e = now_fifo_[fifo_head_++];
                if (fifo_head_ == now_fifo_.size()) {
                    now_fifo_.clear();
                    fifo_head_ = 0;
                }
            } else {
                break;
            }
            if (slots_[e.slot].seq != e.seq) continue; // cancelled
            Payload p = std::move(slots_[e.slot].payload);
            release(e.slot); // ran: a later cancel is a no-op
            now_ = e.t;
            handle(p);
            ++executed;
        }
        return executed;
    }
    [[nodiscard]] bool empty() const { return live_ == 0; }
    void reserve(std::size_t n) {
        heap_.reserve(n);
        slots_.reserve(n);
    }

private:
    // The heap holds small trivially copyable entries; the payloads stay put in `slots_` (reused
    // through `free_`), so sifting the heap moves 24 bytes whatever the payload. A slot's `seq`
    // says which event owns it: an entry whose slot no longer carries its seq was cancelled.
    struct Entry {
        Time t;
        std::uint64_t seq;
        std::uint32_t slot;
    };
    struct Later {
        bool operator()(const Entry& a, const Entry& b) const { return a.t != b.t ? a.t > b.t : a.seq > b.seq; }
    };
    struct Slot {
        std::uint64_t seq = UINT64_MAX; // UINT64_MAX: free
        Payload payload{};
    };
    void release(std::uint32_t slot) {
        slots_[slot].seq = UINT64_MAX;
        slots_[slot].payload = Payload{};
        free_.push_back(slot);
        --live_;
    }
    std::vector<Entry> heap_;
    // Events scheduled for the current time, in scheduling order. They need no heap: each was
    // scheduled after every event already in the heap for this time (those were scheduled while
    // the clock was earlier), so "heap entries at now first, then this FIFO" is exactly the
    // (time, sequence) order; the clock only advances once the FIFO is empty. Most of the step
    // executor's events (a stream starting its next op, a host resuming) land here.
    std::vector<Entry> now_fifo_;
    std::size_t fifo_head_ = 0;
    std::vector<Slot> slots_;
    std::vector<std::uint32_t> free_;
    std::uint64_t next_seq_ = 0;
    std::uint64_t live_ = 0;
    Time now_;
};

// The queue with callbacks as events (typed callables, never void*).
class Engine {
public:
    using Callback = std::function<void()>;

    [[nodiscard]] Time now() const { return q_.now(); }
    // Schedules cb at absolute time t. Throws InternalError if t is in the past.
    EventId schedule_at(Time t, Callback cb) { return q_.schedule_at(t, std::move(cb)); }
    EventId schedule_after(Time delay, Callback cb) { return q_.schedule_after(delay, std::move(cb)); }
    // Cancels a pending event; cancelling one that already ran or was cancelled is a no-op.
    void cancel(EventId id) { q_.cancel(id); }
    // Runs until the queue is empty. Returns the number of events executed.
    std::uint64_t run() {
        return q_.run([](Callback& cb) { cb(); });
    }
    [[nodiscard]] bool empty() const { return q_.empty(); }
    void reserve(std::size_t n) { q_.reserve(n); }

private:
    EventQueue<Callback> q_;
};

} // namespace trainsim::sim
