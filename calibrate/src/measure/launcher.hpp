// Starting the other ranks of a single-node GPU run as child processes of rank 0 (internal).
#pragma once

#include <string>
#include <sys/types.h>
#include <vector>

namespace trainsim::calibrate::detail {

// Runs this executable (/proc/self/exe) once per extra rank with `args` plus
// "--rank R". Children die with the parent (PR_SET_PDEATHSIG), so a killed rank 0 never leaves
// ranks waiting in NCCL. Throws std::system_error when fork / exec setup fails.
[[nodiscard]] std::vector<pid_t> spawn_ranks(const std::vector<std::string>& args, int world);

// Waits for every child; returns a description of those that failed (empty: all exited 0).
[[nodiscard]] std::string wait_ranks(const std::vector<pid_t>& pids);

// Kills (SIGTERM) and reaps the children, e.g. when rank 0 fails.
void stop_ranks(const std::vector<pid_t>& pids);

} // namespace trainsim::calibrate::detail
