// nccl-tests -J JSON, read into the reader the text logs fill too (nccl_tests_reader.hpp).
//
// The layout nccl-tests' src/util.cu writes (JSON_FILE_VERSION 1-3), one line, streamed while the
// run goes: {version, start_time, args[], env[], nccl_version, config{nthreads, ngpus, ...,
// warmup_iters, iterations, aggregated_iterations, devices[{rank, group, hostname, device_info}]},
// results[{size, count, type, redop, root, out_of_place{time | cpu_time, alg_bw, bus_bw, nwrong}
// | null, out_of_place_per_iter{...}, in_place{...}, in_place_per_iter{...}}], ...}. Numbers are
// printed with "%lf" (6 decimals), NaN as the string "nan", booleans as strings.
#include "nccl_tests_reader.hpp"

#include <fmt/format.h>

#include <algorithm>

namespace trainsim::calibrate::detail {

using nlohmann::json;

namespace {

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

} // namespace

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

} // namespace trainsim::calibrate::detail
