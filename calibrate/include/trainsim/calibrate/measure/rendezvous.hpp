// Bootstrap of a multi-process run without MPI: rank 0 makes the NCCL id and publishes it in a
// directory every rank can read (local processes, or a shared file system across nodes); the
// other ranks publish their host name and wait for the id. Files are written to a temporary
// name and renamed into place, so a reader never sees half a file. `session` keeps concurrent or
// stale runs in the same directory apart (the launcher makes a fresh one per run).
#pragma once

#include <chrono>
#include <filesystem>
#include <functional>
#include <string>
#include <vector>

namespace trainsim::calibrate {

struct RendezvousResult {
    std::vector<unsigned char> id;   // the bytes rank 0 published
    std::vector<std::string> hosts;  // host name of every rank, by rank
};

// Collective over `world` ranks. make_id is called on rank 0 only. Throws
// CalibrationInputError when the other ranks do not show up within `timeout`.
[[nodiscard]] RendezvousResult rendezvous(const std::filesystem::path& dir, const std::string& session, int rank,
                                          int world, const std::function<std::vector<unsigned char>()>& make_id,
                                          std::chrono::milliseconds timeout = std::chrono::minutes(5));

[[nodiscard]] std::string host_name();

} // namespace trainsim::calibrate
