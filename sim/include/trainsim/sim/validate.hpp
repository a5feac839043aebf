// `trainsim validate`: every row of a published-measurements file simulated and compared.
#pragma once

#include "trainsim/model/validation_set.hpp"

#include <nlohmann/json.hpp>

#include <map>
#include <string>
#include <vector>

namespace trainsim::sim {

struct RowResult {
    std::string id;
    std::string status;  // ok | skipped | does_not_fit
    double predicted = 0;  // tokens/s/GPU
    double measured = 0;
    double error_pct = 0;  // (predicted - measured) / measured * 100
    std::string reason;
    std::string gpu, precision, source_group, kind;
    std::vector<std::string> choices;
};

struct ErrorStats {
    int n = 0;
    double mape = 0, median = 0, p90 = 0, max = 0;  // of |error| in percent
    double bias = 0;                                // mean signed error in percent
};
[[nodiscard]] ErrorStats error_stats(const std::vector<double>& signed_errors_pct);

struct ValidationReport {
    std::vector<RowResult> rows;
    ErrorStats overall;
    std::map<std::string, ErrorStats> by_gpu_precision, by_source_group, by_kind;
    int skipped = 0, does_not_fit = 0;
};

// The row's plan with blank micro_batch / recompute cells tuned as the source's benchmark was:
// the best-throughput choice that fits (recorded in `choices`).
// `defaulted` (when given) receives the blank degrees still at the frameworks' default 1 (none
// when blank tp / pp were chosen as the least model parallelism that fits).
[[nodiscard]] model::Plan tune_blank_cells(const model::ValidationRow& row, std::vector<std::string>& choices,
                                           std::vector<std::string>* defaulted = nullptr);

// Simulates every row (kind filter: empty = all). Rows run on `threads` workers.
[[nodiscard]] ValidationReport validate_rows(const std::vector<model::ValidationRow>& rows, const std::string& kind,
                                             unsigned threads);
[[nodiscard]] nlohmann::json report_json(const ValidationReport& r);
[[nodiscard]] std::string report_text(const ValidationReport& r, bool verbose);

} // namespace trainsim::sim
