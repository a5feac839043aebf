#include "trainsim/calibrate/cli/calibrate_cli.hpp"

#include "trainsim/calibrate/backends/cpu_backend.hpp"
#include "trainsim/calibrate/core/calibrate_error.hpp"
#include "trainsim/calibrate/fit/fit.hpp"
#include "trainsim/calibrate/fit/show.hpp"
#include "trainsim/calibrate/import/import.hpp"
#include "trainsim/calibrate/measure/measure.hpp"
#include "trainsim/calibrate/measure/plan.hpp"
#include "trainsim/calibrate/measure/rendezvous.hpp"
#include "trainsim/model/input/loader.hpp"

#include "calibrate_commands.hpp"
#include "measure/launcher.hpp"
#ifdef TRAINSIM_HAVE_MPI
#include "backends/mpi_bootstrap.hpp"
#endif

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include <unistd.h>

#include <cmath>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <random>
#include <sstream>
#include <thread>

#ifndef TRAINSIM_DEFAULT_DATA_DIR
#define TRAINSIM_DEFAULT_DATA_DIR "scenarios"
#endif

namespace trainsim::calibrate {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {
// What --resume dropped from the run directory (a torn last line), said before measuring.
void say_dropped(const RunDir& run) {
    if (!run.dropped.empty()) std::cerr << "trainsim-calibrate measure: " << run.dropped << "\n";
}


// --data-dir, else $TRAINSIM_DATA_DIR, else scenarios/ beside the executable (the GPU bundle's
// layout, scripts/gpu-bundle), else the source tree's scenarios/ this binary was built from.
fs::path data_dir(const std::string& flag) {
    if (!flag.empty()) return flag;
    if (const char* env = std::getenv("TRAINSIM_DATA_DIR"); env != nullptr && *env != '\0') return env;
    std::error_code ec;
    const fs::path beside = fs::read_symlink("/proc/self/exe", ec).parent_path() / "scenarios";
    if (!ec && fs::is_directory(beside / "hardware", ec)) return beside;
    return TRAINSIM_DEFAULT_DATA_DIR;
}

std::string hms(double s) {
    const auto t = static_cast<long>(s + 0.5);
    return t >= 3600 ? fmt::format("{}h{:02}m", t / 3600, (t / 60) % 60) : fmt::format("{}m{:02}s", t / 60, t % 60);
}

// A progress bar with ETA on stderr: redrawn in place on a terminal, one line per 10% otherwise
// (logs of a rented node's session).
class ProgressBar {
public:
    explicit ProgressBar(bool quiet) : quiet_(quiet), tty_(::isatty(STDERR_FILENO) != 0) {}
    void operator()(const Progress& p) {
        if (quiet_ || p.total == 0) return;
        const double frac = static_cast<double>(p.done) / static_cast<double>(p.total);
        const int decile = static_cast<int>(frac * 10);
        if (!tty_ && decile == last_decile_ && p.done != p.total) return;
        last_decile_ = decile;
        constexpr int kWidth = 30;
        const auto filled = static_cast<int>(frac * kWidth);
        const std::string bar = std::string(static_cast<std::size_t>(filled), '=') +
                                std::string(static_cast<std::size_t>(kWidth - filled), ' ');
        std::string key = p.key.size() > 60 ? p.key.substr(0, 57) + "..." : p.key;
        std::cerr << fmt::format("{}[{}] {:3.0f}% {}/{} elapsed {} ETA {}  {:<60}{}", tty_ ? "\r" : "", bar, 100 * frac,
                                 p.done, p.total, hms(p.elapsed_s), hms(p.eta_s), key,
                                 tty_ && p.done != p.total ? "" : "\n")
                  << std::flush;
    }

private:
    bool quiet_, tty_;
    int last_decile_ = -1;
};

struct MeasureArgs {
    std::string backend = "cpu";
    std::string plan = "quick";
    std::string out;
    bool resume = false;
    bool quiet = false;
    int threads = 4;
    int gpus = 0;
    // multi-process (hidden)
    int rank = -1;
    int world = 0;
    int device = -1;
    std::string session;
    std::string rendezvous_dir;
    std::string bootstrap = "auto";
    std::size_t stop_after = 0;
    double gpu_timeout = 600.0; // CudaOptions::wait_timeout_s
    double time_budget = 0;     // 0: none
};

std::string join_args(int argc, char** argv) {
    std::string s;
    for (int i = 0; i < argc; ++i) s += (i ? " " : "") + std::string(argv[i]);
    return s;
}

// Rank and size from an MPI / Slurm launcher's environment (Open MPI, MPICH/PMI, Slurm srun).
bool rank_from_env(int& rank, int& world) {
    const std::pair<const char*, const char*> vars[] = {
        {"OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE"}, {"PMI_RANK", "PMI_SIZE"}, {"SLURM_PROCID", "SLURM_NTASKS"}};
    for (const auto& [r, w] : vars) {
        const char* rv = std::getenv(r);
        const char* wv = std::getenv(w);
        if (rv != nullptr && wv != nullptr) {
            rank = std::atoi(rv);
            world = std::atoi(wv);
            return world >= 1;
        }
    }
    return false;
}

// The rank's index on its host as the launcher sets it (Open MPI, Slurm, MPICH, torchrun), or -1.
int local_rank_from_env() {
    for (const char* v : {"OMPI_COMM_WORLD_LOCAL_RANK", "SLURM_LOCALID", "MPI_LOCALRANKID", "LOCAL_RANK"})
        if (const char* s = std::getenv(v); s != nullptr && *s != '\0') return std::atoi(s);
    return -1;
}

#ifdef TRAINSIM_HAVE_MPI
// The index of `rank` among the ranks on its host, from every rank's host name.
int local_rank_from_hosts(const std::vector<std::string>& hosts, int rank) {
    int local = 0;
    for (int r = 0; r < rank && r < static_cast<int>(hosts.size()); ++r)
        local += hosts[static_cast<std::size_t>(r)] == hosts[static_cast<std::size_t>(rank)] ? 1 : 0;
    return local;
}
#endif

std::string launcher_session() {
    for (const char* v : {"PMIX_NAMESPACE", "SLURM_JOB_ID"})
        if (const char* s = std::getenv(v); s != nullptr && *s != '\0') return std::string("job-") + s;
    return {};
}

void check_backend(const std::string& backend, const CudaEntry& cuda) {
    if (backend == "cpu") return;
    if (backend != "cuda") throw CalibrationInputError("--backend", "unknown backend '" + backend + "' (cuda or cpu)");
    if (!cuda.make)
        throw NoDeviceError("no CUDA device: this trainsim-calibrate was built without CUDA support (nvcc, cuBLASLt "
                            "or NCCL not found at configure time); --backend cpu works");
}

// Whether this process meets its ranks through MPI: --bootstrap mpi, or (auto) started by an MPI
// launcher in a build with MPI. Otherwise the file rendezvous (and local children) do.
bool want_mpi(const MeasureArgs& a) {
    if (a.bootstrap == "file") return false;
    if (a.bootstrap != "auto" && a.bootstrap != "mpi")
        throw CalibrationInputError("--bootstrap", "expected auto, mpi or file, got '" + a.bootstrap + "'");
#ifdef TRAINSIM_HAVE_MPI
    return a.bootstrap == "mpi" || (a.rank < 0 && detail::launched_by_mpi());
#else
    if (a.bootstrap == "mpi")
        throw CalibrationInputError("--bootstrap", "this trainsim-calibrate was built without MPI (install "
                                                   "libopenmpi-dev and reconfigure); --bootstrap file works");
    return false;
#endif
}

// Says that the time budget stopped the run and how to finish it (stderr: the samples are complete
// and `fit` reads them as they are).
void report_budget(const MeasureSummary& sum, const MeasureArgs& a) {
    if (!sum.budget_reached) return;
    std::cerr << fmt::format(
        "stopped at the time budget of {} s with {} of {} descriptors measured; the samples so "
        "far are complete (fit reads them); continue with: measure --backend {} --plan {} --out "
        "{} --resume\n",
        a.time_budget, sum.already_done + sum.measured + sum.unsupported, sum.planned, a.backend, a.plan, a.out);
}

#ifdef TRAINSIM_HAVE_MPI
// Rank 0 opens the run directory (only it writes there: no shared file system needed) and sends
// every rank the keys already measured, so that all walk the same descriptors; or its error.
RunDir shared_run_dir(const detail::MpiSession& mpi, const fs::path& out, bool resume) {
    RunDir run;
    if (mpi.rank() == 0) {
        try {
            run = open_run_dir(out, resume, /*repair=*/true);
            say_dropped(run);
        } catch (const std::exception& e) {
            (void)mpi.broadcast(std::string("E") + e.what());
            throw;
        }
        std::string keys = "K";
        for (const auto& k : run.done) keys += k + "\n";
        (void)mpi.broadcast(keys);
        return run;
    }
    const std::string msg = mpi.broadcast({});
    if (msg.empty() || msg[0] != 'K')
        throw CalibrationInputError(out.string(), "rank 0 could not open the run directory: " +
                                                      (msg.empty() ? std::string("?") : msg.substr(1)));
    run.dir = out;
    run.samples = out / kSamplesFile;
    std::istringstream in(msg.substr(1));
    for (std::string key; std::getline(in, key);)
        if (!key.empty()) run.done.insert(key);
    return run;
}

// `measure` under mpirun: one process per rank (per GPU with --backend cuda), bootstrapped by MPI.
int run_measure_mpi(const MeasureArgs& a, PlanKind kind, MeasureOptions opts, const CudaEntry& cuda) {
    detail::MpiSession mpi;
    // Ranks count descriptors differently (only collectives on ranks > 0): stopping early on one
    // would leave the others waiting in a collective.
    if (opts.stop_after && mpi.world() > 1)
        throw CalibrationInputError("--stop-after", "is a single-process test hook; not with several MPI ranks");
    if (opts.time_budget_s && mpi.world() > 1)
        throw CalibrationInputError("--time-budget",
                                    "works in single-process runs only (ranks stopping apart would "
                                    "leave the others in a collective); use it with one GPU");
    const RunDir run = shared_run_dir(mpi, a.out, a.resume);
    std::unique_ptr<Backend> backend;
    if (a.backend == "cpu") {
        backend = detail::make_process_cpu_backend(mpi.process_ranks());
    } else {
        CudaOptions co;
        co.rank = mpi.rank();
        co.world = mpi.world();
        co.device = a.device;
        co.hosts = mpi.hosts();
        if (co.hosts.size() == static_cast<std::size_t>(co.world)) co.local_rank = local_rank_from_hosts(co.hosts, co.rank);
        co.share_id = [&mpi](const std::function<std::vector<unsigned char>()>& make) {
            std::string id;
            if (mpi.rank() == 0) {
                const auto v = make();
                id.assign(v.begin(), v.end());
            }
            id = mpi.broadcast(id);
            return std::vector<unsigned char>(id.begin(), id.end());
        };
        co.max_over_group = [&mpi](int size, std::vector<double>& times) { mpi.max_over_group(size, times); };
        co.wait_timeout_s = a.gpu_timeout;
        backend = cuda.make(co);
    }
    opts.burn_in_s = burn_in_seconds(a.backend);
    opts.on_note = [r = mpi.rank()](const std::string& m) { std::cerr << fmt::format("rank {}: {}\n", r, m); };
    PlanContext ctx{a.backend, backend->ranks(), backend->rank_hosts()};
    const auto plan = make_plan(kind, ctx);
    ProgressBar bar(a.quiet || mpi.rank() != 0);
    opts.on_progress = [&](const Progress& p) { bar(p); };
    const auto sum = measure(*backend, plan, run, opts);
    if (mpi.rank() == 0 && !a.quiet)
        std::cerr << fmt::format("measured {} ({} unsupported), {} already done, of {} descriptors on {} MPI rank{} -> {}\n",
                                 sum.measured, sum.unsupported, sum.already_done, sum.planned, mpi.world(),
                                 mpi.world() > 1 ? "s" : "", run.samples.string());
    backend.reset();  // its MPI groups go before MPI_Finalize
    return kExitOk;
}
#endif

int run_measure(const MeasureArgs& a, int argc, char** argv, const CudaEntry& cuda) {
    const PlanKind kind = parse_plan_kind(a.plan);
    if (a.out.empty()) throw CalibrationInputError("--out", "an output directory is required");
    const fs::path out = a.out;
    MeasureOptions opts;
    opts.plan_name = a.plan;
    opts.command_line = join_args(argc, argv);
    if (a.stop_after > 0) opts.stop_after = a.stop_after;
    if (a.time_budget < 0 || !std::isfinite(a.time_budget))
        throw CalibrationInputError("--time-budget", "must be a positive number of seconds");
    if (a.time_budget > 0) opts.time_budget_s = a.time_budget;
    if (!(a.gpu_timeout > 0) || !std::isfinite(a.gpu_timeout))
        throw CalibrationInputError("--gpu-timeout", "must be a positive number of seconds");
    opts.burn_in_s = burn_in_seconds(a.backend);
    check_backend(a.backend, cuda);
    if (want_mpi(a)) {
#ifdef TRAINSIM_HAVE_MPI
        return run_measure_mpi(a, kind, std::move(opts), cuda);
#endif
    }

    if (a.backend == "cpu") {
        int env_rank = 0, env_world = 0;
        if (rank_from_env(env_rank, env_world) && env_world > 1)
            throw CalibrationInputError(
                "--backend", fmt::format("started as rank {} of {} by a launcher, but without an MPI bootstrap the CPU "
                                         "backend runs in one process (collectives between threads): build with MPI "
                                         "(libopenmpi-dev) and launch with mpirun, or run one process",
                                         env_rank, env_world));
        const RunDir run = open_run_dir(out, a.resume, /*repair=*/true);
        say_dropped(run);
        auto backend = make_cpu_backend(std::max(2, a.threads));
        PlanContext ctx{"cpu", backend->ranks(), {}};
        const auto plan = make_plan(kind, ctx);
        ProgressBar bar(a.quiet);
        opts.on_progress = [&](const Progress& p) { bar(p); };
        const auto sum = measure(*backend, plan, run, opts);
        if (!a.quiet)
            std::cerr << fmt::format("measured {} ({} unsupported), {} already done, of {} descriptors -> {}\n",
                                     sum.measured, sum.unsupported, sum.already_done, sum.planned, run.samples.string());
        report_budget(sum, a);
        return kExitOk;
    }
    // Who am I: given (--rank/--world, a child of the launcher), from an MPI / Slurm launch,
    // or rank 0 of a single-node run that starts the other ranks itself.
    int rank = a.rank, world = a.world;
    std::string session = a.session;
    bool launcher = false;
    int local_rank = -1; // known when a launcher placed the ranks; else the ranks share one node
    if (rank < 0) {
        if (rank_from_env(rank, world)) {
            local_rank = local_rank_from_env();
            if (session.empty()) session = launcher_session();
            if (session.empty() && world > 1)
                throw CalibrationInputError("--session", "launched by MPI/Slurm without PMIX_NAMESPACE or SLURM_JOB_ID: "
                                                         "pass the same --session NAME to every rank");
        } else {
            rank = 0;
            const int n = cuda.device_count ? cuda.device_count() : 0;
            world = a.gpus > 0 ? std::min(a.gpus, std::max(1, n)) : std::max(1, n);
            launcher = world > 1;
            if (launcher) {
                std::random_device rd;
                session = fmt::format("s{:08x}{:08x}", rd(), rd());
            }
        }
    }
    if (world < 1) world = 1;
    if (opts.time_budget_s && world > 1)
        throw CalibrationInputError("--time-budget", fmt::format("works in single-process runs only (ranks stopping "
                                                                 "apart would leave the others in a collective); this "
                                                                 "run has {} GPUs: add --gpus 1",
                                                                 world));
    const fs::path rdv = a.rendezvous_dir.empty() ? out / ".rendezvous" : fs::path(a.rendezvous_dir);

    // Every rank reads which keys are done before NCCL initialises (a barrier), so none sees
    // samples rank 0 writes afterwards; only rank 0 repairs a torn last line.
    const RunDir run = open_run_dir(out, a.resume, rank == 0);
    say_dropped(run);

    std::vector<pid_t> children;
    if (launcher) {
        std::vector<std::string> args{argv[0], "measure", "--backend", "cuda", "--plan", a.plan, "--out", a.out,
                                      "--world", std::to_string(world), "--session", session, "--rendezvous",
                                      rdv.string(), "--quiet"};
        args.insert(args.end(), {"--gpu-timeout", fmt::format("{}", a.gpu_timeout)});
        if (a.resume) args.emplace_back("--resume");
        children = detail::spawn_ranks(args, world);
    }
    try {
        CudaOptions co;
        co.rank = rank;
        co.world = world;
        co.device = a.device;
        co.local_rank = local_rank;
        co.rendezvous_dir = rdv;
        co.session = session;
        co.wait_timeout_s = a.gpu_timeout;
        auto backend = cuda.make(co);
        PlanContext ctx{"cuda", world, backend->rank_hosts()};
        const auto plan = make_plan(kind, ctx);
        ProgressBar bar(a.quiet || rank != 0);
        opts.on_progress = [&](const Progress& p) { bar(p); };
        opts.on_note = [rank](const std::string& m) { std::cerr << fmt::format("rank {}: {}\n", rank, m); };
        const auto sum = measure(*backend, plan, run, opts);
        if (rank == 0 && !a.quiet)
            std::cerr << fmt::format("measured {} ({} unsupported), {} already done, of {} descriptors on {} GPU{} -> {}\n",
                                     sum.measured, sum.unsupported, sum.already_done, sum.planned, world,
                                     world > 1 ? "s" : "", run.samples.string());
        if (rank == 0) report_budget(sum, a);
    } catch (...) {
        detail::stop_ranks(children);
        throw;
    }
    if (const std::string failed = detail::wait_ranks(children); !failed.empty())
        throw std::runtime_error("ranks failed: " + failed + " (their messages are above)");
    return kExitOk;
}

// Base profile id from the device name CUDA reports ("NVIDIA H100 80GB HBM3" -> h100-sxm).
std::string guess_base(const std::string& device) {
    auto has = [&](const char* s) { return device.find(s) != std::string::npos; };
    if (has("H200")) return "h200-sxm";
    if (has("H800")) return "h800-sxm";
    if (has("H100")) return has("PCIe") ? "h100-pcie" : "h100-sxm";
    if (has("A100")) return has("PCIe") ? "a100-pcie-80gb" : (has("40GB") ? "a100-sxm-40gb" : "a100-sxm-80gb");
    return {};
}

struct FitArgs {
    std::string dir, out, base, data_dir, id, name;
    std::vector<std::string> maps;
    bool force = false, json = false;
};

int run_fit(const FitArgs& a) {
    const fs::path dir = a.dir;
    const SampleFile file = read_samples(dir / kSamplesFile);
    std::string device;
    std::optional<double> idle_power_w;
    if (std::ifstream in(dir / "run.json"); in) {
        const json run = json::parse(in, nullptr, false);
        if (run.is_object() && run.contains("provenance") && run["provenance"].is_object()) {
            const json& prov = run["provenance"];
            device = prov.value("device", "");
            // The idle board power read before the run started (CUDA backend with NVML).
            if (prov.contains("telemetry_at_start") && prov["telemetry_at_start"].is_object() &&
                prov["telemetry_at_start"].contains("power_w") && prov["telemetry_at_start"]["power_w"].is_number())
                idle_power_w = prov["telemetry_at_start"]["power_w"].get<double>();
        }
    }
    std::string base_id = a.base;
    if (base_id.empty()) {
        base_id = guess_base(device);
        if (base_id.empty())
            throw CalibrationInputError("--base", fmt::format("cannot tell the base profile from the device '{}'; pass "
                                                              "--base ID|PATH (e.g. --base h100-sxm)",
                                                              device.empty() ? "unknown" : device));
    }
    const auto base = model::resolve_profile(base_id, fs::current_path(), data_dir(a.data_dir));
    FitOptions opts = default_fit_options();
    opts.id = a.id.empty() ? fs::path(a.out).stem().string() : a.id;
    opts.name = a.name;
    opts.device = device;
    opts.idle_power_w = idle_power_w;
    for (const auto& m : a.maps) {
        const auto eq = m.find('=');
        const std::string from = m.substr(0, eq), to = eq == std::string::npos ? "" : m.substr(eq + 1);
        std::optional<model::Precision> p;
        for (auto q : {model::Precision::bf16, model::Precision::fp16, model::Precision::fp8})
            if (model::to_string(q) == to) p = q;
        if (from.empty() || !p)
            throw CalibrationInputError("--map", "expected MEASURED=PRECISION with PRECISION bf16, fp16 or fp8, got '" +
                                                     m + "'");
        opts.precision_map[from] = *p;
    }
    const FitResult res = fit(file, base, opts);
    // write_profile reads the rendered text back through the strict reader before it writes:
    // a profile the simulator cannot load is refused and nothing is written.
    model::write_profile(res.profile, a.out, a.force);
    if (a.json) {
        json j = to_json(res.report);
        j["profile"] = a.out;
        j["base"] = base.id;
        std::cout << j.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) << "\n";
    } else {
        std::cout << format_report(res.report)
                  << fmt::format("Wrote {} (id {}, from base {})\n", a.out, res.profile.id, base.id);
    }
    return kExitOk;
}

int run_show(const std::string& file, const std::string& vs, const std::string& dd, bool as_json) {
    const fs::path data = data_dir(dd);
    const auto p = model::resolve_profile(file, fs::current_path(), data);
    std::optional<model::HardwareProfile> other;
    if (!vs.empty()) other = model::resolve_profile(vs, fs::current_path(), data);
    if (as_json) std::cout << show_profile_json(p, other ? &*other : nullptr).dump(2, ' ', false, nlohmann::json::error_handler_t::replace) << "\n";
    else std::cout << show_profile(p, other ? &*other : nullptr);
    return kExitOk;
}

struct ImportArgs {
    std::vector<std::string> files;
    std::string out, op;
    int group_size = 0, nodes = 0;  // 0: not given
    bool append = false, force = false, json = false;
};

ImportMode import_mode(const ImportArgs& a) {
    return a.force ? ImportMode::force : a.append ? ImportMode::append : ImportMode::create;
}

// What every import records in DIR/run.json (or run-N.json).
json import_run_info(const char* tool, int argc, char** argv) {
    json info;
    info["tool"] = std::string("trainsim-calibrate ") + tool;
    info["plan"] = tool;  // a later `measure --resume` here is refused: not a plan's run
    info["command_line"] = join_args(argc, argv);
    info["started_at"] = utc_now();
    info["host"] = host_name();
    return info;
}

std::string fit_hint(const fs::path& dir, const std::string& device) {
    const std::string base = guess_base(device);
    return fmt::format("Fit it with: trainsim-calibrate fit {} --base {} --out PROFILE.yaml\n", dir.string(),
                       base.empty() ? "ID" : base);
}

// `import nccl-tests`: every file parsed first; nothing is written unless all of them read cleanly.
// What an import wrote: the JSON summary, or each file's summary and where the samples went.
template <class Parsed>
int report_import(const ImportArgs& a, const std::vector<Parsed>& parsed, const std::vector<std::size_t>& replaced,
                  const ImportWrite& w, const json& files, std::string_view what, const std::string& device) {
    if (a.json) {
        json j;
        j["files"] = files;
        j["samples"] = w.written;
        j["kept"] = w.kept;
        j["out"] = w.samples.string();
        j["run_info"] = w.run_info.string();
        std::cout << j.dump(2, ' ', false, json::error_handler_t::replace) << "\n";
        return kExitOk;
    }
    for (std::size_t i = 0; i < parsed.size(); ++i) {
        std::cout << format_summary(parsed[i]);
        if (replaced[i] > 0)
            std::cout << fmt::format("  {} {} replace those of an earlier file (the later file wins)\n", replaced[i],
                                     what);
    }
    std::cout << fmt::format("Wrote {} samples to {}{} (provenance in {})\n", w.written, w.samples.string(),
                             w.kept > 0 ? fmt::format(" after the {} already there", w.kept) : "", w.run_info.string())
              << fit_hint(a.out, device);
    return kExitOk;
}

int run_import_nccl(const ImportArgs& a, int argc, char** argv) {
    NcclTestsOptions opts;
    opts.op = a.op;
    if (a.group_size > 0) opts.group_size = a.group_size;
    if (a.nodes > 0) opts.nodes = a.nodes;
    std::vector<NcclTestsLog> logs;
    std::vector<model::Diagnostic> problems;
    for (const auto& f : a.files) {
        try {
            logs.push_back(parse_nccl_tests_log(read_import_file(f), f, opts));
        } catch (const CalibrationInputError& e) {
            problems.insert(problems.end(), e.diagnostics().begin(), e.diagnostics().end());
            continue;
        }
        problems.insert(problems.end(), logs.back().problems.begin(), logs.back().problems.end());
    }
    if (!problems.empty()) throw CalibrationInputError(std::move(problems));
    std::vector<std::vector<Sample>> per_file;
    for (const auto& l : logs) per_file.push_back(l.samples);
    std::vector<std::size_t> replaced;
    const auto samples = merge_imported(per_file, &replaced);

    json info = import_run_info("import nccl-tests", argc, argv);
    info["backend"] = "nccl-tests";
    info["ranks"] = logs.front().group_size;
    std::string device;
    for (const auto& l : logs)
        if (device.empty()) device = l.gpu;
    json files = json::array();
    for (std::size_t i = 0; i < logs.size(); ++i) {
        json j = to_json(logs[i]);
        j["replaced_earlier"] = replaced[i];
        files.push_back(std::move(j));
    }
    info["files"] = files;
    info["provenance"] = {{"device", device}, {"source", "nccl-tests logs"}};
    const ImportWrite w = write_imported_samples(a.out, samples, import_mode(a), info);
    return report_import(a, logs, replaced, w, files, "sizes", device);
}

int run_import_gemm(const ImportArgs& a, int argc, char** argv) {
    std::vector<GemmCsv> csvs;
    std::vector<model::Diagnostic> problems;
    for (const auto& f : a.files) {
        try {
            csvs.push_back(parse_gemm_csv(read_import_file(f), f));
        } catch (const CalibrationInputError& e) {
            problems.insert(problems.end(), e.diagnostics().begin(), e.diagnostics().end());
            continue;
        }
        problems.insert(problems.end(), csvs.back().problems.begin(), csvs.back().problems.end());
    }
    if (!problems.empty()) throw CalibrationInputError(std::move(problems));
    std::vector<std::vector<Sample>> per_file;
    for (const auto& c : csvs) per_file.push_back(c.samples);
    std::vector<std::size_t> replaced;
    const auto samples = merge_imported(per_file, &replaced);

    json info = import_run_info("import gemm", argc, argv);
    info["backend"] = "gemm-csv";
    json files = json::array();
    for (std::size_t i = 0; i < csvs.size(); ++i) {
        json j = to_json(csvs[i]);
        j["replaced_earlier"] = replaced[i];
        files.push_back(std::move(j));
    }
    info["files"] = files;
    const ImportWrite w = write_imported_samples(a.out, samples, import_mode(a), info);
    return report_import(a, csvs, replaced, w, files, "GEMMs", "");
}

// `env`: what this binary resolves at run time, so that a bare machine's gpu-check can show it
// before anything runs. The CUDA part comes from the CUDA backend's library (empty without CUDA).
int run_env(const CudaEntry& cuda, bool as_json, bool require_gpu) {
    json j;
    j["trainsim_calibrate"] = TRAINSIM_VERSION;
    j["built_with_cuda"] = static_cast<bool>(cuda.environment);
#ifdef TRAINSIM_HAVE_MPI
    j["built_with_mpi"] = true;
#else
    j["built_with_mpi"] = false;
#endif
    if (cuda.environment) j.update(cuda.environment());
    if (as_json) {
        std::cout << j.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) << "\n";
    } else {
        for (const auto& [k, v] : j.items())
            std::cout << fmt::format("{:<20} {}\n", k, v.is_string() ? v.get<std::string>() : v.dump());
    }
    if (require_gpu && j.value("cuda_devices", 0) == 0)
        throw NoDeviceError(cuda.environment
                                ? j.value("no_device_reason", std::string("no CUDA device"))
                                : "no CUDA device: this trainsim-calibrate was built without CUDA support");
    return kExitOk;
}

} // namespace

