#include "trainsim/model/accounting/pipeline_schedule.hpp"

#include <algorithm>

namespace trainsim::model {

namespace {
// Forward passes a stage runs before its first backward (Megatron-LM schedules.py:
// forward_backward_pipelining_with(out)_interleaving).
int warmup_forwards(int stage, int pp, int vp, int microbatches) {
    const int total = microbatches * vp;
    if (vp == 1) return std::min(pp - stage - 1, microbatches);
    if (microbatches == pp) return total; // "all warm-up" case of the interleaved schedule
    return std::min((pp - stage - 1) * 2 + (vp - 1) * pp, total);
}
} // namespace

std::vector<ScheduleItem> pipeline_schedule(int stage, int pp, int vp, int microbatches) {
    std::vector<ScheduleItem> out;
    const int total = microbatches * vp;
    out.reserve(static_cast<std::size_t>(2 * total));
    const int warmup = warmup_forwards(stage, pp, vp, microbatches);
    auto item = [&](int k, bool fwd) {
        const int group = k / pp;
        const int chunk_in_order = group % vp;
        ScheduleItem it;
        it.forward = fwd;
        it.chunk = fwd ? chunk_in_order : vp - 1 - chunk_in_order;
        it.microbatch = (k / (pp * vp)) * pp + k % pp;
        return it;
    };
    for (int k = 0; k < warmup; ++k) out.push_back(item(k, true));
    for (int i = 0; i < total - warmup; ++i) {
        out.push_back(item(warmup + i, true));
        out.push_back(item(i, false));
    }
    for (int k = total - warmup; k < total; ++k) out.push_back(item(k, false));
    return out;
}

int peak_inflight_chunks(int stage, int pp, int vp, int microbatches) {
    // pipeline_schedule: `warmup` forwards, then (forward, backward) pairs, then backwards only.
    const int warmup = warmup_forwards(stage, pp, vp, microbatches);
    return microbatches * vp > warmup ? warmup + 1 : warmup;
}

int peak_inflight_chunks(const std::vector<ScheduleItem>& schedule) {
    int live = 0, peak = 0;
    for (const auto& it : schedule) {
        live += it.forward ? 1 : -1;
        peak = std::max(peak, live);
    }
    return peak;
}

} // namespace trainsim::model
