#include "trainsim/calibrate/samples/sample.hpp"

#include "trainsim/calibrate/core/calibrate_error.hpp"
#include "trainsim/model/core/file_io.hpp"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <fstream>
#include <limits>
#include <map>
#include <numeric>
#include <sstream>
#include <system_error>

namespace trainsim::calibrate {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

// Linear interpolation between order statistics (the "R-7" definition numpy uses).
double quantile(const std::vector<double>& sorted, double q) {
    const double pos = q * static_cast<double>(sorted.size() - 1);
    const auto lo = static_cast<std::size_t>(std::floor(pos));
    const std::size_t hi = std::min(lo + 1, sorted.size() - 1);
    return sorted[lo] + (pos - static_cast<double>(lo)) * (sorted[hi] - sorted[lo]);
}

template <class T> void put_optional(json& j, const char* name, const std::optional<T>& v) {
    if (v) j[name] = *v;
}

// Field access with the reason spelled out for the error message.
const json& field(const json& j, const char* name, const std::string& where) {
    if (!j.is_object() || !j.contains(name))
        throw std::runtime_error(fmt::format("missing field '{}{}'", where, name));
    return j.at(name);
}
std::string get_string(const json& j, const char* name, const std::string& where = "") {
    const json& v = field(j, name, where);
    if (!v.is_string()) throw std::runtime_error(fmt::format("field '{}{}' must be a string", where, name));
    return v.get<std::string>();
}
double get_number(const json& j, const char* name, const std::string& where = "") {
    const json& v = field(j, name, where);
    if (!v.is_number()) throw std::runtime_error(fmt::format("field '{}{}' must be a number", where, name));
    return v.get<double>();
}
// An integer in [lo, hi]. nlohmann reads integers past INT64_MAX (2^63 and up) as unsigned:
// read as signed they would wrap to negative numbers, so the range is checked on the value as
// written.
std::int64_t get_int(const json& j, const char* name, const std::string& where = "",
                     std::int64_t lo = std::numeric_limits<std::int64_t>::min(),
                     std::int64_t hi = std::numeric_limits<std::int64_t>::max()) {
    const json& v = field(j, name, where);
    if (!v.is_number_integer()) throw std::runtime_error(fmt::format("field '{}{}' must be an integer", where, name));
    const bool too_large = v.is_number_unsigned() ? v.get<std::uint64_t>() > static_cast<std::uint64_t>(hi)
                                                  : v.get<std::int64_t>() > hi;
    if (too_large)
        throw std::runtime_error(fmt::format("field '{}{}' = {} is out of range: at most {}", where, name, v.dump(), hi));
    if (!v.is_number_unsigned() && v.get<std::int64_t>() < lo)
        throw std::runtime_error(fmt::format("field '{}{}' = {} is out of range: at least {}", where, name, v.dump(), lo));
    return v.get<std::int64_t>();
}
// A count that is an int inside trainsim (group sizes, timing loop counts).
int get_int32(const json& j, const char* name, const std::string& where = "") {
    return static_cast<int>(get_int(j, name, where, 0, std::numeric_limits<int>::max()));
}
bool get_bool(const json& j, const char* name, const std::string& where = "") {
    const json& v = field(j, name, where);
    if (!v.is_boolean()) throw std::runtime_error(fmt::format("field '{}{}' must be true or false", where, name));
    return v.get<bool>();
}
template <class T> std::optional<T> get_optional(const json& j, const char* name) {
    if (!j.is_object() || !j.contains(name) || j.at(name).is_null()) return std::nullopt;
    if (!j.at(name).is_number()) throw std::runtime_error(fmt::format("field 'telemetry.{}' must be a number", name));
    return j.at(name).get<T>();
}

OpKind kind_of(const std::string& s) {
    for (auto k : {OpKind::gemm, OpKind::attention, OpKind::memory, OpKind::collective, OpKind::overlap})
        if (s == to_string(k)) return k;
    throw std::runtime_error("unknown kind '" + s + "' (gemm, attention, memory, collective, overlap)");
}

json shape_json(const Descriptor& d) {
    switch (d.kind) {
    case OpKind::gemm:
        return {{"m", d.m}, {"n", d.n}, {"k", d.k}, {"algo", to_string(d.algo)}, {"fast_accum", d.fast_accum}};
    case OpKind::attention:
        return {{"batch_heads", d.batch_heads}, {"seq", d.seq}, {"head_dim", d.head_dim}, {"causal", d.causal}};
    case OpKind::memory: return {{"elements", d.elements}, {"row", d.row}};
    case OpKind::collective: return {{"bytes", d.bytes}, {"group_size", d.group_size}, {"scope", d.scope}};
    case OpKind::overlap:
        return {{"m", d.m}, {"n", d.n}, {"k", d.k}, {"group_size", d.group_size}, {"scope", d.scope},
                {"comm_bytes", d.comm_bytes}};
    }
    return json::object();
}

void read_shape(const json& s, Descriptor& d) {
    const std::string w = "shape.";
    switch (d.kind) {
    case OpKind::gemm: {
        d.m = get_int(s, "m", w);
        d.n = get_int(s, "n", w);
        d.k = get_int(s, "k", w);
        const std::string algo = get_string(s, "algo", w);
        if (algo != "first" && algo != "best") throw std::runtime_error("field 'shape.algo' must be first or best");
        d.algo = algo == "first" ? AlgoChoice::first : AlgoChoice::best;
        d.fast_accum = get_bool(s, "fast_accum", w);
        break;
    }
    case OpKind::attention:
        d.batch_heads = get_int(s, "batch_heads", w);
        d.seq = get_int(s, "seq", w);
        d.head_dim = get_int(s, "head_dim", w);
        d.causal = get_bool(s, "causal", w);
        break;
    case OpKind::memory:
        d.elements = get_int(s, "elements", w);
        d.row = get_int(s, "row", w);
        break;
    case OpKind::collective:
        d.bytes = get_number(s, "bytes", w);
        d.group_size = get_int32(s, "group_size", w);
        d.scope = get_string(s, "scope", w);
        break;
    case OpKind::overlap:
        d.m = get_int(s, "m", w);
        d.n = get_int(s, "n", w);
        d.k = get_int(s, "k", w);
        d.group_size = get_int32(s, "group_size", w);
        d.scope = get_string(s, "scope", w);
        d.comm_bytes = get_number(s, "comm_bytes", w);
        break;
    }
}

[[noreturn]] void io_error(const fs::path& file, const char* what) {
    throw std::system_error(errno, std::generic_category(), fmt::format("{} '{}'", what, file.string()));
}

// Whole file as text; nullopt when it does not exist. A folder, FIFO or device, or a file over
// the data cap, is refused (SampleError naming what it is) instead of read without end.
std::optional<std::string> slurp(const fs::path& file) {
    std::error_code ec;
    if (!fs::exists(fs::symlink_status(file, ec))) return std::nullopt;
    try {
        return model::read_regular_file(file, model::kMaxDataFileBytes);
    } catch (const model::FileReadError& e) {
        throw SampleError({model::Diagnostic{file.string(), 0, 0, "", e.reason()}});
    }
}

// Ops, element types and shapes the fit knows how to normalise; anything else is bad data.
std::optional<std::string> invalid_descriptor(const Descriptor& d) {
    auto one_of = [&](std::initializer_list<const char*> ops) {
        for (const char* o : ops)
            if (d.op == o) return true;
        return false;
    };
    bool op_ok = true;
    switch (d.kind) {
    case OpKind::gemm: op_ok = d.op == "gemm"; break;
    case OpKind::attention: op_ok = one_of({"attention_fwd", "attention_bwd"}); break;
    case OpKind::memory: op_ok = one_of({"copy", "triad", "rmsnorm", "adam", "cast_transpose"}); break;
    case OpKind::collective: op_ok = one_of({"all_reduce", "all_gather", "reduce_scatter", "all_to_all", "send_recv"}); break;
    case OpKind::overlap:
        op_ok =
            one_of({"gemm_alone", "gemm_under_all_reduce", "gemm_sustained_alone", "gemm_sustained_under_all_reduce"});
        break;
    }
    if (!op_ok) return fmt::format("unknown op '{}' for kind {}", d.op, to_string(d.kind));
    try {
        (void)d.bytes_moved();
    } catch (const std::exception& e) {
        return std::string(e.what());
    }
    const bool gemm_like = d.kind == OpKind::gemm || d.kind == OpKind::overlap;
    if ((gemm_like && (d.m <= 0 || d.n <= 0 || d.k <= 0)) ||
        (d.kind == OpKind::attention && (d.batch_heads <= 0 || d.seq <= 0 || d.head_dim <= 0)) ||
        (d.kind == OpKind::memory && d.elements <= 0) ||
        (d.kind == OpKind::collective && (d.bytes <= 0 || d.group_size < 1)))
        return std::string("impossible shape: sizes must be positive");
    return std::nullopt;
}

model::Diagnostic diag(const fs::path& file, int line, std::string key, std::string message) {
    return model::Diagnostic{file.string(), line, line > 0 ? 1 : 0, std::move(key), std::move(message)};
}

} // namespace

