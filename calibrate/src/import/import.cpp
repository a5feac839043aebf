#include "trainsim/calibrate/import/import.hpp"

#include "trainsim/calibrate/core/calibrate_error.hpp"
#include "trainsim/calibrate/measure/measure.hpp"
#include "trainsim/calibrate/measure/rendezvous.hpp"
#include "trainsim/model/core/units.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cctype>
#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstring>
#include <fstream>
#include <memory>
#include <set>
#include <sstream>
#include <system_error>

namespace trainsim::calibrate {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

// ---- text ------------------------------------------------------------------------------------

struct Token {
    std::string_view text;
    int col = 0;  // 1-based column in the line as read
};

std::string_view trim(std::string_view s) {
    const auto b = s.find_first_not_of(" \t\r");
    if (b == std::string_view::npos) return {};
    const auto e = s.find_last_not_of(" \t\r");
    return s.substr(b, e - b + 1);
}

// Whitespace-separated tokens of s, whose first character is at column col0.
std::vector<Token> tokenize(std::string_view s, int col0) {
    std::vector<Token> out;
    std::size_t i = 0;
    while (i < s.size()) {
        while (i < s.size() && (s[i] == ' ' || s[i] == '\t' || s[i] == '\r')) ++i;
        const std::size_t b = i;
        while (i < s.size() && s[i] != ' ' && s[i] != '\t' && s[i] != '\r') ++i;
        if (i > b) out.push_back(Token{s.substr(b, i - b), col0 + static_cast<int>(b)});
    }
    return out;
}

bool parse_int(std::string_view t, std::int64_t& v) {
    if (t.empty()) return false;
    const auto r = std::from_chars(t.data(), t.data() + t.size(), v);
    return r.ec == std::errc() && r.ptr == t.data() + t.size();
}

// A finite number, the whole token ("35.20", "63896", "1.0e+07"); not "N/A", "inf", "nan".
bool parse_real(std::string_view t, double& v) {
    if (t.empty() || !(std::isdigit(static_cast<unsigned char>(t[0])) || t[0] == '-' || t[0] == '.')) return false;
    const auto r = std::from_chars(t.data(), t.data() + t.size(), v);
    return r.ec == std::errc() && r.ptr == t.data() + t.size() && std::isfinite(v);
}

// Half a unit in the last printed digit of a number as printed: "35.20" -> 0.005, "63896" -> 0.5,
// "1.0e+07" -> 5e5. nccl-tests prints times in 7 and bandwidths in 6 characters (getFloatStr in
// src/util.cu), so the digits after the point change with the magnitude.
double half_ulp(std::string_view t) {
    const auto e = t.find_first_of("eE");
    const std::string_view mant = t.substr(0, e);
    const auto dot = mant.find('.');
    const int decimals = dot == std::string_view::npos ? 0 : static_cast<int>(mant.size() - dot - 1);
    std::int64_t exp10 = 0;
    if (e != std::string_view::npos) {
        std::string_view x = t.substr(e + 1);
        if (!x.empty() && x[0] == '+') x.remove_prefix(1);
        if (!parse_int(x, exp10) || exp10 < -300 || exp10 > 300) exp10 = 0;
    }
    return 0.5 * std::pow(10.0, static_cast<double>(exp10) - decimals);
}

bool is_alpha_token(std::string_view t) {
    return !t.empty() && std::isalpha(static_cast<unsigned char>(t[0])) != 0;
}

std::string lower(std::string_view s) {
    std::string out(s);
    for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    return out;
}

bool contains(std::string_view s, std::string_view what) { return s.find(what) != std::string_view::npos; }

// Text from a log (host and GPU names, versions, file names) as valid UTF-8, each byte that is not
// part of a well-formed sequence replaced by '?': JSON (samples, run.json) holds only UTF-8.
std::string utf8(std::string_view s) {
    std::string out;
    out.reserve(s.size());
    std::size_t i = 0;
    while (i < s.size()) {
        const auto c = static_cast<unsigned char>(s[i]);
        std::size_t len = c < 0x80                 ? 1
                          : c >= 0xC2 && c <= 0xDF ? 2
                          : c >= 0xE0 && c <= 0xEF ? 3
                          : c >= 0xF0 && c <= 0xF4 ? 4
                                                   : 0;
        bool ok = len > 0 && i + len <= s.size();
        for (std::size_t k = 1; ok && k < len; ++k) {
            const auto x = static_cast<unsigned char>(s[i + k]);
            unsigned char lo = 0x80, hi = 0xBF;
            if (k == 1 && c == 0xE0) lo = 0xA0;  // overlong
            if (k == 1 && c == 0xED) hi = 0x9F;  // surrogates
            if (k == 1 && c == 0xF0) lo = 0x90;  // overlong
            if (k == 1 && c == 0xF4) hi = 0x8F;  // beyond U+10FFFF
            ok = x >= lo && x <= hi;
        }
        if (ok) out.append(s.substr(i, len));
        else out += '?';
        i += ok ? len : 1;
    }
    return out;
}

// Length of the launcher prefixes at the start of a line: mpirun --tag-output "[1,0]<stdout>:",
// srun --label " 0: " / "12: " (both may be there, outermost first).
std::size_t prefix_length(std::string_view line) {
    std::size_t total = 0;
    for (int pass = 0; pass < 2; ++pass) {
        const std::string_view s = line.substr(total);
        if (!s.empty() && s[0] == '[') {
            const auto close = s.find("]<");
            const auto end = close == std::string_view::npos ? close : s.find(">:", close);
            if (end != std::string_view::npos) {
                const std::string_view ids = s.substr(1, close - 1);
                const std::string_view stream = s.substr(close + 2, end - close - 2);
                const bool ids_ok = !ids.empty() && ids.find_first_not_of("0123456789,") == std::string_view::npos;
                if (ids_ok && (stream == "stdout" || stream == "stderr" || stream == "stddiag")) {
                    total += end + 2;
                    continue;
                }
            }
        }
        std::size_t i = 0;
        while (i < s.size() && s[i] == ' ') ++i;
        std::size_t d = i;
        while (d < s.size() && std::isdigit(static_cast<unsigned char>(s[d])) != 0) ++d;
        if (d > i && d < s.size() && s[d] == ':' && (d + 1 == s.size() || s[d + 1] == ' ' || s[d + 1] == '\t')) {
            total += d + 1;
            continue;
        }
        break;
    }
    return total;
}

// ---- nccl-tests vocabulary -------------------------------------------------------------------

constexpr std::array<const char*, 5> kOps{"all_reduce", "all_gather", "reduce_scatter", "all_to_all", "send_recv"};

// Our op name for a binary's stem (all_reduce_perf -> all_reduce), or for --op spellings.
std::string op_of_name(std::string_view name) {
    const std::string n = lower(name);
    if (n == "all_reduce" || n == "allreduce") return "all_reduce";
    if (n == "all_gather" || n == "allgather") return "all_gather";
    if (n == "reduce_scatter" || n == "reducescatter") return "reduce_scatter";
    if (n == "all_to_all" || n == "alltoall") return "all_to_all";
    if (n == "send_recv" || n == "sendrecv") return "send_recv";
    return {};
}

// Element type names of nccl-tests (and rccl-tests) -> the dtype labels of our samples.
std::string dtype_of(std::string_view type) {
    static const std::array<std::pair<const char*, const char*>, 14> kTypes{{{"float", "fp32"},
                                                                             {"half", "fp16"},
                                                                             {"bfloat16", "bf16"},
                                                                             {"double", "fp64"},
                                                                             {"f8e4m3", "fp8_e4m3"},
                                                                             {"f8e5m2", "fp8_e5m2"},
                                                                             {"fp8_e4m3", "fp8_e4m3"},
                                                                             {"fp8_e5m2", "fp8_e5m2"},
                                                                             {"int8", "int8"},
                                                                             {"uint8", "uint8"},
                                                                             {"int32", "int32"},
                                                                             {"uint32", "uint32"},
                                                                             {"int64", "int64"},
                                                                             {"uint64", "uint64"}}};
    for (const auto& [from, to] : kTypes)
        if (type == from) return to;
    if (type == "char") return "int8";  // NCCL 1
    if (type == "int") return "int32";
    return {};
}

// NCCL_VERSION_CODE as nccl-tests prints it (nccl-library=22105): X*10000 + Y*100 + Z from 2.9,
// X*1000 + Y*100 + Z before (nccl.h).
std::string decode_nccl_version(std::int64_t code) {
    if (code >= 20900) return fmt::format("{}.{}.{}", code / 10000, (code % 10000) / 100, code % 100);
    return fmt::format("{}.{}.{}", code / 1000, (code % 1000) / 100, code % 100);
}

// The binaries a line names ("./build/all_reduce_perf -b 8", "# Collective test starting:
// all_gather_perf_mpi"): the word before each "_perf".
std::vector<std::string> perf_binaries(std::string_view s) {
    std::vector<std::string> out;
    std::size_t pos = 0;
    while ((pos = s.find("_perf", pos)) != std::string_view::npos) {
        std::size_t b = pos;
        while (b > 0 && (std::isalnum(static_cast<unsigned char>(s[b - 1])) != 0 || s[b - 1] == '_')) --b;
        if (b < pos) out.emplace_back(s.substr(b, pos - b));
        pos += 5;
    }
    return out;
}

std::string base_name(const std::string& file) { return utf8(fs::path(file).filename().string()); }

// The op a file name says (a100-8gpu-allreduce-superbench.txt -> all_reduce), if exactly one.
std::string op_from_file_name(const std::string& file) {
    std::string n = lower(fs::path(file).stem().string());
    n.erase(std::remove_if(n.begin(), n.end(), [](char c) { return c == '_' || c == '-' || c == '.'; }), n.end());
    const std::array<std::pair<const char*, const char*>, 6> kWords{{{"allreduce", "all_reduce"},
                                                                     {"allgather", "all_gather"},
                                                                     {"reducescatter", "reduce_scatter"},
                                                                     {"alltoall", "all_to_all"},
                                                                     {"all2all", "all_to_all"},
                                                                     {"sendrecv", "send_recv"}}};
    std::set<std::string> found;
    for (const auto& [word, op] : kWords)
        if (contains(n, word)) found.insert(op);
    return found.size() == 1 ? *found.begin() : std::string();
}

double bus_factor_of(const std::string& op, int group) {
    Descriptor d;
    d.kind = OpKind::collective;
    d.op = op;
    d.group_size = group;
    return d.bus_factor();
}

// A JSON document rather than a text log: nccl-tests -J output, or a JSON export of some tool.
bool looks_like_json(std::string_view text, int& line) {
    line = 1;
    for (std::size_t i = 0; i < text.size(); ++i) {
        const char c = text[i];
        if (c == '\n') ++line;
        if (c == ' ' || c == '\t' || c == '\r' || c == '\n') continue;
        if (c == '{') return true;
        if (c != '[') return false;
        // "[1,0]<stdout>:" is a launcher prefix; "[{" or "[]" is JSON.
        const auto next = text.find_first_not_of(" \t\r\n", i + 1);
        return next != std::string_view::npos && (text[next] == '{' || text[next] == ']');
    }
    return false;
}

struct RankLine {
    int rank = 0;
    int group = 0;
    std::string host;
    std::string gpu;
    int line = 0;
};

// "#  Rank  0 Group  0 Pid  54740 on     thanos device  0 [0x07] NVIDIA A100-SXM4-80GB" (current),
// "#   Rank  0 Pid 112424 on localhost device  0 [0x00] A100-SXM4-40GB" (old). `rest`: the text
// after '#', tokens: its tokens.
std::optional<RankLine> parse_rank_line(std::string_view rest, const std::vector<Token>& t, int col_of_rest) {
    if (t.size() < 4 || t[0].text != "Rank") return std::nullopt;
    std::int64_t rank = 0, group = 0;
    if (!parse_int(t[1].text, rank) || rank < 0 || rank > 1000000) return std::nullopt;
    std::size_t i = 2;
    if (t[i].text == "Group") {
        if (i + 1 >= t.size() || !parse_int(t[i + 1].text, group)) return std::nullopt;
        i += 2;
    }
    while (i < t.size() && t[i].text != "on") ++i;
    if (i + 1 >= t.size()) return std::nullopt;
    RankLine r;
    r.rank = static_cast<int>(rank);
    r.group = static_cast<int>(std::clamp<std::int64_t>(group, -1000000, 1000000));
    r.host = utf8(t[i + 1].text);
    // The device name: what follows the bus id "[0x07]" / "[0000:04:00]".
    for (std::size_t j = i + 2; j < t.size(); ++j) {
        if (t[j].text.front() != '[' || t[j].text.back() != ']') continue;
        const auto from = static_cast<std::size_t>(t[j].col - col_of_rest) + t[j].text.size();
        if (from <= rest.size()) r.gpu = utf8(trim(rest.substr(from)));
        break;
    }
    return r;
}

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
double algbw_of(double bytes, double time_us) { return bytes / (time_us * 1e3); }
bool within_print(double printed, double half, double computed, double time_rel) {
    const double tol = (half + computed * time_rel) * 1.01 + 1e-9;
    return std::abs(printed - computed) <= tol;
}

std::string gbps(double v) { return fmt::format("{:.4g} GB/s", v); }

} // namespace