int run_cli(int argc, char** argv, const CudaEntry& cuda) {
    CLI::App app{
        "trainsim-calibrate: measure a node (GEMMs, attention, memory, collectives) and fit a hardware profile"};
    app.require_subcommand(1);

    MeasureArgs m;
    auto* measure_cmd = app.add_subcommand("measure", "run a measurement plan and append samples to DIR/samples.jsonl");
    measure_cmd->add_option("--backend", m.backend, "cuda | cpu")->required();
    measure_cmd->add_option("--plan", m.plan, "tiny | quick | full (default quick)");
    measure_cmd->add_option("--out", m.out, "run directory (samples.jsonl, run.json)")->required();
    measure_cmd->add_flag("--resume", m.resume, "continue an interrupted run in DIR, skipping what it measured");
    measure_cmd->add_flag("--quiet", m.quiet, "no progress bar");
    measure_cmd->add_option("--threads", m.threads, "cpu backend: threads for collectives (default 4)");
    measure_cmd->add_option("--gpus", m.gpus, "cuda backend: use the first N GPUs (default all)");
    auto* hidden = "";
    measure_cmd->add_option("--rank", m.rank, "this process's rank (multi-process runs)")->group(hidden);
    measure_cmd->add_option("--world", m.world, "number of ranks (multi-process runs)")->group(hidden);
    measure_cmd->add_option("--device", m.device, "GPU ordinal (default: rank modulo visible GPUs)")->group(hidden);
    measure_cmd->add_option("--session", m.session, "rendezvous session name (same on every rank)")->group(hidden);
    measure_cmd->add_option("--rendezvous", m.rendezvous_dir, "rendezvous directory (default DIR/.rendezvous)")
        ->group(hidden);
    measure_cmd->add_option("--bootstrap", m.bootstrap,
                            "how ranks meet: auto (MPI when started by mpirun in an MPI build, else files), mpi, file");
    measure_cmd->add_option("--stop-after", m.stop_after, "stop after N descriptors (tests)")->group(hidden);
    measure_cmd->add_option("--gpu-timeout", m.gpu_timeout,
                            "cuda: give up on a GPU wait (a dead or stuck peer) after SECONDS and abort NCCL (default "
                            "600, PyTorch's NCCL timeout)");
    measure_cmd->add_option("--time-budget", m.time_budget,
                            "stop before a descriptor that would end past SECONDS since the start (one process only); "
                            "the rest is left for --resume");

    bool env_json = false, env_require_gpu = false;
    auto* env_cmd = app.add_subcommand("env", "print what this build finds at run time: GPUs, CUDA, cuBLASLt, NCCL");
    env_cmd->add_flag("--json", env_json, "print JSON");
    env_cmd->add_flag("--require-gpu", env_require_gpu, "exit 2 with 'no CUDA device: ...' when no GPU is usable");

    FitArgs f;
    auto* fit_cmd = app.add_subcommand("fit", "fit DIR/samples.jsonl into a hardware profile");
    fit_cmd->add_option("DIR", f.dir, "run directory written by measure")->required();
    fit_cmd->add_option("--out", f.out, "profile YAML to write")->required();
    fit_cmd->add_option("--base", f.base,
                        "datasheet profile to start from: id or path (default: from the device name)");
    fit_cmd->add_flag("--force", f.force, "overwrite an existing profile");
    fit_cmd->add_option("--map", f.maps,
                        "enter measured element type as a profile precision, e.g. fp32=bf16 (CPU runs)");
    fit_cmd->add_option("--id", f.id, "id of the written profile (default: the output file's stem)");
    fit_cmd->add_option("--name", f.name, "name of the written profile (default: '<base name> (calibrated)')");
    fit_cmd->add_option("--data-dir", f.data_dir, "folder with hardware/ (default: $TRAINSIM_DATA_DIR or scenarios/)");
    fit_cmd->add_flag("--json", f.json, "print the fit report as JSON");

    std::string show_file, show_vs, show_data;
    bool show_json = false;
    auto* show_cmd = app.add_subcommand("show", "print a profile, or compare it with another (--vs)");
    show_cmd->add_option("PROFILE", show_file, "profile id or path")->required();
    show_cmd->add_option("--vs", show_vs, "another profile (id or path) to compare with");
    show_cmd->add_option("--data-dir", show_data, "folder with hardware/");
    show_cmd->add_flag("--json", show_json, "print JSON");

    ImportArgs im;
    auto* import_cmd = app.add_subcommand("import", "turn other tools' measurements into DIR/samples.jsonl for fit "
                                                    "(nccl-tests, gemm), or a run of your own trainer into a "
                                                    "validation CSV row (run)");
    import_cmd->require_subcommand(1);
    auto add_common = [&im](CLI::App* cmd) {
        cmd->add_option("--out", im.out, "run directory to write samples.jsonl (and run.json) into")->required();
        auto* append = cmd->add_flag("--append", im.append, "add to an existing DIR/samples.jsonl");
        cmd->add_flag("--force", im.force, "replace an existing DIR/samples.jsonl")->excludes(append);
        cmd->add_flag("--json", im.json, "print the import summary as JSON");
    };
    auto* nccl_cmd = import_cmd->add_subcommand("nccl-tests", "import nccl-tests logs (*_perf output: text, or -J JSON)");
    nccl_cmd->add_option("FILE", im.files, "nccl-tests logs: the text printed on stdout, or the file -J wrote")->required();
    nccl_cmd->add_option("--op", im.op, "all_reduce | all_gather | reduce_scatter | all_to_all | send_recv (default: "
                                        "from the log, its file name or busbw / algbw)");
    // Ranges a person can read (CLI::PositiveNumber's upper end is DBL_MAX, printed in 309
    // digits): a collective spans at most the GPUs of the largest clusters (~200k, the scenario
    // range of parallel.dp, 2^20) on at most their nodes (cluster.nodes, 65536).
    nccl_cmd->add_option("--group-size", im.group_size, "ranks of the collective (default: the log's Rank lines)")
        ->check(CLI::Range(1, 1 << 20));
    nccl_cmd->add_option("--nodes", im.nodes, "hosts the ranks span (default: the hosts of the Rank lines)")
        ->check(CLI::Range(1, 65536));
    add_common(nccl_cmd);
    auto* gemm_cmd = import_cmd->add_subcommand("gemm", "import a GEMM sweep CSV (m,n,k,dtype,time)");
    gemm_cmd->add_option("CSV", im.files, "CSV files with the header m,n,k,dtype,time")->required();
    add_common(gemm_cmd);
    detail::RunImportArgs run_args;
    auto* run_cmd = detail::add_import_run_command(*import_cmd, run_args);

    try {
        app.parse(argc, argv);
    } catch (const CLI::ParseError& e) {
        const int code = app.exit(e);
        return code == 0 ? kExitOk : kExitBadInput;
    }
    if (*measure_cmd) return run_measure(m, argc, argv, cuda);
    if (*env_cmd) return run_env(cuda, env_json, env_require_gpu);
    if (*fit_cmd) return run_fit(f);
    if (*nccl_cmd) return run_import_nccl(im, argc, argv);
    if (*gemm_cmd) return run_import_gemm(im, argc, argv);
    if (*run_cmd) return detail::run_import_run(run_args, data_dir(run_args.data_dir));
    return run_show(show_file, show_vs, show_data, show_json);
}

} // namespace trainsim::calibrate