TimeStats summarize(std::vector<double> t, int calls_per_sample) {
    TimeStats s;
    if (t.empty()) throw std::invalid_argument("summarize: no times");
    std::sort(t.begin(), t.end());
    s.iters = static_cast<int>(t.size());
    s.calls_per_sample = calls_per_sample;
    s.min = t.front();
    s.max = t.back();
    s.median = quantile(t, 0.5);
    s.p10 = quantile(t, 0.1);
    s.p90 = quantile(t, 0.9);
    s.mean = std::accumulate(t.begin(), t.end(), 0.0) / static_cast<double>(t.size());
    double ss = 0;
    for (double x : t) ss += (x - s.mean) * (x - s.mean);
    s.stddev = t.size() > 1 ? std::sqrt(ss / static_cast<double>(t.size() - 1)) : 0.0;
    return s;
}

double Sample::executed_flops() const {
    if (desc.kind == OpKind::attention && desc.causal && impl.starts_with("unfused")) {
        Descriptor full = desc;
        full.causal = false;
        return full.flops();
    }
    return desc.flops();
}

double Sample::flop_rate() const { return time.median > 0 ? executed_flops() / time.median : 0.0; }
double Sample::bandwidth() const { return time.median > 0 ? desc.bytes_moved() / time.median : 0.0; }
double Sample::algbw() const { return time.median > 0 ? desc.bytes / time.median : 0.0; }
double Sample::busbw() const { return algbw() * desc.bus_factor(); }