// ---- nccl-tests logs ---------------------------------------------------------------------------

namespace {

// A nccl-tests time longer than this per call is not a collective measurement (and beyond what
// the profile's times hold): an hour, in microseconds.
constexpr double kMaxCallUs = 3.6e9;

// -I statistics of iterations of `agg` calls (-m), per call.
void per_call(NcclTestsIterStats& st, int agg) {
    for (double* x : {&st.min_us, &st.max_us, &st.p99_us}) *x /= agg;
    if (st.p50_us) *st.p50_us /= agg;
    for (double& x : st.times_us) x /= agg;
}

// One log read line by line (read_line), then settled: the group (settle_group), the op
// (settle_op), every row against both (check_rows) and the samples (make_samples). Each step adds
// to log.problems and returns false when the next one has nothing to work on.
class LogReader {
public:
    LogReader(NcclTestsLog& log, const NcclTestsOptions& opts) : log_(log), opts_(opts) {}

    void read_line(int line_no, std::string_view line);
    void read_json(const json& doc);
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
    void read_json_row(const json& result, const std::string& key);
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

void LogReader::read_line(int line_no, std::string_view line) {
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    const std::size_t pre = prefix_length(line);
    const std::string_view s = line.substr(pre);
    const int col0 = static_cast<int>(pre) + 1;
    const std::string_view ts = trim(s);
    if (ts.empty()) return;
    if (ts[0] != '#' || contains(ts, "_perf")) {
        for (const auto& b : perf_binaries(ts)) {
            const std::string op = op_of_name(b);
            if (!op.empty()) binaries_.emplace(op, fmt::format("on line {}", line_no));
            else unsupported_binaries_.emplace(b + "_perf", line_no);
        }
    }
    if (const auto v = ts.find("NCCL version "); v != std::string_view::npos && log_.nccl_version.empty()) {
        const auto vt = tokenize(ts.substr(v + 13), 1);
        if (!vt.empty()) log_.nccl_version = utf8(vt[0].text);
    }
    if (ts[0] == '#') {
        read_comment(line_no, s, col0);
        return;
    }
    const auto t = tokenize(s, col0);
    std::int64_t size = 0, count = 0;
    if (t.size() >= 2 && parse_int(t[0].text, size) && parse_int(t[1].text, count)) {
        read_row(line_no, size, count, t);
        return;
    }
    if (contains(ts, "NCCL INFO") || contains(ts, "NCCL WARN") || contains(ts, "NCCL TRACE"))
        ++log_.skipped["NCCL log lines"];
    else if (ts == "..." || ts == "\xe2\x80\xa6" || contains(lower(ts), "truncated") ||
             ts.find_first_not_of("-=~. ") == std::string_view::npos)
        ++log_.skipped["'...' or truncation markers"];
    else if (ts[0] == '$' || ts[0] == '>' || contains(ts, "_perf") ||
             (contains(ts, "@") && (contains(ts, "$ ") || contains(ts, "# "))))
        ++log_.skipped["command or prompt lines"];
    else ++log_.skipped["other text"];
}

// "# nThread ...", "# nccl-tests version ...", "#  Rank ...", the column header; other comments.
void LogReader::read_comment(int line_no, std::string_view s, int col0) {
    const std::size_t hash = s.find('#');
    const std::string_view rest = s.substr(hash + 1);
    const int rest_col = col0 + static_cast<int>(hash) + 1;
    const auto t = tokenize(rest, rest_col);
    if (t.empty()) return;
    if (t[0].text == "nThread") {
        if (header_line_ > 0 && !raw_.empty()) {
            problem(line_no, t[0].col,
                    fmt::format("a second nccl-tests run starts here (the first at line {}): import one run per file",
                                header_line_));
            stopped_ = true;
            return;
        }
        header_line_ = line_no;
        for (std::size_t i = 0; i + 1 < t.size(); ++i) {
            std::int64_t v = 0;
            if (!parse_int(t[i + 1].text, v) || v < 0 || v > 1000000) continue;
            const int iv = static_cast<int>(v);
            if (t[i].text == "nThread") nthread_ = iv;
            else if (t[i].text == "nGpus") ngpus_ = iv;
            else if (t[i].text == "iters:") {
                const std::string_view before = i > 0 ? t[i - 1].text : std::string_view();
                if (before == "warmup") log_.warmup_iters = iv;
                else if (before == "agg") log_.agg_iters = iv;
                else log_.iters = iv;
            }
        }
    } else if (t.size() >= 3 && t[0].text == "nccl-tests" && t[1].text == "version") {
        log_.tests_version = utf8(t[2].text);
        for (const auto& x : t) {
            std::int64_t code = 0;
            if (x.text.starts_with("nccl-library=") && parse_int(x.text.substr(13), code) && code > 0 &&
                code < 1000000 && log_.nccl_version.empty())
                log_.nccl_version = decode_nccl_version(code);
        }
    } else if (t[0].text == "Rank") {
        if (auto r = parse_rank_line(rest, t, rest_col)) {
            r->line = line_no;
            ranks_.emplace(r->rank, *r);
        } else {
            ++log_.skipped["unreadable Rank lines"];
            if (unreadable_rank_line_ == 0) unreadable_rank_line_ = line_no;
        }
    } else {
        // The column header: "#wrong" (current releases) counts wrong elements per row;
        // "error" (old releases) is a maximum deviation, not checked.
        bool names_size = false;
        for (std::size_t i = 0; i < t.size(); ++i) {
            names_size = names_size || t[i].text == "size";
            if (t[i].text == "#wrong") wrong_column_ = true;
            if (names_size && !time_column_ && (t[i].text == "time" || t[i].text == "cputime")) time_column_ = i;
            // -I: i_min i_max i_p99 i_cv% after the out-of-place #wrong (and #bitdiff).
            if (time_column_ && !iter_offset_ && t[i].text == "i_min") iter_offset_ = i - *time_column_;
        }
    }
}

// A line that starts with two whole numbers: size, count, type, [redop], [root], then out-of-place
// time, algbw, busbw, #wrong / error, and the in-place columns.
void LogReader::read_row(int line_no, std::int64_t size, std::int64_t count, const std::vector<Token>& t) {
    if (size < 0 || count < 0) {
        problem(line_no, t[0].col, "negative size or count");
        return;
    }
    if (t.size() < 3 || !is_alpha_token(t[2].text)) {
        problem(line_no, t.size() < 3 ? t[1].col + static_cast<int>(t[1].text.size()) : t[2].col,
                "not a table row: expected size, count and an element type (a cut or edited row?)");
        return;
    }
    if (size == 0) {
        ++log_.skipped["rows of size 0 (no data)"];
        return;
    }
    RawRow r;
    r.row.line = line_no;
    r.row.bytes = static_cast<double>(size);
    r.row.type = utf8(t[2].text);
    r.dtype = dtype_of(t[2].text);
    if (r.dtype.empty()) {
        problem(line_no, t[2].col, fmt::format("unknown element type '{}'", r.row.type));
        return;
    }
    // The out-of-place (time, algbw) pair: the first two numbers after the type whose algbw is
    // size / time within print rounding. Robust to a missing or blank redop column, a root
    // column, and extra columns after it (per-iteration statistics, timestamps). It must lie
    // where the header puts the time (or, without a header, be the first or second number after
    // the type: a root may come first), so that a corrupt out-of-place part is not read from the
    // in-place columns.
    std::size_t first_number = 0;
    for (std::size_t i = 3; i < t.size() && first_number == 0; ++i) {
        double x = 0;
        if (parse_real(t[i].text, x)) first_number = i;
    }
    const std::size_t last_start = time_column_ ? *time_column_ : first_number + 1;
    std::size_t at = 0;
    for (std::size_t i = 3; i + 2 < t.size() && i <= last_start && at == 0; ++i) {
        double tu = 0, a = 0, b = 0;
        if (!parse_real(t[i].text, tu) || !parse_real(t[i + 1].text, a) || !parse_real(t[i + 2].text, b)) continue;
        if (!(tu > 0) || a < 0 || b < 0) continue;
        const double trel = half_ulp(t[i].text) / std::max(tu - half_ulp(t[i].text), tu * 1e-3);
        if (!within_print(a, half_ulp(t[i + 1].text), algbw_of(r.row.bytes, tu), trel)) continue;
        at = i;
        r.row.time_us = tu;
        r.row.algbw_gbps = a;
        r.row.busbw_gbps = b;
        r.time_rel = trel;
        r.busbw_half = half_ulp(t[i + 2].text);
        r.busbw_col = t[i + 2].col;
    }
    if (at == 0) {
        problem(line_no, t.size() > 3 ? t[3].col : t[2].col + static_cast<int>(t[2].text.size()),
                "no out-of-place time: no two numbers after the type with algbw = size / time (a cut or edited row?)");
        return;
    }
    if (r.row.time_us > kMaxCallUs) {
        problem(line_no, t[at].col,
                fmt::format("a time of {} us (over an hour per call) is not a collective measurement", t[at].text));
        return;
    }
    for (std::size_t i = 3; i < at; ++i)
        if (is_alpha_token(t[i].text) && t[i].text != "none") r.reduces = true;
    if (iter_offset_) {
        const std::size_t b = at + *iter_offset_;
        std::array<double, 4> v{};  // i_min i_max i_p99 i_cv%
        bool ok = b + 3 < t.size();
        for (std::size_t k = 0; ok && k < 4; ++k) ok = parse_real(t[b + k].text, v[k]) && (k == 0 ? v[k] > 0 : v[k] >= 0);
        if (!ok) {
            problem(line_no, b < t.size() ? t[b].col : t.back().col,
                    "the header names -I per-iteration columns (i_min i_max i_p99 i_cv%) but this row does not "
                    "have four numbers there (i_min above zero, the others not negative)");
            return;
        }
        const double slack = 1.01 * (half_ulp(t[b].text) + half_ulp(t[b + 1].text) + half_ulp(t[b + 2].text));
        if (v[0] > v[2] + slack || v[2] > v[1] + slack) {
            problem(line_no, t[b].col,
                    fmt::format("per-iteration times out of order: i_min {} <= i_p99 {} <= i_max {} does not hold",
                                t[b].text, t[b + 2].text, t[b + 1].text));
            return;
        }
        NcclTestsIterStats st{v[0], v[1], v[2], v[3], std::nullopt, {}};
        // -m: per iteration or per call, as in JSON; i_min tells (the mean is not printed).
        if (const int agg = log_.agg_iters.value_or(1);
            agg > 1 && std::abs(std::log(v[0] / (r.row.time_us * agg))) < std::abs(std::log(v[0] / r.row.time_us)))
            per_call(st, agg);
        r.row.per_iter = std::move(st);
    }
    if (wrong_column_ && at + 3 < t.size()) {
        std::int64_t wrong = 0;
        if (parse_int(t[at + 3].text, wrong) && wrong > 0)
            problem(line_no, t[at + 3].col,
                    fmt::format("{} wrong elements: the run failed nccl-tests' data check, its times are not a "
                                "clean measurement",
                                wrong));
    }
    raw_.push_back(std::move(r));
}

// ---- nccl-tests -J JSON ------------------------------------------------------------------------
//
// The layout nccl-tests' src/util.cu writes (JSON_FILE_VERSION 1-3), one line, streamed while the
// run goes: {version, start_time, args[], env[], nccl_version, config{nthreads, ngpus, ...,
// warmup_iters, iterations, aggregated_iterations, devices[{rank, group, hostname, device_info}]},
// results[{size, count, type, redop, root, out_of_place{time | cpu_time, alg_bw, bus_bw, nwrong}
// | null, out_of_place_per_iter{...}, in_place{...}, in_place_per_iter{...}}], ...}. Numbers are
// printed with "%lf" (6 decimals), NaN as the string "nan", booleans as strings.

// Half a unit of "%lf"'s last digit.
constexpr double kJsonHalfUlp = 5e-7;

std::optional<double> json_number(const json& o, const char* key) {
    if (!o.is_object()) return std::nullopt;
    const auto it = o.find(key);
    if (it == o.end() || !it->is_number()) return std::nullopt;
    const double v = it->get<double>();
    return std::isfinite(v) ? std::optional<double>(v) : std::nullopt;
}

std::string json_string(const json& o, const char* key) {
    if (!o.is_object()) return {};
    const auto it = o.find(key);
    return it != o.end() && it->is_string() ? utf8(it->get<std::string>()) : std::string();
}

std::optional<int> json_count(const json& o, const char* key) {
    const auto v = json_number(o, key);
    if (!v || *v < 0 || *v > 1e6 || *v != std::floor(*v)) return std::nullopt;
    return static_cast<int>(*v);
}

void LogReader::read_json(const json& doc) {
    if (!doc.is_object() || (!doc.contains("results") && !doc.contains("config"))) {
        json_problem("", "a JSON document without 'config' or 'results': not nccl-tests -J output");
        return;
    }
    const auto version = json_count(doc, "version");
    log_.format = version ? fmt::format("JSON v{}", *version) : "JSON (no version)";
    if (const auto it = doc.find("args"); it != doc.end() && it->is_array()) {
        for (std::size_t i = 0; i < it->size(); ++i) {
            if (!(*it)[i].is_string()) continue;
            for (const auto& b : perf_binaries((*it)[i].get<std::string>())) {
                const std::string op = op_of_name(b);
                if (!op.empty()) binaries_.emplace(op, fmt::format("in args[{}]", i));
                else unsupported_binaries_.emplace(utf8(b) + "_perf", 0);
            }
        }
    }
    if (const auto code = json_number(doc, "nccl_version"); code && *code > 0 && *code < 1e6)
        log_.nccl_version = decode_nccl_version(static_cast<std::int64_t>(*code));
    static const json kNoConfig = json::object();
    const json& config = doc.contains("config") ? doc.at("config") : kNoConfig;  // a reference: no copy
    nthread_ = json_count(config, "nthreads");
    ngpus_ = json_count(config, "ngpus");
    log_.warmup_iters = json_count(config, "warmup_iters");
    log_.iters = json_count(config, "iterations");
    log_.agg_iters = json_count(config, "aggregated_iterations");
    // One devices entry per process: src/util.cu parses the first "#  Rank" line of each process's
    // report, so a process driving nThread x nGpus GPUs appears once, as its first rank.
    const json* devices = nullptr;
    if (config.is_object() && config.contains("devices")) devices = &config["devices"];
    else if (doc.contains("devices")) devices = &doc["devices"];
    if (devices != nullptr && devices->is_array()) {
        constexpr std::int64_t kMaxRanks = 1000000;
        const std::int64_t per_entry =
            std::max<std::int64_t>(1, std::int64_t{nthread_.value_or(1)} * ngpus_.value_or(1));
        rank_source_ = fmt::format("ranks of config.devices ({} per entry)", per_entry);
        for (std::size_t i = 0; i < devices->size(); ++i) {
            const json& e = (*devices)[i];
            const auto rank = json_count(e, "rank");
            const auto group = json_number(e, "group");
            if (!rank || *rank + per_entry > kMaxRanks) {
                ++log_.skipped["unreadable devices entries"];
                if (unreadable_rank_line_ == 0) unreadable_rank_line_ = -1;
                continue;
            }
            for (std::int64_t k = 0; k < per_entry; ++k) {
                RankLine r;
                r.rank = static_cast<int>(*rank + k);
                r.group = group ? static_cast<int>(std::clamp(*group, -1e6, 1e6)) : 0;
                r.host = json_string(e, "hostname");
                r.gpu = json_string(e, "device_info");
                ranks_.emplace(r.rank, r);
            }
        }
    }
    const auto results = doc.find("results");
    if (results == doc.end() || !results->is_array()) {
        json_problem("results", "no 'results' list: the run stopped before its first size, or this is not nccl-tests "
                                "-J output");
        return;
    }
    for (std::size_t i = 0; i < results->size(); ++i) read_json_row((*results)[i], fmt::format("results[{}]", i));
}

void LogReader::read_json_row(const json& result, const std::string& key) {
    if (!result.is_object()) {
        json_problem(key, "not an object");
        return;
    }
    const auto size = json_number(result, "size");
    const auto count = json_number(result, "count");
    if (!size || !count || *size < 0 || *count < 0 || *size > 1e18 || *size != std::floor(*size)) {
        json_problem(key + ".size", "size and count must be whole non-negative numbers");
        return;
    }
    if (*size == 0) {
        ++log_.skipped["rows of size 0 (no data)"];
        return;
    }
    RawRow r;
    r.row.bytes = *size;
    r.row.type = json_string(result, "type");
    r.dtype = dtype_of(r.row.type);
    if (r.dtype.empty()) {
        json_problem(key + ".type", fmt::format("unknown element type '{}'", r.row.type));
        return;
    }
    const std::string redop = json_string(result, "redop");
    r.reduces = is_alpha_token(redop) && redop != "none";
    // The out-of-place times, as in text; a trace replay writes only in-place ones.
    std::string part = "out_of_place";
    if (!result.contains(part) || !result[part].is_object()) {
        part = "in_place";
        if (!result.contains(part) || !result[part].is_object()) {
            json_problem(key, "neither out_of_place nor in_place times");
            return;
        }
        ++log_.skipped["rows with in-place times only (read those)"];
    }
    const json& t = result[part];
    r.row.key = key + "." + part;
    const auto time = json_number(t, "time") ? json_number(t, "time") : json_number(t, "cpu_time");
    const auto alg = json_number(t, "alg_bw");
    const auto bus = json_number(t, "bus_bw");
    if (!time || !(*time > 0) || !alg || !bus || *alg < 0 || *bus < 0) {
        json_problem(r.row.key, "time, alg_bw and bus_bw must be numbers, the time above zero (\"nan\": the run "
                                "measured nothing)");
        return;
    }
    if (*time > kMaxCallUs) {
        json_problem(r.row.key + ".time",
                     fmt::format("a time of {} us (over an hour per call) is not a collective measurement", *time));
        return;
    }
    r.row.time_us = *time;
    r.row.algbw_gbps = *alg;
    r.row.busbw_gbps = *bus;
    r.time_rel = kJsonHalfUlp / std::max(*time - kJsonHalfUlp, *time * 1e-3);
    r.busbw_half = kJsonHalfUlp;
    if (!within_print(*alg, kJsonHalfUlp, algbw_of(r.row.bytes, *time), r.time_rel)) {
        json_problem(r.row.key + ".alg_bw",
                     fmt::format("alg_bw {} is not size / time = {} (edited or corrupt)", gbps(*alg),
                                 gbps(algbw_of(r.row.bytes, *time))));
        return;
    }
    if (const auto wrong = json_number(t, "nwrong"); wrong && *wrong > 0)
        json_problem(r.row.key + ".nwrong",
                     fmt::format("{} wrong elements: the run failed nccl-tests' data check, its times are not a clean "
                                 "measurement",
                                 *wrong));
    const std::string iter_key = part + "_per_iter";
    if (result.contains(iter_key) && result[iter_key].is_object()) {
        const json& p = result[iter_key];
        const auto mn = json_number(p, "min_us"), mx = json_number(p, "max_us"), p99 = json_number(p, "p99_us"),
                   avg = json_number(p, "avg_us");
        const auto p50 = json_number(p, "p50_us");
        if (!mn || !mx || !p99 || !avg || !(*mn > 0) || *mn > *p99 || *p99 > *mx || (p50 && (*p50 < *mn || *p50 > *mx))) {
            json_problem(key + "." + iter_key, "min_us <= p50_us, p99_us <= max_us (above zero) and avg_us must be "
                                               "numbers");
            return;
        }
        NcclTestsIterStats st{*mn, *mx, *p99, std::max(0.0, json_number(p, "cv_pct").value_or(0)), p50, {}};
        // The times of the iterations the summary uses (it skips the first skipped_iterations).
        if (const auto it = p.find("times_us"); it != p.end() && it->is_array()) {
            const std::size_t skip = static_cast<std::size_t>(json_count(p, "skipped_iterations").value_or(0));
            for (std::size_t k = skip; k < it->size(); ++k)
                if ((*it)[k].is_number() && (*it)[k].get<double>() > 0) st.times_us.push_back((*it)[k].get<double>());
        }
        // Per call: an iteration of -m agg iters calls takes agg times one call; the mean time
        // says which the figures are.
        if (const int agg = log_.agg_iters.value_or(1);
            agg > 1 && *avg > 0 && std::abs(std::log(*avg / (*time * agg))) < std::abs(std::log(*avg / *time)))
            per_call(st, agg);
        // Times a sample can hold: from the print resolution up to an hour per call.
        const auto in_range = [](double us) { return us >= kJsonHalfUlp && us <= kMaxCallUs; };
        std::erase_if(st.times_us, [&](double us) { return !in_range(us); });
        if (!in_range(st.min_us) || !in_range(st.max_us) || !in_range(st.p99_us) || (st.p50_us && !in_range(*st.p50_us))) {
            json_problem(key + "." + iter_key, "per-iteration times outside the print resolution (5e-7 us) .. an hour per call");
            return;
        }
        r.row.per_iter = std::move(st);
    }
    raw_.push_back(std::move(r));
}

// Group size, nodes and scope. False when there is no row to go on with (reported) or a problem.
bool LogReader::settle_group() {
    const std::size_t line_problems = log_.problems.size();
    // The ranks of the first rank's group (several groups: NCCL_TESTS_SPLIT_MASK).
    std::vector<const RankLine*> members;
    std::set<int> groups;
    for (const auto& entry : ranks_) groups.insert(entry.second.group);
    for (const auto& entry : ranks_)
        if (entry.second.group == ranks_.begin()->second.group) members.push_back(&entry.second);
    if (!members.empty()) log_.gpu = members.front()->gpu;
    for (const RankLine* r : members)
        if (std::find(log_.hosts.begin(), log_.hosts.end(), r->host) == log_.hosts.end()) log_.hosts.push_back(r->host);
    const bool from_header = !opts_.group_size && unreadable_rank_line_ == 0 && members.empty() && nthread_ && ngpus_;

    if (opts_.group_size) {
        log_.group_size = *opts_.group_size;
        log_.group_size_source = "--group-size";
        if (!members.empty() && static_cast<int>(members.size()) != log_.group_size)
            log_.group_size_source += fmt::format(" (the log's Rank lines say {})", members.size());
    } else if (unreadable_rank_line_ > 0) {
        problem(unreadable_rank_line_, 1, "a Rank line that cannot be read: pass --group-size (and --nodes)");
    } else if (unreadable_rank_line_ < 0) {
        json_problem("config.devices",
                     "a devices entry without a rank (or past a million ranks): pass --group-size (and --nodes)");
    } else if (!members.empty()) {
        log_.group_size = static_cast<int>(members.size());
        log_.group_size_source = groups.size() > 1 ? fmt::format("{} {} of group {} ({} groups)", members.size(),
                                                                 rank_source_, members.front()->group, groups.size())
                                                   : fmt::format("{} {}", members.size(), rank_source_);
        const int last = members.back()->rank, first = members.front()->rank;
        if (groups.size() == 1 && (first != 0 || last + 1 != static_cast<int>(members.size()))) {
            const std::string msg = fmt::format("the {} are not ranks 0..{} (some are missing): pass --group-size",
                                                rank_source_, members.size() - 1);
            if (rank_source_ == "Rank lines") problem(members.front()->line, 1, msg);
            else json_problem("config.devices", msg);
        }
    } else if (from_header) {
        const std::int64_t n = std::int64_t{*nthread_} * *ngpus_;
        log_.group_size = static_cast<int>(std::min<std::int64_t>(n, 1000000000));
        log_.group_size_source = fmt::format(
            "header: nThread {} x nGpus {} (one process; pass --group-size for an MPI run)", *nthread_, *ngpus_);
    } else {
        problem(0, 0,
                "cannot tell the group size: no Rank lines and no '# nThread ... nGpus' header; pass --group-size");
    }
    if (opts_.nodes) {
        log_.nodes = *opts_.nodes;
        log_.nodes_source = "--nodes";
    } else if (!log_.hosts.empty()) {
        log_.nodes = static_cast<int>(log_.hosts.size());
        log_.nodes_source = "hosts of the " + rank_source_;
    } else if (from_header && log_.group_size > 0) {
        log_.nodes = 1;
        log_.nodes_source = "one process (header)";
    } else if (log_.group_size > 0) {
        problem(0, 0, "cannot tell how many hosts the ranks span: no Rank lines; pass --nodes");
    }
    if (log_.group_size == 1) problem(0, 0, "one rank: a collective over one GPU measures no communication");
    if (log_.group_size < 0 || log_.nodes < 0 || log_.group_size > 1000000 || log_.nodes > 1000000 ||
        log_.nodes > std::max(log_.group_size, 1))
        problem(0, 0, fmt::format("impossible group: {} ranks on {} nodes", log_.group_size, log_.nodes));
    log_.scope = log_.nodes > 1 ? "inter_node" : "intra_node";

    if (raw_.empty()) {
        // Without a row, the missing rows are the problem (not what they would have needed).
        log_.problems.resize(line_problems);
        if (log_.problems.empty())
            problem(0, 0,
                    log_.skipped.contains("rows of size 0 (no data)")
                        ? "no readable row: every table row has size 0"
                        : "no readable row: no nccl-tests table in this file (is it a log of *_perf?)");
        return false;
    }
    return log_.group_size >= 2 && log_.problems.empty();
}

// The op: --op, the binary the log names, the file name, or busbw / algbw with the redop.
bool LogReader::settle_op() {
    const int n = log_.group_size;
    if (!opts_.op.empty()) {
        log_.op = op_of_name(opts_.op);
        log_.op_source = "--op";
        if (log_.op.empty()) {
            log_.problems.push_back(model::Diagnostic{
                "--op", 0, 0, "",
                fmt::format("unknown op '{}' (all_reduce, all_gather, reduce_scatter, all_to_all or send_recv)",
                            opts_.op)});
            return false;
        }
        return true;
    }
    if (binaries_.size() == 1) {
        log_.op = binaries_.begin()->first;
        log_.op_source = fmt::format("binary name {}", binaries_.begin()->second);
        return true;
    }
    if (binaries_.empty() && !unsupported_binaries_.empty()) {
        const auto first = unsupported_binaries_.begin();
        problem(first->second, 1,
                fmt::format("this log is of {}: not a collective the simulator models (all_reduce, all_gather, "
                            "reduce_scatter, all_to_all, send_recv); pass --op if the name is misleading",
                            first->first));
        return false;
    }
    if (std::string by_name = op_from_file_name(log_.file); !by_name.empty()) {
        log_.op = std::move(by_name);
        log_.op_source = "file name";
        return true;
    }
    // Which nccl-tests bus factors every row fits (rows of a few printed digits fit all), among
    // the ops that print a reduction (all_reduce, reduce_scatter) or do not (the others).
    bool reduces = false, plain = false;
    for (const auto& r : raw_) (r.reduces ? reduces : plain) = true;
    std::set<std::string> ops;
    double factor = 0;
    for (const char* op : kOps) {
        const bool needs_reduction = std::string(op) == "all_reduce" || std::string(op) == "reduce_scatter";
        if (needs_reduction ? plain : reduces) continue;
        const double f = bus_factor_of(op, n);
        bool fits = true;
        for (const auto& r : raw_)
            fits = fits &&
                   within_print(r.row.busbw_gbps, r.busbw_half, f * algbw_of(r.row.bytes, r.row.time_us), r.time_rel);
        if (!fits) continue;
        ops.insert(op);
        factor = f;
    }
    if (ops.size() == 1) {
        log_.op = *ops.begin();
        log_.op_source = fmt::format("busbw / algbw = {:.4g} with {} reduction op", factor, reduces ? "a" : "no");
        return true;
    }
    std::string list;
    for (const auto& o : ops) list += (list.empty() ? "" : " or ") + o;
    problem(0, 0,
            fmt::format("cannot tell the op: neither the log nor the file name names the nccl-tests binary, and the "
                        "busbw / algbw ratio fits {} over {} ranks; pass --op",
                        ops.empty() ? std::string("no op") : list, n));
    return false;
}

// Every row against the op and group size: busbw = algbw x factor within print rounding.
bool LogReader::check_rows() {
    const int n = log_.group_size;
    const double f = bus_factor_of(log_.op, n);
    // Rows with bandwidths of a few printed digits tell factors apart; when every one of them
    // disagrees, the op or group size is wrong rather than the rows: one problem, not one per row.
    std::vector<const RawRow*> bad;
    std::size_t telling = 0, bad_telling = 0;
    const RawRow* largest_bad = nullptr;
    for (const auto& r : raw_) {
        const double expect = f * algbw_of(r.row.bytes, r.row.time_us);
        const bool tells = expect > 20.0 * (r.busbw_half + expect * r.time_rel);
        telling += tells ? 1 : 0;
        if (within_print(r.row.busbw_gbps, r.busbw_half, expect, r.time_rel)) continue;
        bad.push_back(&r);
        if (!tells) continue;
        ++bad_telling;
        // The largest row's ratio is the one printed with the most digits.
        if (largest_bad == nullptr || r.row.bytes > largest_bad->row.bytes) largest_bad = &r;
    }
    if (bad_telling == telling && telling >= 2) {
        const RawRow& r = *largest_bad;
        row_problem(r, r.busbw_col, ".bus_bw",
                fmt::format("busbw / algbw = {:.4g} in every row, not the factor {:.4g} of {} over {} ranks ({} from "
                            "{}): the op or the group size is wrong; pass --op / --group-size",
                            r.row.busbw_gbps / algbw_of(r.row.bytes, r.row.time_us), f, log_.op, n, log_.op,
                            log_.op_source));
        return false;
    }
    for (const RawRow* r : bad)
        row_problem(*r, r->busbw_col, ".bus_bw",
                fmt::format("busbw {} does not match algbw {} x {:.4g} ({} over {} ranks): the row is inconsistent "
                            "(edited or corrupt)",
                            gbps(r->row.busbw_gbps), gbps(algbw_of(r->row.bytes, r->row.time_us)), f, log_.op, n));
    return bad.empty();
}

// A row's statistics per call. nccl-tests prints one mean over iters x agg iters calls; -I adds
// the per-iteration spread: min, max and cv% in text, p50 and every iteration's time in JSON.
TimeStats time_stats(const NcclTestsRow& row, const Descriptor& d) {
    TimeStats t;
    const double mean = row.time_us * 1e-6;
    t.median = t.min = t.max = t.mean = t.p10 = t.p90 = mean;
    t.iters = d.iters;
    t.calls_per_sample = d.calls_per_sample;
    if (!row.per_iter) return t;
    const NcclTestsIterStats& p = *row.per_iter;
    if (p.times_us.size() >= 2) {
        std::vector<double> sec;
        sec.reserve(p.times_us.size());
        for (double x : p.times_us) sec.push_back(x * 1e-6);
        t = summarize(std::move(sec), d.calls_per_sample);
        return t;
    }
    // The printed mean is rank-averaged and the i_* the slowest process's: the mean can fall a
    // little outside [i_min, i_max], and a sample keeps min <= median <= max.
    if (p.p50_us) t.median = *p.p50_us * 1e-6;
    t.min = std::min({p.min_us * 1e-6, mean, t.median});
    t.max = std::max({p.max_us * 1e-6, mean, t.median});
    t.p10 = std::min(mean, t.median);  // unknown: the two central figures bracket them
    t.p90 = std::max(mean, t.median);
    t.stddev = p.cv_pct / 100.0 * mean;
    return t;
}

// One collective sample per row, as `measure` describes its collectives (plan.cpp).
void LogReader::make_samples() {
    std::string impl = "nccl-tests";
    if (!log_.tests_version.empty()) impl += " " + log_.tests_version;
    if (!log_.nccl_version.empty()) impl += ", NCCL " + log_.nccl_version;
    std::map<std::string, const RawRow*> key_row;
    for (const auto& r : raw_) {
        Descriptor d;
        d.kind = OpKind::collective;
        d.op = log_.op;
        d.dtype = r.dtype;
        d.group_size = log_.group_size;
        d.scope = log_.scope;
        d.bytes = r.row.bytes;
        d.label = fmt::format("{} over {} ranks, nccl-tests log {}", log_.op, log_.group_size, base_name(log_.file));
        d.warmup = log_.warmup_iters.value_or(0);
        d.iters = std::max(1, log_.iters.value_or(1));
        d.calls_per_sample = std::max(1, log_.agg_iters.value_or(1));
        d.flush_l2 = false;
        d.key = make_key(d);
        if (auto [it, fresh] = key_row.emplace(d.key, &r); !fresh) {
            row_problem(r, 1, "",
                        fmt::format("size {} of {} appears twice (also {}): import one run per file", r.row.bytes,
                                    r.row.type, (r.row.key.empty() ? "on " : "at ") + where(*it->second)));
            continue;
        }
        Sample s;
        s.desc = d;
        s.backend = "nccl-tests";
        s.impl = impl;
        s.time = time_stats(r.row, d);
        log_.rows.push_back(r.row);
        log_.samples.push_back(std::move(s));
    }
    if (!log_.problems.empty()) {
        log_.rows.clear();
        log_.samples.clear();
    }
}

} // namespace

NcclTestsLog parse_nccl_tests_log(std::string_view text, const std::string& file, const NcclTestsOptions& opts) {
    NcclTestsLog log;
    log.file = file;
    LogReader reader(log, opts);
    int json_line = 0;
    if (looks_like_json(text, json_line)) {
        json doc;
        try {
            doc = json::parse(text);
        } catch (const json::parse_error& e) {
            const auto [line, col] = model::line_col(text, e.byte > 0 ? e.byte - 1 : 0);
            const bool cut = e.byte >= text.size() || trim(text.substr(std::min(text.size(), e.byte - 1))).empty();
            log.problems.push_back(model::Diagnostic{
                file, line, col, "",
                cut ? "the JSON ends before it is complete: nccl-tests writes -J output as the run goes, so the run "
                      "stopped early (crashed, killed or still running); import its text output or rerun"
                    : fmt::format("not valid JSON: {}", e.what())});
            return log;
        } catch (const json::exception& e) {  // a number out of range ("1e999"), ...
            log.problems.push_back(model::Diagnostic{file, 0, 0, "", fmt::format("not valid JSON: {}", e.what())});
            return log;
        }
        reader.read_json(doc);
        if (reader.settle_group() && reader.settle_op() && reader.check_rows()) reader.make_samples();
        return log;
    }
    log.format = "text";
    int line_no = 0;
    std::size_t pos = 0;
    while (pos < text.size() && !reader.stopped()) {
        ++line_no;
        const std::size_t nl = text.find('\n', pos);
        reader.read_line(line_no, text.substr(pos, nl == std::string_view::npos ? std::string_view::npos : nl - pos));
        pos = nl == std::string_view::npos ? text.size() : nl + 1;
    }
    if (reader.settle_group() && reader.settle_op() && reader.check_rows()) reader.make_samples();
    return log;
}

// ---- GEMM CSV ----------------------------------------------------------------------------------

namespace {

struct Field {
    std::string_view text;  // trimmed, quotes removed
    int col = 0;            // 1-based column of the field's first character
};

std::vector<Field> split_csv(std::string_view line) {
    std::vector<Field> out;
    std::size_t b = 0;
    while (true) {
        const std::size_t e = line.find(',', b);
        std::string_view raw = line.substr(b, e == std::string_view::npos ? std::string_view::npos : e - b);
        const auto lead = raw.find_first_not_of(" \t");
        std::string_view f = trim(raw);
        if (f.size() >= 2 && f.front() == '"' && f.back() == '"') f = f.substr(1, f.size() - 2);
        out.push_back(Field{f, static_cast<int>(b + (lead == std::string_view::npos ? 0 : lead)) + 1});
        if (e == std::string_view::npos) break;
        b = e + 1;
    }
    return out;
}

bool is_gemm_dtype(std::string_view d) {
    for (const char* x : {"bf16", "fp16", "fp32", "fp8_e4m3", "fp8_e5m2xfp8_e4m3", "fp8_e4m3xfp8_e5m2"})
        if (d == x) return true;
    return false;
}

} // namespace

GemmCsv parse_gemm_csv(std::string_view text, const std::string& file) {
    GemmCsv csv;
    csv.file = file;
    auto problem = [&](int line, int col, const std::string& key, const std::string& msg) {
        csv.problems.push_back(model::Diagnostic{file, line, line > 0 ? std::max(col, 1) : 0, key, msg});
    };
    constexpr std::array<const char*, 6> kColumns{"m", "n", "k", "dtype", "time", "fast_accum"};
    std::array<int, 6> index{-1, -1, -1, -1, -1, -1};
    std::size_t columns = 0;
    bool have_header = false;
    std::map<std::string, int> key_line;
    int line_no = 0;
    std::size_t pos = 0;
    while (pos < text.size()) {
        ++line_no;
        const std::size_t nl = text.find('\n', pos);
        std::string_view line = text.substr(pos, nl == std::string_view::npos ? std::string_view::npos : nl - pos);
        pos = nl == std::string_view::npos ? text.size() : nl + 1;
        if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
        if (line_no == 1 && line.starts_with("\xef\xbb\xbf")) line.remove_prefix(3);  // UTF-8 byte order mark
        const std::string_view ts = trim(line);
        if (ts.empty()) continue;
        if (ts[0] == '#') {
            ++csv.skipped["comment lines"];
            continue;
        }
        const auto fields = split_csv(line);
        if (!have_header) {
            have_header = true;
            columns = fields.size();
            for (std::size_t i = 0; i < fields.size(); ++i) {
                const std::string name = lower(fields[i].text);
                const auto it = std::find(kColumns.begin(), kColumns.end(), name);
                if (it == kColumns.end()) {
                    problem(line_no, fields[i].col, "",
                            fmt::format("unknown column '{}' (m, n, k, dtype, time, and optionally fast_accum)",
                                        fields[i].text));
                    continue;
                }
                auto& idx = index[static_cast<std::size_t>(it - kColumns.begin())];
                if (idx >= 0) problem(line_no, fields[i].col, "", fmt::format("column '{}' given twice", name));
                idx = static_cast<int>(i);
            }
            for (std::size_t c = 0; c < 5; ++c)
                if (index[c] < 0)
                    problem(line_no, 1, "", fmt::format("missing column '{}' in the header", kColumns[c]));
            if (!csv.problems.empty()) return csv;
            continue;
        }
        if (fields.size() != columns) {
            problem(line_no, fields.back().col, "",
                    fmt::format("{} fields, the header has {}", fields.size(), columns));
            continue;
        }
        auto field = [&](std::size_t c) -> const Field& { return fields[static_cast<std::size_t>(index[c])]; };
        Descriptor d;
        d.kind = OpKind::gemm;
        d.op = "gemm";
        bool ok = true;
        std::array<std::int64_t*, 3> dims{&d.m, &d.n, &d.k};
        for (std::size_t c = 0; c < 3; ++c) {
            const Field& f = field(c);
            std::int64_t v = 0;
            if (!parse_int(f.text, v) || v <= 0 || v > (std::int64_t{1} << 24)) {
                problem(line_no, f.col, kColumns[c],
                        fmt::format("expected a positive whole number (at most 2^24), got '{}'", f.text));
                ok = false;
            } else {
                *dims[c] = v;
            }
        }
        const Field& dt = field(3);
        if (!is_gemm_dtype(dt.text)) {
            problem(line_no, dt.col, "dtype",
                    fmt::format("unknown GEMM element type '{}' (bf16, fp16, fp32, fp8_e4m3, fp8_e5m2xfp8_e4m3, "
                                "fp8_e4m3xfp8_e5m2)",
                                dt.text));
            ok = false;
        } else {
            d.dtype = std::string(dt.text);
        }
        const Field& tf = field(4);
        double seconds = 0;
        if (!parse_real(tf.text, seconds)) {
            try {
                seconds = model::parse_duration(tf.text).seconds();
            } catch (const model::UnitError& e) {
                problem(line_no, tf.col, "time", fmt::format("{} (a plain number is seconds)", e.what()));
                ok = false;
            } catch (const std::overflow_error& e) {
                problem(line_no, tf.col, "time", e.what());
                ok = false;
            }
        }
        if (ok && !(seconds > 0 && seconds < 3600)) {
            problem(line_no, tf.col, "time",
                    fmt::format("a GEMM time must be positive and under an hour, got '{}'", tf.text));
            ok = false;
        }
        if (index[5] >= 0) {
            const Field& fa = field(5);
            const std::string v = lower(fa.text);
            if (v == "true" || v == "1" || v == "yes") d.fast_accum = true;
            else if (v == "false" || v == "0" || v == "no" || v.empty()) d.fast_accum = false;
            else {
                problem(line_no, fa.col, "fast_accum", fmt::format("expected true or false, got '{}'", fa.text));
                ok = false;
            }
            if (ok && d.fast_accum && !d.dtype.starts_with("fp8")) {
                problem(line_no, fa.col, "fast_accum", "only FP8 GEMMs have a fast accumulator");
                ok = false;
            }
        }
        if (!ok) continue;
        d.algo = AlgoChoice::first;
        d.label = fmt::format("GEMM sweep {}:{}", base_name(file), line_no);
        d.warmup = 0;
        d.iters = 1;
        d.calls_per_sample = 1;
        d.flush_l2 = false;
        d.key = make_key(d);
        if (auto [it, fresh] = key_line.emplace(d.key, line_no); !fresh) {
            problem(line_no, 1, "", fmt::format("the same GEMM as line {} ({})", it->second, d.key));
            continue;
        }
        Sample s;
        s.desc = d;
        s.backend = "gemm-csv";
        s.impl = "gemm-csv";
        s.time.median = s.time.min = s.time.max = s.time.mean = s.time.p10 = s.time.p90 = seconds;
        s.time.iters = 1;
        s.time.calls_per_sample = 1;
        csv.samples.push_back(std::move(s));
        csv.lines.push_back(line_no);
    }
    if (!have_header) problem(0, 0, "", "empty file: no header (m,n,k,dtype,time) and no rows");
    else if (csv.samples.empty() && csv.problems.empty()) problem(0, 0, "", "no rows after the header");
    if (!csv.problems.empty()) {
        csv.samples.clear();
        csv.lines.clear();
    }
    return csv;
}

// ---- files -------------------------------------------------------------------------------------

std::string read_import_file(const fs::path& file) {
    std::error_code ec;
    if (fs::is_directory(file, ec)) throw CalibrationInputError(file.string(), "is a directory, not a log file");
    std::ifstream in(file, std::ios::binary);
    if (!in) throw CalibrationInputError(file.string(), fmt::format("cannot open: {}", std::strerror(errno)));
    std::ostringstream ss;
    ss << in.rdbuf();
    return ss.str();
}

std::vector<Sample> merge_imported(const std::vector<std::vector<Sample>>& per_file,
                                   std::vector<std::size_t>* replaced) {
    std::vector<Sample> out;
    std::map<std::string, std::size_t> at;
    if (replaced) replaced->assign(per_file.size(), 0);
    for (std::size_t f = 0; f < per_file.size(); ++f)
        for (const Sample& s : per_file[f]) {
            if (auto it = at.find(s.desc.key); it != at.end()) {
                out[it->second] = s;
                if (replaced) ++(*replaced)[f];
            } else {
                at.emplace(s.desc.key, out.size());
                out.push_back(s);
            }
        }
    return out;
}

namespace {

[[noreturn]] void io_failure(const fs::path& file, const char* what) {
    throw std::system_error(errno, std::generic_category(), fmt::format("{} '{}'", what, file.string()));
}

// text -> file through a temporary file in the same directory, flushed, then renamed over it.
void replace_file(const fs::path& file, const std::string& text) {
    const fs::path tmp = file.parent_path() / fmt::format(".{}.import-{}.tmp", file.filename().string(), ::getpid());
    const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0) io_failure(tmp, "cannot create");
    std::size_t off = 0;
    while (off < text.size()) {
        const ssize_t n = ::write(fd, text.data() + off, text.size() - off);
        if (n < 0 && errno == EINTR) continue;
        if (n < 0) {
            const int err = errno;
            ::close(fd);
            ::unlink(tmp.c_str());
            errno = err;
            io_failure(tmp, "cannot write");
        }
        off += static_cast<std::size_t>(n);
    }
    if (::fsync(fd) != 0 && errno != EINVAL) {
        const int err = errno;
        ::close(fd);
        ::unlink(tmp.c_str());
        errno = err;
        io_failure(tmp, "cannot flush");
    }
    ::close(fd);
    if (::rename(tmp.c_str(), file.c_str()) != 0) {
        const int err = errno;
        ::unlink(tmp.c_str());
        errno = err;
        io_failure(file, "cannot rename the new samples over");
    }
    // The rename on disk too (a crash right after keeps the new file).
    if (const int dfd = ::open(file.parent_path().c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC); dfd >= 0) {
        (void)::fsync(dfd);
        ::close(dfd);
    }
}

} // namespace

