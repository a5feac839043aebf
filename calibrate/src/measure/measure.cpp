#include "trainsim/calibrate/measure/measure.hpp"

#include "trainsim/calibrate/core/calibrate_error.hpp"
#include "trainsim/calibrate/measure/rendezvous.hpp"

#include <fmt/format.h>

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <exception>
#include <chrono>
#include <cstring>
#include <ctime>
#include <fstream>
#include <system_error>

namespace trainsim::calibrate {

namespace fs = std::filesystem;
using nlohmann::json;

std::string utc_now() {
    const std::time_t t = std::chrono::system_clock::to_time_t(std::chrono::system_clock::now());
    std::tm tm{};
    gmtime_r(&t, &tm);
    char buf[32];
    std::strftime(buf, sizeof(buf), "%Y-%m-%dT%H:%M:%SZ", &tm);
    return buf;
}

int lowest_failing_rank(int rank, int world, bool ok, const std::function<void(std::vector<double>&)>& max_over_group) {
    std::vector<double> v{ok ? 0.0 : static_cast<double>(world - rank)};
    max_over_group(v);
    return v[0] > 0 ? world - static_cast<int>(v[0]) : -1;
}

bool runs_on_group(const Descriptor& d) {
    return (d.kind == OpKind::collective || d.kind == OpKind::overlap) && d.group_size > 1;
}

TimeStats time_op(Backend& backend, PreparedOp& op, const Descriptor& d) {
    const int calls = std::max(1, d.calls_per_sample);
    // Warm-up: clocks ramp, caches and lazily created library state (cuBLASLt kernels, NCCL
    // channels) settle. Each call is completed before the next (start/stop synchronise).
    for (int i = 0; i < d.warmup; ++i) {
        op.before_sample();
        backend.start_timer();
        op.run();
        (void)backend.stop_timer();
        op.after_sample();
    }
    std::vector<double> per_call;
    per_call.reserve(static_cast<std::size_t>(d.iters));
    // A collective's ranks meet before each sample, then time `calls` back-to-back calls between
    // two events, as nccl-tests' BenchTime does (Barrier, then iters x startColl, then one
    // completeColl; NVIDIA/nccl-tests src/common.cu): the per-call time holds neither the skew
    // between ranks nor, beyond 1/calls of it, the first launch onto an idle stream.
    const bool meet = d.kind == OpKind::collective && d.group_size > 1;
    for (int i = 0; i < std::max(1, d.iters); ++i) {
        op.before_sample();
        // The flush only makes sense before a single call: in a batch the later calls find
        // their operands in cache anyway (collectives are not flushed).
        if (d.flush_l2 && calls == 1) backend.flush_caches();
        if (meet) backend.barrier(d);
        backend.start_timer();
        for (int c = 0; c < calls; ++c) op.run();
        const double t = backend.stop_timer();
        op.after_sample();
        per_call.push_back(t / calls);
    }
    backend.reduce_times(d, per_call);
    return summarize(std::move(per_call), calls);
}

std::shared_ptr<const int> lock_run_dir(const fs::path& dir, std::string_view who) {
    const fs::path file = dir / ".lock";
    const int fd = ::open(file.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (fd < 0)
        throw CalibrationInputError(file.string(), fmt::format("cannot create the lock file: {}", std::strerror(errno)));
    if (::flock(fd, LOCK_EX | LOCK_NB) != 0) {
        const int err = errno;
        std::string holder(256, '\0');
        const ssize_t n = ::pread(fd, holder.data(), holder.size(), 0);
        holder.resize(n > 0 ? static_cast<std::size_t>(n) : 0);
        while (!holder.empty() && (holder.back() == '\n' || holder.back() == '\0')) holder.pop_back();
        ::close(fd);
        if (err == EWOULDBLOCK)
            throw CalibrationInputError(
                dir.string(), fmt::format("another measure or import is writing to this directory ({}): wait for it to "
                                          "finish, or use another --out",
                                          holder.empty() ? "its pid is not recorded" : holder));
        throw CalibrationInputError(file.string(), fmt::format("cannot lock: {}", std::strerror(err)));
    }
    std::array<char, 256> host{};
    if (::gethostname(host.data(), host.size() - 1) != 0) host = {};
    const std::string me = fmt::format("pid {} on host {}, since {} ({})\n", static_cast<long>(::getpid()),
                                       host[0] != '\0' ? host.data() : "?", utc_now(), who);
    if (::ftruncate(fd, 0) != 0 || ::pwrite(fd, me.data(), me.size(), 0) != static_cast<ssize_t>(me.size())) {
        // The lock holds without the note; only the refusal message is poorer.
    }
    return std::shared_ptr<const int>(new int(fd), [](const int* p) {
        ::close(*p);
        delete p;
    });
}


RunDir open_run_dir(const fs::path& dir, bool resume, bool repair) {
    RunDir run;
    run.dir = dir;
    run.samples = dir / kSamplesFile;
    std::error_code ec;
    fs::create_directories(dir, ec);
    if (ec) throw CalibrationInputError(dir.string(), "cannot create the output directory: " + ec.message());
    if (repair) run.lock = lock_run_dir(dir, "measure"); // before reading: a second writer must not repair or append
    const bool has_samples = fs::exists(run.samples, ec) && fs::file_size(run.samples, ec) > 0;
    if (!resume && has_samples)
        throw CalibrationInputError(run.samples.string(),
                                    "already holds samples; use --resume to continue that run, or another --out");
    if (resume) {
        TornLine torn;
        run.done = completed_keys(run.samples, repair, &torn);
        if (repair && torn.line > 0)
            run.dropped = fmt::format("{}:{}: a torn last line ({} bytes, no end of line: the run stopped while "
                                      "writing it) was dropped; its op is measured again",
                                      run.samples.string(), torn.line, torn.bytes);
    }
    const fs::path first = dir / "run.json";
    if (fs::exists(first, ec)) {
        std::ifstream in(first);
        json j = json::parse(in, nullptr, false);
        if (j.is_discarded() || !j.is_object())
            throw CalibrationInputError(first.string(), "not valid JSON; cannot tell which plan this run used");
        run.first_run = std::move(j);
    }
    return run;
}

fs::path write_run_info(const fs::path& dir, const json& info) {
    const std::string text = info.dump(2) + "\n";
    for (int i = 1; i < 10000; ++i) {
        const fs::path p = dir / (i == 1 ? std::string("run.json") : fmt::format("run-{}.json", i));
        const int fd = ::open(p.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
        if (fd < 0) {
            if (errno == EEXIST) continue;
            throw std::system_error(errno, std::generic_category(), "cannot create " + p.string());
        }
        std::size_t off = 0;
        while (off < text.size()) {
            const ssize_t n = ::write(fd, text.data() + off, text.size() - off);
            if (n < 0 && errno == EINTR) continue;
            if (n < 0) {
                const int err = errno;
                ::close(fd);
                throw std::system_error(err, std::generic_category(), "cannot write " + p.string());
            }
            off += static_cast<std::size_t>(n);
        }
        ::fsync(fd);
        ::close(fd);
        return p;
    }
    throw CalibrationInputError(dir.string(), "too many run-N.json files");
}

namespace {

void check_same_run(const RunDir& run, const Backend& backend, const MeasureOptions& opts) {
    if (!run.first_run) return;
    const json& f = *run.first_run;
    const std::string plan = f.value("plan", ""), be = f.value("backend", "");
    const int ranks = f.value("ranks", 0);
    if (plan != opts.plan_name || be != backend.name() || ranks != backend.ranks())
        throw CalibrationInputError(
            (run.dir / "run.json").string(),
            fmt::format("this directory holds a run of plan '{}' on backend '{}' with {} ranks; resuming it needs the "
                        "same (asked: plan '{}', backend '{}', {} ranks), or use another --out",
                        plan, be, ranks, opts.plan_name, backend.name(), backend.ranks()));
}

} // namespace

MeasureSummary measure(Backend& backend, const std::vector<Descriptor>& plan, const RunDir& run,
                       const MeasureOptions& opts) {
    MeasureSummary sum;
    sum.planned = plan.size();
    std::vector<const Descriptor*> todo;
    for (const auto& d : plan) {
        if (run.done.contains(d.key)) ++sum.already_done;
        else todo.push_back(&d);
    }

    std::optional<SampleWriter> writer;
    if (backend.writes_samples()) {
        check_same_run(run, backend, opts);
        json info;
        info["tool"] = "trainsim-calibrate measure";
        info["plan"] = opts.plan_name;
        info["backend"] = backend.name();
        info["ranks"] = backend.ranks();
        info["command_line"] = opts.command_line;
        info["started_at"] = utc_now();
        info["host"] = host_name();
        info["samples_file"] = kSamplesFile;
        info["descriptors"] = plan.size();
        info["resumed"] = !run.done.empty();
        info["already_done"] = sum.already_done;
        info["burn_in_s"] = opts.burn_in_s;
        if (opts.time_budget_s) info["time_budget_s"] = *opts.time_budget_s;
        info["provenance"] = backend.provenance();
        sum.run_info = write_run_info(run.dir, info);
        writer.emplace(run.samples);
    }

    double rough_total = 0;
    for (const auto* d : todo) rough_total += backend.rough_seconds(*d);
    double rough_done = 0;
    const auto now = [&opts] {
        return opts.clock ? opts.clock()
                          : std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
    };
    const double t0 = now();
    const auto elapsed = [&] { return now() - t0; };
    std::optional<OpKind> last_kind;
    std::size_t done_now = 0;
    // Every session starts from whatever state the GPU is in (idle clocks after a break, or a
    // resume): the burn-in brings it to the state the plan's samples are meant to see.
    if (!todo.empty() && opts.burn_in_s > 0) backend.burn_in(opts.burn_in_s);

    for (const auto* dp : todo) {
        const Descriptor& d = *dp;
        if (opts.time_budget_s && elapsed() + backend.rough_seconds(d) > *opts.time_budget_s) {
            sum.stopped_early = true;
            sum.budget_reached = true;
            break;
        }
        if (last_kind && *last_kind != d.kind) backend.end_of_kind();
        last_kind = d.kind;
        rough_done += backend.rough_seconds(d);
        ++done_now;
        if (!backend.participates(d)) continue;

        Sample s;
        s.desc = d;
        s.backend = backend.name();
        auto record_unsupported = [&](std::string reason) {
            s = Sample{};
            s.desc = d;
            s.backend = backend.name();
            s.status = "unsupported";
            s.reason = std::move(reason);
        };
        std::exception_ptr failed; // an op that failed while it was prepared or ran
        bool group_failed = false; // ... and ran on a group of ranks
        std::unique_ptr<PreparedOp> op;
        std::optional<std::string> why = backend.unsupported(d);
        if (!why) {
            try {
                op = backend.prepare(d);
            } catch (const OpUnsupported& e) {
                why = e.what();
            } catch (const std::exception& e) {
                why = fmt::format("failed while preparing: {}", e.what());
                failed = std::current_exception();
            }
        }
        // The group's ranks decide together: every one runs it, or none does.
        if (runs_on_group(d)) {
            const int bad = backend.first_failing_rank(d, !why);
            if (bad >= 0 && !why)
                why = fmt::format("rank {} of the group of {} could not run it (its reason is on its stderr)", bad,
                                  d.group_size);
        }
        if (why) {
            op.reset();
            record_unsupported(*why);
        } else {
            try {
                s.time = time_op(backend, *op, d);
                s.impl = op->implementation();
                s.algo_index = op->algo_index();
                s.algo_count = op->algo_count();
                s.telemetry = backend.telemetry();
            } catch (const OpUnsupported& e) {
                record_unsupported(e.what());
            } catch (const std::exception& e) {
                // Recorded, so that --resume does not meet the same failure again; the run goes
                // on unless the device is left unusable, or the op ran on a group: the other
                // ranks are inside the collective, which one rank cannot skip alone, so the run
                // stops after the record.
                record_unsupported(fmt::format("failed while running: {}", e.what()));
                failed = std::current_exception();
                group_failed = runs_on_group(d);
            }
        }
        op.reset();
        s.measured_at = utc_now();
        if (s.ok()) ++sum.measured;
        else ++sum.unsupported;
        if (writer) writer->append(s);
        if (!writer && !s.ok() && opts.on_note) opts.on_note(fmt::format("{}: {}", d.key, s.reason));
        if (failed && (group_failed || !backend.healthy())) std::rethrow_exception(failed);

        if (opts.on_progress) {
            Progress p;
            p.done = done_now;
            p.total = todo.size();
            p.key = d.key;
            p.elapsed_s = elapsed();
            p.eta_s = rough_done > 0 ? p.elapsed_s * (rough_total - rough_done) / rough_done : 0.0;
            opts.on_progress(p);
        }
        if (opts.stop_after && sum.measured + sum.unsupported >= *opts.stop_after) {
            sum.stopped_early = true;
            break;
        }
    }
    if (last_kind) backend.end_of_kind();
    return sum;
}

} // namespace trainsim::calibrate