std::string to_json_line(const Sample& s) {
    const Descriptor& d = s.desc;
    json j;
    j["schema"] = kSampleSchema;
    j["key"] = d.key;
    j["status"] = s.status;
    if (!s.reason.empty()) j["reason"] = s.reason;
    j["backend"] = s.backend;
    j["impl"] = s.impl;
    j["kind"] = to_string(d.kind);
    j["op"] = d.op;
    j["dtype"] = d.dtype;
    j["label"] = d.label;
    j["shape"] = shape_json(d);
    j["timing"] = {{"warmup", d.warmup}, {"iters", d.iters}, {"calls_per_sample", d.calls_per_sample},
                   {"flush_l2", d.flush_l2}};
    j["flops"] = d.flops();
    j["bytes_moved"] = d.bytes_moved();
    if (s.ok()) {
        const TimeStats& t = s.time;
        j["time_s"] = {{"median", t.median}, {"min", t.min}, {"max", t.max}, {"mean", t.mean}, {"p10", t.p10},
                       {"p90", t.p90}, {"stddev", t.stddev}, {"spread", t.spread()}, {"iters", t.iters},
                       {"calls_per_sample", t.calls_per_sample}};
        // Derived rates, for people reading the file (fit recomputes them from the times).
        json rate;
        if (d.flops() > 0) rate["tflops"] = s.flop_rate() / 1e12;
        if (d.kind == OpKind::memory || d.kind == OpKind::attention) rate["gbps"] = s.bandwidth() / 1e9;
        if (d.kind == OpKind::collective) {
            rate["algbw_gbps"] = s.algbw() / 1e9;
            rate["busbw_gbps"] = s.busbw() / 1e9;
        }
        j["rate"] = rate;
        if (s.algo_count > 0) j["algo"] = {{"index", s.algo_index}, {"count", s.algo_count}};
        json tel = json::object();
        put_optional(tel, "sm_clock_mhz", s.telemetry.sm_clock_mhz);
        put_optional(tel, "mem_clock_mhz", s.telemetry.mem_clock_mhz);
        put_optional(tel, "temperature_c", s.telemetry.temperature_c);
        put_optional(tel, "power_w", s.telemetry.power_w);
        put_optional(tel, "throttle_reasons", s.telemetry.throttle_reasons);
        j["telemetry"] = tel;
    }
    j["measured_at"] = s.measured_at;
    return j.dump();
}