ImportWrite write_imported_samples(const fs::path& dir, const std::vector<Sample>& samples, ImportMode mode,
                                   json run_info) {
    ImportWrite w;
    w.samples = dir / kSamplesFile;
    std::error_code ec;
    fs::create_directories(dir, ec);
    if (ec) throw CalibrationInputError(dir.string(), "cannot create the output directory: " + ec.message());
    const auto lock = lock_run_dir(dir, "import");  // held until return: before reading what is there

    std::string text;
    const bool has_samples = fs::exists(w.samples, ec) && fs::file_size(w.samples, ec) > 0;
    if (has_samples && mode == ImportMode::create)
        throw CalibrationInputError(w.samples.string(),
                                    "already holds samples; pass --append to add to them or --force to replace them");
    if (has_samples && mode == ImportMode::append) {
        const SampleFile old = read_samples(w.samples);  // strict: the file must be whole to be extended
        std::map<std::string, int> old_line;
        for (std::size_t i = 0; i < old.samples.size(); ++i) old_line.emplace(old.samples[i].desc.key, old.lines[i]);
        std::vector<model::Diagnostic> clash;
        for (const Sample& s : samples)
            if (auto it = old_line.find(s.desc.key); it != old_line.end())
                clash.push_back(model::Diagnostic{w.samples.string(), it->second, 1, s.desc.key,
                                                  "already in this file: an import never replaces a sample (use "
                                                  "--force to replace the whole file, or another --out)"});
        if (!clash.empty()) throw CalibrationInputError(std::move(clash));
        std::ifstream in(w.samples, std::ios::binary);
        std::ostringstream ss;
        ss << in.rdbuf();
        text = ss.str();
        w.kept = old.samples.size();
    }
    for (const Sample& s : samples) text += to_json_line(s) + "\n";
    w.written = samples.size();
    replace_file(w.samples, text);

    run_info["samples_file"] = kSamplesFile;
    run_info["samples_written"] = w.written;
    run_info["samples_kept"] = w.kept;
    run_info["mode"] = mode == ImportMode::create ? "create" : mode == ImportMode::append ? "append" : "force";
    if (!run_info.contains("started_at")) run_info["started_at"] = utc_now();
    if (!run_info.contains("host")) run_info["host"] = host_name();
    // Command lines and file names are bytes, JSON is UTF-8: what is not is written as U+FFFD.
    run_info = json::parse(run_info.dump(-1, ' ', false, json::error_handler_t::replace));
    w.run_info = write_run_info(dir, run_info);
    return w;
}

