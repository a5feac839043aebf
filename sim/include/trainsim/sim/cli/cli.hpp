// The trainsim command line (subcommands simulate, compare, report, plan, keys, explain, validate,
// collective, topology; README "Commands").
#pragma once

namespace trainsim::sim {

inline constexpr int kExitOk = 0;
inline constexpr int kExitInternal = 1;
inline constexpr int kExitBadInput = 2;
inline constexpr int kExitDoesNotFit = 3;
// `plan`: layouts fit in memory, but none meets --deadline-days and --budget (README "Exit codes").
inline constexpr int kExitNoPlanMeetsConstraints = 4;

// Parses argv and runs the command. Throws model::InputError for bad input (main maps it to 2).
int run_cli(int argc, char** argv);

} // namespace trainsim::sim