Sample sample_from_json_text(const std::string& line) {
    const json j = json::parse(line, nullptr, /*allow_exceptions=*/false);
    if (j.is_discarded()) throw std::runtime_error("malformed JSON");
    if (!j.is_object()) throw std::runtime_error("a sample is a JSON object");
    const auto schema = get_int(j, "schema");
    if (schema != kSampleSchema)
        throw std::runtime_error(fmt::format("schema {} is not the one this build reads ({})", schema, kSampleSchema));
    Sample s;
    Descriptor& d = s.desc;
    d.key = get_string(j, "key");
    s.status = get_string(j, "status");
    if (s.status != "ok" && s.status != "unsupported")
        throw std::runtime_error("field 'status' must be ok or unsupported, got '" + s.status + "'");
    if (j.contains("reason")) s.reason = get_string(j, "reason");
    s.backend = get_string(j, "backend");
    s.impl = get_string(j, "impl");
    d.kind = kind_of(get_string(j, "kind"));
    d.op = get_string(j, "op");
    d.dtype = get_string(j, "dtype");
    d.label = get_string(j, "label");
    read_shape(field(j, "shape", ""), d);
    const json& timing = field(j, "timing", "");
    d.warmup = get_int32(timing, "warmup", "timing.");
    d.iters = get_int32(timing, "iters", "timing.");
    d.calls_per_sample = get_int32(timing, "calls_per_sample", "timing.");
    d.flush_l2 = get_bool(timing, "flush_l2", "timing.");
    if (s.ok()) {
        const json& t = field(j, "time_s", "");
        const std::string w = "time_s.";
        s.time.median = get_number(t, "median", w);
        s.time.min = get_number(t, "min", w);
        s.time.max = get_number(t, "max", w);
        s.time.mean = get_number(t, "mean", w);
        s.time.p10 = get_number(t, "p10", w);
        s.time.p90 = get_number(t, "p90", w);
        s.time.stddev = get_number(t, "stddev", w);
        s.time.iters = get_int32(t, "iters", w);
        s.time.calls_per_sample = get_int32(t, "calls_per_sample", w);
        if (j.contains("algo")) {
            s.algo_index = get_int32(j.at("algo"), "index", "algo.");
            s.algo_count = get_int32(j.at("algo"), "count", "algo.");
        }
        if (j.contains("telemetry")) {
            const json& tel = j.at("telemetry");
            s.telemetry.sm_clock_mhz = get_optional<int>(tel, "sm_clock_mhz");
            s.telemetry.mem_clock_mhz = get_optional<int>(tel, "mem_clock_mhz");
            s.telemetry.temperature_c = get_optional<int>(tel, "temperature_c");
            s.telemetry.power_w = get_optional<double>(tel, "power_w");
            s.telemetry.throttle_reasons = get_optional<std::uint64_t>(tel, "throttle_reasons");
        }
    }
    if (j.contains("measured_at")) s.measured_at = get_string(j, "measured_at");
    return s;
}