// ---- summaries -----------------------------------------------------------------------------------

namespace {

std::string skipped_text(const std::map<std::string, int>& skipped) {
    if (skipped.empty()) return "none";
    std::string s;
    for (const auto& [why, count] : skipped) s += fmt::format("{}{} {}", s.empty() ? "" : ", ", count, why);
    return s;
}

std::string impl_of(const NcclTestsLog& log) { return log.samples.empty() ? std::string() : log.samples.front().impl; }

} // namespace

std::string format_summary(const NcclTestsLog& log) {
    std::string s = fmt::format("{}:\n", log.file);
    s += fmt::format("  op {} ({}), {} ranks ({}), {} node{} ({}{}), scope {}\n", log.op.empty() ? "?" : log.op,
                     log.op_source, log.group_size, log.group_size_source, log.nodes, log.nodes == 1 ? "" : "s",
                     log.nodes_source, log.hosts.empty() ? "" : ": " + fmt::format("{}", fmt::join(log.hosts, ", ")),
                     log.scope);
    s += fmt::format("  GPU {}, {}{}, {}\n", log.gpu.empty() ? "not stated" : log.gpu, impl_of(log),
                     log.iters ? fmt::format(", iters {}", *log.iters) : ", iters not stated", log.format);
    const auto with_iter = std::count_if(log.rows.begin(), log.rows.end(), [](const auto& r) { return r.per_iter; });
    if (with_iter > 0)
        s += fmt::format("  per-iteration statistics (-I) on {} of {} sizes: min, max and spread kept with each sample\n",
                         with_iter, log.rows.size());
    if (!log.rows.empty()) {
        double lo = log.rows.front().bytes, hi = lo;
        for (const auto& r : log.rows) {
            lo = std::min(lo, r.bytes);
            hi = std::max(hi, r.bytes);
        }
        s += fmt::format("  imported {} sizes, {} .. {} ({} .. {} B)\n", log.rows.size(),
                         model::format_bytes(model::Bytes(lo)), model::format_bytes(model::Bytes(hi)), lo, hi);
    }
    s += fmt::format("  skipped: {}\n", skipped_text(log.skipped));
    return s;
}

