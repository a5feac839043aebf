// A simulated step as a Chrome / Perfetto trace (Trace Event Format JSON; fields in docs/report.md).
#pragma once

#include "trainsim/model/core/scenario.hpp"
#include "trainsim/model/workload/workload.hpp"
#include "trainsim/sim/step/executor.hpp"

#include <iosfwd>
#include <string>

namespace trainsim::sim {

// Writes step.trace as {"displayTimeUnit", "otherData", "traceEvents"}: one process per simulated
// rank (pid = global rank), one thread per stream that ran an op (tid = stream index, 0 = compute),
// a complete event ("X", ts and dur in microseconds) per op with name = op name, cat = breakdown
// category and args (kind, micro-batch, chunk, bytes, FLOPs, GEMM shape, collective and group),
// and metadata events ("M") naming and ordering the processes and threads.
// Preconditions: graph = build_workload(plan); step was executed on graph with
// ExecOptions::record_trace. `scenario_file` is only recorded in otherData.
void write_chrome_trace(std::ostream& os, const model::Plan& plan, const model::OpGraph& graph, const StepResult& step,
                        const std::string& scenario_file);

} // namespace trainsim::sim