// ---------------------------------------------------------------------------------------------

SampleWriter::SampleWriter(const fs::path& file) : file_(file) {
    // O_NONBLOCK: a FIFO named samples.jsonl that nothing reads fails (ENXIO) or is opened at once
    // instead of waiting for a reader; then it, a device or a folder is refused: samples are
    // appended to a regular file, the record a crash must not lose.
    fd_ = ::open(file.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC | O_NONBLOCK | O_NOCTTY, 0644);
    struct stat st {};
    const bool opened = fd_ >= 0;
    if (!opened && errno != ENXIO && errno != EISDIR) io_error(file, "cannot open samples file");
    if (!opened ? ::stat(file.c_str(), &st) == 0 : ::fstat(fd_, &st) == 0) {
        if (!S_ISREG(st.st_mode)) {
            if (opened) ::close(fd_);
            fd_ = -1;
            const std::string kind = model::describe_non_regular(file);
            throw SampleError({model::Diagnostic{file.string(), 0, 0, "",
                                                 fmt::format("is {}, not a regular file: samples are appended to a "
                                                             "regular file",
                                                             kind.empty() ? "not a regular file" : kind)}});
        }
    } else if (!opened) {
        io_error(file, "cannot open samples file");
    }
    (void)::fcntl(fd_, F_SETFL, O_APPEND); // blocking writes again (a regular file never blocks anyway)
}

SampleWriter::~SampleWriter() {
    if (fd_ >= 0) ::close(fd_);
}

void SampleWriter::append(const Sample& s) {
    const std::string line = to_json_line(s) + "\n";
    // One write() for the whole line (a line is a few hundred bytes): a kill leaves either the
    // line or nothing in practice; a torn line is still detected and handled by resume and fit.
    std::size_t off = 0;
    while (off < line.size()) {
        const ssize_t n = ::write(fd_, line.data() + off, line.size() - off);
        if (n < 0) {
            if (errno == EINTR) continue;
            io_error(file_, "cannot append to samples file");
        }
        off += static_cast<std::size_t>(n);
    }
    // On disk before the next measurement starts: a power loss or crash keeps it.
    if (::fdatasync(fd_) != 0 && errno != EINVAL) io_error(file_, "cannot flush samples file");
}

// ---------------------------------------------------------------------------------------------

