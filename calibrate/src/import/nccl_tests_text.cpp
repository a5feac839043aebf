// nccl-tests text logs (the *_perf programs' stdout: releases 2.x, old and current table layouts,
// launcher prefixes, interleaved NCCL log lines, the -I per-iteration columns), read line by line
// into the reader (nccl_tests_reader.hpp).
#include "nccl_tests_reader.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>

namespace trainsim::calibrate::detail {

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

} // namespace trainsim::calibrate::detail
