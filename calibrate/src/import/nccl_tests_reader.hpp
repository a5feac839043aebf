// nccl-tests logs, internal to calibrate/src/import/: the vocabulary both formats share and the
// reader that both fill (text lines: nccl_tests_text.cpp; -J JSON: nccl_tests_json.cpp) and then
// settles into samples (nccl_tests.cpp).
#pragma once

#include "trainsim/calibrate/import/import.hpp"

#include "import_text.hpp"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <array>
#include <cmath>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace trainsim::calibrate::detail {

constexpr std::array<const char*, 5> kOps{"all_reduce", "all_gather", "reduce_scatter", "all_to_all", "send_recv"};

// Our op name for a binary's stem (all_reduce_perf -> all_reduce), or for --op spellings.
std::string op_of_name(std::string_view name);
// Element type names of nccl-tests (and rccl-tests) -> the dtype labels of our samples.
std::string dtype_of(std::string_view type);
// NCCL_VERSION_CODE as nccl-tests prints it (nccl-library=22105).
std::string decode_nccl_version(std::int64_t code);
// The binaries a line names ("./build/all_reduce_perf -b 8"): the word before each "_perf".
std::vector<std::string> perf_binaries(std::string_view s);
// The op a file name says (a100-8gpu-allreduce-superbench.txt -> all_reduce), if exactly one.
std::string op_from_file_name(const std::string& file);
double bus_factor_of(const std::string& op, int group);
// A JSON document rather than a text log: nccl-tests -J output, or a JSON export of some tool.
bool looks_like_json(std::string_view text, int& line);

struct RankLine {
    int rank = 0;
    int group = 0;
    std::string host;
    std::string gpu;
    int line = 0;
};

// A "#  Rank ..." line; `rest`: the text after '#', `t`: its tokens.
std::optional<RankLine> parse_rank_line(std::string_view rest, const std::vector<Token>& t, int col_of_rest);

// A row as read, before the op is known.
struct RawRow {
    NcclTestsRow row;       // row.key: the JSON path of the times (empty in text)
    std::string dtype;
    bool reduces = false;   // a reduction op is printed (sum, prod, ...; not blank or "none")
    double time_rel = 0;    // relative print rounding of the time
    double busbw_half = 0;  // half a unit of busbw's last printed digit
    int busbw_col = 0;
};

// algbw = size / time as nccl-tests computes it (GB/s from bytes and microseconds), and whether a
// printed value matches a computed one within print rounding: half a unit of its last digit plus
// what the printed time's own rounding moves the computed value, with 1% to spare for printf
// rounding the binary value at a half.
inline double algbw_of(double bytes, double time_us) { return bytes / (time_us * 1e3); }
inline bool within_print(double printed, double half, double computed, double time_rel) {
    const double tol = (half + computed * time_rel) * 1.01 + 1e-9;
    return std::abs(printed - computed) <= tol;
}

std::string gbps(double v);

// A nccl-tests time longer than this per call is not a collective measurement (and beyond what
// the profile's times hold): an hour, in microseconds.
constexpr double kMaxCallUs = 3.6e9;

// -I statistics of iterations of `agg` calls (-m), per call.
void per_call(NcclTestsIterStats& st, int agg);

// One log read line by line (read_line), then settled: the group (settle_group), the op
// (settle_op), every row against both (check_rows) and the samples (make_samples). Each step adds
// to log.problems and returns false when the next one has nothing to work on.
class LogReader {
public:
    LogReader(NcclTestsLog& log, const NcclTestsOptions& opts) : log_(log), opts_(opts) {}

    void read_line(int line_no, std::string_view line);
    void read_json(const nlohmann::json& doc);
    bool settle_group();
    bool settle_op();
    bool check_rows();
    void make_samples();
    [[nodiscard]] bool stopped() const { return stopped_; }

private:
    void problem(int line, int col, const std::string& msg) {
        log_.problems.push_back(model::Diagnostic{log_.file, line, line > 0 ? std::max(col, 1) : 0, "", msg});
    }
    // A problem in JSON: named by the path of the value, not a line (nccl-tests writes one line).
    void json_problem(const std::string& key, const std::string& msg) {
        log_.problems.push_back(model::Diagnostic{log_.file, 0, 0, key, msg});
    }
    // A problem with one row: at its line and column in text, at its JSON path + `field` in JSON.
    void row_problem(const RawRow& r, int col, const std::string& field, const std::string& msg) {
        if (r.row.key.empty()) problem(r.row.line, col, msg);
        else json_problem(r.row.key + field, msg);
    }
    static std::string where(const RawRow& r) {
        return r.row.key.empty() ? fmt::format("line {}", r.row.line) : r.row.key;
    }
    void read_json_row(const nlohmann::json& result, const std::string& key);
    void read_comment(int line_no, std::string_view s, int col0);
    void read_row(int line_no, std::int64_t size, std::int64_t count, const std::vector<Token>& t);

    NcclTestsLog& log_;
    const NcclTestsOptions& opts_;
    std::optional<int> nthread_, ngpus_;
    int header_line_ = 0;
    bool stopped_ = false;       // a second run starts: the rest of the file is not read
    bool wrong_column_ = false;  // the column header says "#wrong" (counts of wrong elements)
    // Columns the header names before the first time: the out-of-place time is at most that far
    // into a row (fewer when a blank redop is left out), never in the in-place columns.
    std::optional<std::size_t> time_column_;
    std::map<int, RankLine> ranks_;
    std::string rank_source_ = "Rank lines";  // what ranks_ came from
    int unreadable_rank_line_ = 0;
    // Columns from the out-of-place time to i_min (the -I per-iteration columns), from the header.
    std::optional<std::size_t> iter_offset_;
    std::map<std::string, std::string> binaries_;  // op -> where its binary is first named ("on line 3")
    std::map<std::string, int> unsupported_binaries_;
    std::vector<RawRow> raw_;
};

} // namespace trainsim::calibrate::detail