std::string format_summary(const GemmCsv& csv) {
    std::set<std::string> dtypes;
    for (const auto& x : csv.samples) dtypes.insert(x.desc.dtype);
    return fmt::format("{}:\n  imported {} GEMMs ({})\n  skipped: {}\n", csv.file, csv.samples.size(),
                       fmt::join(dtypes, ", "), skipped_text(csv.skipped));
}

json to_json(const NcclTestsLog& log) {
    json j;
    j["file"] = utf8(log.file);
    j["op"] = log.op;
    j["op_source"] = log.op_source;
    j["group_size"] = log.group_size;
    j["group_size_source"] = log.group_size_source;
    j["nodes"] = log.nodes;
    j["nodes_source"] = log.nodes_source;
    j["hosts"] = log.hosts;
    j["scope"] = log.scope;
    j["gpu"] = log.gpu;
    j["impl"] = impl_of(log);
    j["tests_version"] = log.tests_version;
    j["nccl_version"] = log.nccl_version;
    j["iters"] = log.iters ? json(*log.iters) : json(nullptr);
    j["format"] = log.format;
    j["rows"] = log.rows.size();
    j["rows_with_per_iteration"] =
        std::count_if(log.rows.begin(), log.rows.end(), [](const auto& r) { return r.per_iter.has_value(); });
    double lo = 0, hi = 0;
    for (const auto& r : log.rows) {
        lo = lo == 0 ? r.bytes : std::min(lo, r.bytes);
        hi = std::max(hi, r.bytes);
    }
    j["min_bytes"] = lo;
    j["max_bytes"] = hi;
    j["skipped"] = log.skipped;
    return j;
}

json to_json(const GemmCsv& csv) {
    json j;
    j["file"] = utf8(csv.file);
    j["rows"] = csv.samples.size();
    std::set<std::string> dtypes;
    for (const auto& s : csv.samples) dtypes.insert(s.desc.dtype);
    j["dtypes"] = dtypes;
    j["skipped"] = csv.skipped;
    return j;
}

} // namespace trainsim::calibrate