SampleFile read_samples(const fs::path& file) {
    SampleFile out;
    out.path = file;
    std::vector<model::Diagnostic> problems;
    const auto text = slurp(file);
    if (!text) throw SampleError({diag(file, 0, "", "cannot open: no such file (run `trainsim-calibrate measure` first)")});
    if (text->find_first_not_of(" \t\r\n") == std::string::npos)
        throw SampleError({diag(file, 1, "", "empty file: no samples (the run measured nothing yet)")});

    std::map<std::string, int> first_line;
    std::size_t pos = 0;
    int line_no = 0;
    while (pos < text->size()) {
        ++line_no;
        const std::size_t nl = text->find('\n', pos);
        const bool complete = nl != std::string::npos;
        const std::string line = text->substr(pos, complete ? nl - pos : std::string::npos);
        pos = complete ? nl + 1 : text->size();
        if (!complete) {
            problems.push_back(diag(file, line_no, "",
                                    "truncated line: no end of line (the run was killed while writing it; "
                                    "`measure --resume` measures it again)"));
            break;
        }
        if (line.find_first_not_of(" \t\r") == std::string::npos) {
            problems.push_back(diag(file, line_no, "", "blank line"));
            continue;
        }
        Sample s;
        try {
            s = sample_from_json_text(line);
        } catch (const std::exception& e) {
            const bool last = pos >= text->size();
            problems.push_back(diag(file, line_no, "",
                                    last && std::string(e.what()) == "malformed JSON"
                                        ? "truncated or malformed JSON on the last line"
                                        : e.what()));
            continue;
        }
        const std::string& key = s.desc.key;
        std::string expected;
        try {
            expected = make_key(s.desc);
        } catch (const std::exception& e) {
            problems.push_back(diag(file, line_no, key, e.what()));
            continue;
        }
        if (key != expected) {
            problems.push_back(diag(file, line_no, key, fmt::format("key does not match the sample's fields ({})", expected)));
            continue;
        }
        if (auto why = invalid_descriptor(s.desc)) {
            problems.push_back(diag(file, line_no, key, *why));
            continue;
        }
        if (auto [it, fresh] = first_line.emplace(key, line_no); !fresh) {
            problems.push_back(diag(file, line_no, key, fmt::format("measured twice (also on line {})", it->second)));
            continue;
        }
        if (s.ok()) {
            const TimeStats& t = s.time;
            const bool finite = std::isfinite(t.median) && std::isfinite(t.min) && std::isfinite(t.max);
            if (!finite || t.median <= 0 || t.min <= 0) {
                problems.push_back(diag(file, line_no, key,
                                        fmt::format("impossible time: median {} s, min {} s (times must be positive "
                                                    "and finite)",
                                                    t.median, t.min)));
                continue;
            }
            // One timed call of a measured kernel or collective takes microseconds to seconds (the
            // largest calibration shapes: ~0.1 s); an hour bounds it. A longer one (1e300 s) is a
            // broken file, and the profile's times, held as int64 picoseconds, could not carry it.
            constexpr double kMaxCallSeconds = 3600.0;
            if (t.max > kMaxCallSeconds || t.median > kMaxCallSeconds) {
                problems.push_back(diag(file, line_no, key,
                                        fmt::format("impossible time: time_s.max {} s, median {} s (one timed call "
                                                    "takes at most {} s)",
                                                    t.max, t.median, kMaxCallSeconds)));
                continue;
            }
            // Tolerate rounding in the last digit; anything else is a broken file.
            if (t.min > t.median * (1 + 1e-9) || t.median > t.max * (1 + 1e-9)) {
                problems.push_back(diag(file, line_no, key,
                                        fmt::format("impossible time: min {} s <= median {} s <= max {} s does not hold",
                                                    t.min, t.median, t.max)));
                continue;
            }
            if (t.iters < 1 || t.calls_per_sample < 1) {
                problems.push_back(diag(file, line_no, key, "impossible timing: iters and calls_per_sample must be >= 1"));
                continue;
            }
        }
        out.samples.push_back(std::move(s));
        out.lines.push_back(line_no);
    }
    if (!problems.empty()) throw SampleError(std::move(problems));
    return out;
}

std::set<std::string> completed_keys(const fs::path& file, bool repair, TornLine* torn) {
    std::set<std::string> keys;
    const auto text = slurp(file);
    if (!text) return keys;
    const std::size_t last_nl = text->rfind('\n');
    const std::size_t complete_len = last_nl == std::string::npos ? 0 : last_nl + 1;
    if (complete_len < text->size() && repair) {
        // A torn last line: drop it so the next sample starts on a line of its own.
        if (::truncate(file.c_str(), static_cast<off_t>(complete_len)) != 0) io_error(file, "cannot truncate samples file");
    }
    std::vector<model::Diagnostic> problems;
    std::size_t pos = 0;
    int line_no = 0;
    while (pos < complete_len) {
        ++line_no;
        const std::size_t nl = text->find('\n', pos);
        const std::string line = text->substr(pos, nl - pos);
        pos = nl + 1;
        const json j = json::parse(line, nullptr, false);
        if (j.is_discarded() || !j.is_object() || !j.contains("key") || !j.at("key").is_string()) {
            problems.push_back(diag(file, line_no, "", "not a sample (malformed JSON or no key); cannot resume over it"));
            continue;
        }
        keys.insert(j.at("key").get<std::string>());
    }
    if (!problems.empty()) throw SampleError(std::move(problems));
    if (torn != nullptr) *torn = complete_len < text->size() ? TornLine{line_no + 1, text->size() - complete_len} : TornLine{};
    return keys;
}

} // namespace trainsim::calibrate
