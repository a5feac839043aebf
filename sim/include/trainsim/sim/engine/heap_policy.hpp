// Process-wide allocator policy for the simulator: keep freed memory instead of handing it back.
//
// A step of a large plan builds and frees tens of MB of vectors (op graph, per-rank state, event
// heap); a plan search does that for every candidate. glibc gives the heap top back to the kernel
// whenever more than 128 KiB of it is free (M_TRIM_THRESHOLD) and serves large blocks with fresh
// mmap pages, so every evaluation page-faults its working set in again. Measured on
// BM_Llama70B_1024xH100_Step (glibc 2.36, this 2-core VM): median 45-56 ms as is, most of it
// first-touch faults (perf: clear_page / do_anonymous_page); 22.0 ms with only the trim threshold
// raised (GLIBC_TUNABLES=glibc.malloc.trim_threshold=4294967296), 21.1 ms with the mmap threshold
// raised too. Setting both here makes the speed not depend on the environment. The cost: the
// process keeps its peak heap until exit, which the next plan of a search would reach again.
// mallopt: glibc manual, "Malloc Tunable Parameters" (M_MMAP_THRESHOLD, M_TRIM_THRESHOLD).
#pragma once

#if defined(__GLIBC__)
#include <malloc.h>
#endif

namespace trainsim::sim {

// Call once at the start of main, before any thread starts. A no-op outside glibc.
inline void keep_freed_memory() {
#if defined(__GLIBC__)
    // glibc's largest accepted mmap threshold on 64-bit (DEFAULT_MMAP_THRESHOLD_MAX, 32 MiB);
    // mallopt refuses anything above it. Blocks up to this size come from the heap.
    constexpr int kMmapThreshold = 32 << 20;
    constexpr int kTrimThreshold = 1 << 30; // give the heap top back only past 1 GiB free
    mallopt(M_MMAP_THRESHOLD, kMmapThreshold);
    mallopt(M_TRIM_THRESHOLD, kTrimThreshold);
#endif
}

} // namespace trainsim::sim
