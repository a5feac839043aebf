// nccl-tests logs: what both formats share once read (the group, the op, every row checked
// against both, one collective sample per row), and the entry point that tells the formats apart.
#include "nccl_tests_reader.hpp"

#include "trainsim/model/core/units.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>
#include <set>

namespace trainsim::calibrate::detail {

namespace fs = std::filesystem;

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

std::string gbps(double v) { return fmt::format("{:.4g} GB/s", v); }

// -I statistics of iterations of `agg` calls (-m), per call.
void per_call(NcclTestsIterStats& st, int agg) {
    for (double* x : {&st.min_us, &st.max_us, &st.p99_us}) *x /= agg;
    if (st.p50_us) *st.p50_us /= agg;
    for (double& x : st.times_us) x /= agg;
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
namespace {

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

} // namespace

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

} // namespace trainsim::calibrate::detail

namespace trainsim::calibrate {

using namespace detail;
using nlohmann::json;

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

namespace {

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

} // namespace trainsim::calibrate
