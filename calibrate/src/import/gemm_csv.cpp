// GEMM sweeps as CSV (m,n,k,dtype,time): one GEMM sample per row.
#include "trainsim/calibrate/import/import.hpp"
#include "trainsim/model/core/units.hpp"

#include "import_text.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <set>

namespace trainsim::calibrate {

using namespace detail;
using nlohmann::json;

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

std::string format_summary(const GemmCsv& csv) {
    std::set<std::string> dtypes;
    for (const auto& x : csv.samples) dtypes.insert(x.desc.dtype);
    return fmt::format("{}:\n  imported {} GEMMs ({})\n  skipped: {}\n", csv.file, csv.samples.size(),
                       fmt::join(dtypes, ", "), skipped_text(csv.skipped));
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
