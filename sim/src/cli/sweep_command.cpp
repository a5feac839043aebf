// trainsim sweep GRID.yaml: a plan search per cell of a grid of models, GPUs, counts, precisions,
// tokens, frameworks, stacks and prices, one row per cell and GPU count (docs/plan-search.md
// "Sweeps"). Rows are appended cell by cell to OUT.partial, renamed to OUT when the grid is done;
// --resume continues a killed sweep from its partial file.
#include "commands.hpp"

#include "sweep_mpi.hpp"

#include "trainsim/model/core/text_format.hpp"
#include "trainsim/model/input/sweep_grid.hpp"
#include "trainsim/sim/cli/sweep_schedule.hpp"
#include "trainsim/sim/report/sweep_html.hpp"

#include <fcntl.h>
#include <sched.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <chrono>
#include <cstring>
#include <set>
#include <sstream>

namespace trainsim::sim::cli {

namespace {

// The columns of a row: the cell, then the best plan of its GPU count as plan_json names its fields.
const std::vector<std::string>& columns() {
    static const std::vector<std::string> c{
        "grid", "cell", "model", "gpu", "precision", "tokens_axis", "framework_axis", "stack_axis", "price",
        "num_gpus", "status", "excluded_by", "pareto", "name", "tp", "pp", "vp", "cp", "dp", "micro_batch",
        "sharding", "recompute", "offload", "step_time_s", "tokens_per_s_per_gpu", "mfu", "memory_per_gpu_gib",
        "tokens", "days_to_train", "days_to_train_p10", "days_to_train_p90", "expected_days", "expected_days_p10",
        "expected_days_p90", "gpu_hours", "currency", "cost", "expected_cost", "expected_cost_p10",
        "expected_cost_p90", "unused_fraction", "energy_kwh", "band.basis"};
    return c;
}

// FNV-1a 64 of the grid's text: rows written for another grid are not resumed.
std::string fingerprint(const std::string& text) {
    std::uint64_t h = 1469598103934665603ULL;
    for (unsigned char ch : text) {
        h ^= ch;
        h *= 1099511628211ULL;
    }
    return fmt::format("{:016x}", h);
}

[[noreturn]] void sweep_error(const std::string& file, const std::string& key, const std::string& msg) {
    throw model::SweepGridError({model::Diagnostic{file, 0, 0, key, msg}});
}

// The first two fields of a CSV line (RFC 4180 quoting, as csv_line writes it).
std::vector<std::string> csv_fields(const std::string& line, std::size_t n) {
    std::vector<std::string> out;
    std::string cur;
    bool quoted = false;
    for (std::size_t i = 0; i < line.size() && out.size() < n; ++i) {
        const char ch = line[i];
        if (quoted) {
            if (ch == '"' && i + 1 < line.size() && line[i + 1] == '"') {
                cur += '"';
                ++i;
            } else if (ch == '"') {
                quoted = false;
            } else {
                cur += ch;
            }
        } else if (ch == '"') {
            quoted = true;
        } else if (ch == ',') {
            out.push_back(std::move(cur));
            cur.clear();
        } else {
            cur += ch;
        }
    }
    if (out.size() < n) out.push_back(std::move(cur));
    return out;
}

struct Output {
    fs::path final_path, partial;
    bool csv = true;
};

// What a partial file already holds: the cells done (a prefix of the grid's order), and the byte
// length of its complete cells (a cell cut by a kill, or a last line without its newline, is cut
// off before the sweep goes on).
struct Resumed {
    std::size_t cells_done = 0;
    std::size_t keep_bytes = 0;
    bool has_header = false;
};

Resumed read_partial(const Output& o, const std::vector<std::string>& keys, std::size_t per_cell,
                     const std::string& grid_fp) {
    Resumed r;
    std::ifstream in(o.partial, std::ios::binary);
    std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    std::size_t pos = 0, line_no = 0;
    std::string current;
    std::size_t rows_in_current = 0, cell_start = 0;
    const std::string header = csv_line(columns(), nullptr);
    while (pos < text.size()) {
        const auto nl = text.find('\n', pos);
        if (nl == std::string::npos) break; // a last line cut by a kill: dropped
        const std::string line = text.substr(pos, nl - pos);
        ++line_no;
        const std::size_t next = nl + 1;
        if (o.csv && line_no == 1) {
            if (line + "\n" != header)
                sweep_error(o.partial.string(), "--resume",
                            "its header is not this trainsim's sweep header: not a partial sweep of this version");
            r.has_header = true;
            r.keep_bytes = next;
            pos = next;
            continue;
        }
        std::string fp, cell;
        if (o.csv) {
            const auto f = csv_fields(line, 2);
            if (f.size() == 2) fp = f[0], cell = f[1];
        } else {
            try {
                const auto j = nlohmann::json::parse(line);
                fp = j.at("grid").get<std::string>();
                cell = j.at("cell").get<std::string>();
            } catch (const nlohmann::json::exception&) {
                sweep_error(o.partial.string(), fmt::format("line {}", line_no), "is not a sweep row (JSON)");
            }
        }
        if (fp != grid_fp)
            sweep_error(o.partial.string(), fmt::format("line {}", line_no),
                        "was written for another grid (the grid file changed since): --force starts over");
        if (cell != current) {
            if (!current.empty()) {
                if (rows_in_current != per_cell) break;
                ++r.cells_done;
                r.keep_bytes = pos;
            }
            if (r.cells_done >= keys.size() || keys[r.cells_done] != cell)
                sweep_error(o.partial.string(), fmt::format("line {}", line_no),
                            fmt::format("cell '{}' is not the grid's next cell ('{}'): --force starts over", cell,
                                        r.cells_done < keys.size() ? keys[r.cells_done] : "none"));
            current = cell;
            rows_in_current = 0;
            cell_start = pos;
        }
        ++rows_in_current;
        pos = next;
    }
    if (!current.empty() && rows_in_current == per_cell && pos == text.size()) {
        ++r.cells_done;
        r.keep_bytes = pos;
    } else if (!current.empty() && rows_in_current == per_cell && text.find('\n', pos) == std::string::npos &&
               cell_start < pos) {
        ++r.cells_done; // complete rows, then a cut line of the next cell
        r.keep_bytes = pos;
    }
    return r;
}

// Appends `text` to fd in one write (a kill leaves at most that cell cut), then syncs it.
void append(int fd, const std::string& text, const fs::path& path) {
    std::size_t done = 0;
    while (done < text.size()) {
        const ssize_t n = ::write(fd, text.data() + done, text.size() - done);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0)
            throw OutputError({model::Diagnostic{path.string(), 0, 0, "--out",
                                                 fmt::format("cannot write: {}", std::strerror(errno))}});
        done += static_cast<std::size_t>(n);
    }
    if (::fsync(fd) != 0)
        throw OutputError(
            {model::Diagnostic{path.string(), 0, 0, "--out", fmt::format("cannot sync: {}", std::strerror(errno))}});
}

// One cell's search: the best plan of each GPU count (absent: none qualifies), whether it is on
// the cell's days-vs-cost front, and why a count has no plan.
struct CellSearch {
    std::map<int, std::optional<RankedPlan>> best;
    std::map<int, bool> pareto;
    std::map<int, std::vector<std::string>> why;
};

double days_on(const RunEstimate& e, const SearchOptions& o) {
    return o.basis == DaysBasis::expected ? e.expected_days : e.days_to_train;
}
double cost_on(const RunEstimate& e, const SearchOptions& o) {
    return o.basis == DaysBasis::expected ? e.expected_cost : e.cost;
}

// The front as search_plans marks it: no other count both faster and cheaper (not worse in both).
void mark_pareto(CellSearch& s, const SearchOptions& o) {
    for (auto& entry : s.best) {
        const int n = entry.first; // not a structured binding: lambdas capture it (clang 14 refuses those)
        const auto& b = entry.second;
        s.pareto[n] = false;
        if (!b) continue;
        const double d = days_on(b->estimate, o), c = cost_on(b->estimate, o);
        s.pareto[n] = std::none_of(s.best.begin(), s.best.end(), [&](const auto& other) {
            if (other.first == n || !other.second) return false;
            const double d2 = days_on(other.second->estimate, o), c2 = cost_on(other.second->estimate, o);
            return d2 <= d && c2 <= c && (d2 < d || c2 < c);
        });
    }
}

CellSearch search_cell(const std::vector<int>& counts, const model::Plan& base, const SearchOptions& tmpl,
                       const std::optional<ErrorModel>& em) {
    SearchOptions o = tmpl;
    o.space.gpu_counts = counts;
    o.top = 1;
    o.rank = o.deadline_days && !o.budget && has_price(base.pricing) ? RankBy::cost : RankBy::days;
    CellSearch s;
    for (int n : counts) s.best[n] = std::nullopt;
    std::optional<SearchResult> res;
    try {
        res = search_plans(base, o);
    } catch (const SearchError&) {
        for (int n : counts) s.why[n] = {"no layout"};
        mark_pareto(s, o);
        return s;
    }
    if (res->frontier.empty()) {
        if (!res->plans.empty()) s.best[counts.front()] = res->plans.front();
    } else {
        for (auto& f : res->frontier) s.best[f.gpus] = f.best;
    }
    const bool constrained = o.deadline_days || o.budget;
    std::optional<ConstraintMiss> miss;
    if (constrained && std::any_of(s.best.begin(), s.best.end(), [](const auto& b) { return !b.second; }))
        miss = explain_constraint_miss(base, o);
    for (auto& [n, b] : s.best) {
        if (b) {
            attach_band(b->estimate, b->plan, em);
            continue;
        }
        if (miss)
            for (const auto& cm : miss->counts)
                if (cm.gpus == n) s.why[n] = cm.excluded_by;
        if (s.why[n].empty()) s.why[n] = {"memory"};
    }
    mark_pareto(s, o);
    return s;
}

// The same search for another price: without constraints nothing in a search depends on the price
// (the ranking is by days, and a count's cheapest plan is its fastest), so only the bills change.
CellSearch repriced(CellSearch s, const model::Pricing& pricing, const SearchOptions& o) {
    for (auto& [n, b] : s.best)
        if (b) {
            b->plan.pricing = pricing;
            reprice(b->estimate, b->plan);
        }
    mark_pareto(s, o);
    return s;
}

std::vector<nlohmann::json> cell_rows(const model::SweepGrid& g, const model::SweepCell& c, const CellSearch& s,
                                      const std::string& fp) {
    auto label = [](const std::vector<model::SweepValue>& v, std::size_t i) {
        return v.empty() ? nlohmann::json(nullptr) : nlohmann::json(v[i].label);
    };
    std::vector<nlohmann::json> rows;
    for (int n : g.counts) {
        const auto& b = s.best.at(n);
        nlohmann::json row = b ? plan_json(b->plan, b->estimate) : nlohmann::json::object();
        row["grid"] = fp;
        row["cell"] = model::sweep_cell_key(g, c);
        row["model"] = g.models[c.model].label;
        row["gpu"] = g.gpus[c.gpu].label;
        row["precision"] = g.precisions[c.precision].label;
        row["tokens_axis"] = g.tokens.empty() ? nlohmann::json("20/param") : nlohmann::json(g.tokens[c.tokens].label);
        row["framework_axis"] = label(g.frameworks, c.framework);
        row["stack_axis"] = label(g.stacks, c.stack);
        row["price"] = c.price < g.prices.size() ? nlohmann::json(g.prices[c.price].name) : nlohmann::json(nullptr);
        row["num_gpus"] = n;
        row["pareto"] = s.pareto.at(n);
        row["status"] = b ? "ok" : "no_plan";
        const auto it = s.why.find(n);
        row["excluded_by"] = b || it == s.why.end() ? std::string() : fmt::format("{}", fmt::join(it->second, "+"));
        rows.push_back(std::move(row));
    }
    return rows;
}

// The cell's key without its price: cells that differ only in their price share one search when
// nothing in it depends on the price (no deadline, no budget).
std::string key_without_price(const model::SweepGrid& g, const model::SweepCell& c) {
    auto k = c;
    k.price = static_cast<std::size_t>(-1);
    return model::sweep_cell_key(g, k);
}

// Everything a process needs to run cells: the grid, its cells and their plans, the search's
// options. Every rank builds it from the same grid file.
struct Prepared {
    model::SweepGrid grid;
    std::vector<model::SweepCell> cells;
    std::vector<model::Plan> bases;
    SearchOptions tmpl;
    std::optional<ErrorModel> em;
    std::string fp;
    std::vector<std::string> keys;
    bool share = false;
};

// The grid, from its file or from text in memory (the Python module's dict, docs/python.md).
model::SweepGrid read_grid(const SweepArgs& a) {
    return a.grid_text ? model::load_sweep_grid_text(*a.grid_text, a.grid, fs::current_path())
                       : model::load_sweep_grid(a.grid);
}

Prepared prepare(model::SweepGrid grid, const SweepArgs& a) {
    Prepared p;
    p.grid = std::move(grid);
    model::LoadOptions lo;
    lo.data_dir = data_dir(a.data_dir);
    p.cells = model::sweep_cells(p.grid);
    // Every cell's plan first: a problem in any cell is found before hours of searching.
    std::vector<model::Diagnostic> problems;
    for (const auto& c : p.cells) {
        try {
            p.bases.push_back(model::sweep_cell_plan(p.grid, c, lo));
        } catch (const model::InputError& e) {
            problems.insert(problems.end(), e.diagnostics().begin(), e.diagnostics().end());
        }
        if (!problems.empty() && problems.size() >= 20) break;
    }
    if (!problems.empty()) throw model::SweepGridError(problems);
    if (p.grid.budget)
        for (std::size_t i = 0; i < p.cells.size(); ++i)
            if (!has_price(p.bases[i].pricing))
                sweep_error(p.grid.file, "constraints.budget",
                            fmt::format("cell {} has no price: a budget needs prices (the grid's prices)",
                                        model::sweep_cell_key(p.grid, p.cells[i])));
    p.tmpl.basis = p.grid.days == "steady" ? DaysBasis::steady : DaysBasis::expected;
    p.tmpl.deadline_days = p.grid.deadline_days;
    p.tmpl.budget = p.grid.budget;
    if (!p.grid.memory_headroom.empty()) p.tmpl.memory_headroom = model::parse_fraction(p.grid.memory_headroom);
    p.em = load_error_model(lo.data_dir);
    p.fp = fingerprint(p.grid.text);
    for (const auto& c : p.cells) p.keys.push_back(model::sweep_cell_key(p.grid, c));
    p.share = !p.grid.deadline_days && !p.grid.budget;
    return p;
}

// One search and the cells that share it: a run of consecutive cells [first, last) that differ only
// in their price (one cell when searches are not shared), from the first cell not yet written.
struct Task {
    std::size_t first = 0, last = 0;
};

std::vector<Task> make_tasks(const Prepared& p, std::size_t start) {
    std::vector<Task> tasks;
    std::string prev;
    for (std::size_t i = start; i < p.cells.size(); ++i) {
        std::string k = p.share ? key_without_price(p.grid, p.cells[i]) : std::string();
        if (p.share && !tasks.empty() && k == prev) {
            tasks.back().last = i + 1;
            continue;
        }
        tasks.push_back({i, i + 1});
        prev = std::move(k);
    }
    return tasks;
}

// The rows of a task's cells as the output holds them (CSV lines, or JSON lines: for a .jsonl
// output and for standard output), one string per cell. Whichever process runs it, the text is
// the same: that is what makes an MPI sweep's file the single process's.
SweepTaskRows run_task(const Prepared& p, const Task& t, bool csv) {
    SweepTaskRows out;
    const CellSearch s = search_cell(p.grid.counts, p.bases[t.first], p.tmpl, p.em);
    for (std::size_t i = t.first; i < t.last; ++i) {
        const CellSearch c = i == t.first ? s : repriced(s, p.bases[i].pricing, p.tmpl);
        std::string text;
        for (const auto& r : cell_rows(p.grid, p.cells[i], c, p.fp))
            text += csv ? csv_line(columns(), r) : r.dump() + "\n";
        out.push_back(std::move(text));
    }
    return out;
}

bool rows_as_csv(const SweepArgs& a) {
    return !a.out.empty() && fs::path(a.out).extension() == ".csv";
}

// How a process spreads its cores: `jobs` searches at once (--jobs, else one per core up to the
// tasks), each on `per_search` threads (--threads, else the cores left to it). Under MPI the cores
// are the node's, shared by its ranks. Neither changes a row (the search's result does not depend
// on its threads; tested).
struct CoreUse {
    unsigned jobs = 1, per_search = 1;
};
CoreUse core_use(const SweepArgs& a, const SweepWorld* w, std::size_t tasks) {
    const unsigned hw = std::max(1U, std::thread::hardware_concurrency());
    unsigned cores = std::max(1U, hw / static_cast<unsigned>(w != nullptr ? std::max(1, w->local_size()) : 1));
    // A launcher that binds the process to fewer cores (Open MPI binds each of 2 ranks to a core,
    // srun --cpus-per-task to its CPUs): those, or its threads would share them.
    cpu_set_t set;
    CPU_ZERO(&set);
    if (sched_getaffinity(0, sizeof(set), &set) == 0)
        cores = std::min(cores, std::max(1U, static_cast<unsigned>(CPU_COUNT(&set))));
    CoreUse c;
    c.jobs = a.jobs != 0 ? a.jobs
                         : static_cast<unsigned>(std::max<std::size_t>(1, std::min<std::size_t>(cores, tasks)));
    c.per_search = a.threads != 0 ? a.threads : std::max(1U, cores / c.jobs);
    return c;
}

// "[########            ]  40% 12/30 cells, about 3 min left" on standard error: redrawn in place
// on a terminal, one line per whole percent otherwise (--progress into a log). Time left: the
// time per cell so far in this run times the cells left.
class SweepProgress {
public:
    SweepProgress(std::size_t done, std::size_t total, bool tty)
        : first_(done), done_(done), total_(total), tty_(tty), t0_(std::chrono::steady_clock::now()) {
        draw();
    }
    void cell_done() {
        ++done_;
        draw();
    }

private:
    void draw() {
        const int pct = total_ == 0 ? 100 : static_cast<int>(100 * done_ / total_);
        const auto now = std::chrono::steady_clock::now();
        if (pct == last_pct_ && (!tty_ || now - last_ < std::chrono::seconds(1)) && done_ != total_) return;
        if (pct == last_pct_ && done_ == total_ && drawn_final_) return;
        last_pct_ = pct;
        last_ = now;
        std::string left;
        const double elapsed = std::chrono::duration<double>(now - t0_).count();
        if (done_ > first_ && done_ < total_)
            left = ", about " + duration_words(elapsed / static_cast<double>(done_ - first_) *
                                               static_cast<double>(total_ - done_)) + " left";
        constexpr int w = 30;
        const int fill = pct * w / 100;
        std::cerr << fmt::format("{}[{:<{}}] {:3d}% {}/{} cells{}{}", tty_ ? "\r" : "",
                                 std::string(static_cast<std::size_t>(fill), '#'), w, pct, done_, total_, left,
                                 tty_ ? "\x1b[K" : "\n")
                  << std::flush;
        if (done_ == total_) {
            if (tty_) std::cerr << "\n";
            drawn_final_ = true;
        }
    }
    static std::string duration_words(double s) {
        if (s < 60) return fmt::format("{:.0f} s", std::max(1.0, s));
        if (s < 3600) return fmt::format("{:.0f} min", s / 60);
        const double h = std::floor(s / 3600);
        return fmt::format("{:.0f} h {:02.0f} min", h, (s - h * 3600) / 60);
    }
    std::size_t first_, done_, total_;
    bool tty_;
    std::chrono::steady_clock::time_point t0_, last_;
    int last_pct_ = -1;
    bool drawn_final_ = false;
};

// The columns that hold text (the rest are numbers, and `pareto` a flag): how a CSV row is read
// back for the HTML table.
bool text_column(const std::string& c) {
    static const std::set<std::string> t{"grid", "cell", "model", "gpu", "precision", "tokens_axis",
                                         "framework_axis", "stack_axis", "price", "status", "excluded_by", "name",
                                         "sharding", "recompute", "offload", "currency", "band.basis"};
    return t.count(c) > 0;
}

// The rows of a finished output file (the HTML table is made from the file, so it shows what the
// file holds, resumed parts included). An empty CSV field is an absent value.
std::vector<nlohmann::json> read_rows(const Output& o) {
    const std::string text = model::read_regular_file(o.final_path, model::kMaxDataFileBytes);
    std::vector<nlohmann::json> rows;
    std::istringstream in(text);
    std::size_t line_no = 0;
    for (std::string line; std::getline(in, line);) {
        ++line_no;
        if (o.csv && line_no == 1) continue;
        if (!o.csv) {
            rows.push_back(nlohmann::json::parse(line));
            continue;
        }
        const auto f = csv_fields(line, columns().size());
        nlohmann::json row = nlohmann::json::object();
        for (std::size_t i = 0; i < f.size() && i < columns().size(); ++i) {
            const std::string& c = columns()[i];
            if (f[i].empty()) continue;
            if (c == "pareto") {
                row[c] = f[i] == "true";
            } else if (text_column(c)) {
                row[c] = f[i];
            } else {
                double v = 0;
                const auto [end, ec] = std::from_chars(f[i].data(), f[i].data() + f[i].size(), v);
                if (ec == std::errc() && end == f[i].data() + f[i].size())
                    row[c] = v;
                else
                    row[c] = f[i];
            }
        }
        rows.push_back(std::move(row));
    }
    return rows;
}

// A worker rank: the same grid, cells and tasks as rank 0, from where rank 0 says the sweep starts.
int run_sweep_worker(const SweepArgs& a, SweepWorld& w) {
    const std::string go = w.broadcast(std::string());
    if (go.empty()) return kExitBadInput; // rank 0 failed before the sweep and says why
    const auto space = go.find(' ');
    const auto start = static_cast<std::size_t>(std::stoull(go.substr(0, space)));
    const std::string root_fp = go.substr(space + 1);
    std::optional<Prepared> p;
    try {
        p.emplace(prepare(read_grid(a), a));
        if (p->fp != root_fp)
            sweep_error(a.grid, "mpirun",
                        fmt::format("this rank reads another grid file than rank 0 ({}: fingerprint {}, rank 0's "
                                    "{}): every rank must read the same grid (a shared file system)",
                                    w.host(), p->fp, root_fp));
    } catch (const model::InputError& e) {
        w.fail_worker({w.rank(), w.host(), true, e.what()});
    } catch (const std::exception& e) {
        w.fail_worker({w.rank(), w.host(), false, e.what()});
    }
    const auto tasks = make_tasks(*p, start);
    const CoreUse use = core_use(a, &w, tasks.size());
    p->tmpl.threads = use.per_search;
    const bool csv = rows_as_csv(a);
    w.run_worker(
        [&](std::size_t t) {
            if (t >= tasks.size())
                throw std::runtime_error(fmt::format("rank 0 asked for task {} of {}", t, tasks.size()));
            return run_task(*p, tasks[t], csv);
        },
        use.jobs);
    return kExitOk;
}

} // namespace

int run_sweep(const SweepArgs& a) {
    const auto env = [](const char* v) -> const char* { return std::getenv(v); };
    std::optional<SweepWorld> world;
    if (launched_by_mpi(env)) {
        if (sweep_built_with_mpi()) {
            world.emplace();
            if (world->size() == 1) world.reset(); // mpirun -n 1: a single process
        } else if (const int n = launcher_world_size(env); n > 1) {
            sweep_error(a.grid, "mpirun",
                        fmt::format("this trainsim was built without MPI (CMake found no MPI, e.g. Debian's "
                                    "libopenmpi-dev, when it was configured), so each of the {} ranks would run the "
                                    "whole grid and write the same file: run it as one process, or rebuild it with "
                                    "MPI (scripts/setup installs Open MPI)",
                                    n));
        }
    }
    if (world && world->rank() != 0) return run_sweep_worker(a, *world);

    // Rank 0 (or the only process): the output, the grid, where the sweep starts; the other ranks
    // hear where it starts, or that it stopped here (they end quietly; this rank says why).
    Output o;
    std::optional<Prepared> prep;
    std::size_t start = 0;
    int fd = -1;
    Resumed resumed;
    // --resume on an output that is already a complete sweep of this grid (issue #43): nothing is
    // searched again or rewritten; the page (--html) is still made from the file.
    bool complete = false;
    try {
        auto grid = read_grid(a);
        if (!a.out.empty()) {
            o.final_path = a.out;
            const auto ext = o.final_path.extension().string();
            if (ext == ".jsonl" || ext == ".json") o.csv = false;
            else if (ext != ".csv")
                sweep_error(a.out, "--out", "names its format by its ending: .csv or .jsonl");
            o.partial = fs::path(a.out + ".partial");
            std::error_code ec;
            for (const auto& path : {o.final_path, o.partial}) {
                const auto st = fs::symlink_status(path, ec);
                if (!ec && fs::exists(st) && !fs::is_regular_file(st))
                    sweep_error(path.string(), "--out",
                                "exists and is not a regular file (a folder, a link, a FIFO or a device)");
            }
            if (a.force) {
                fs::remove(o.partial, ec);
            } else {
                if (fs::exists(o.final_path, ec) && !a.resume)
                    sweep_error(a.out, "--out", "already exists: --force replaces it (once the new sweep is complete)");
                if (fs::exists(o.partial, ec) && !a.resume)
                    sweep_error(o.partial.string(), "--out",
                                "holds a sweep that did not finish: --resume continues it, --force starts over");
            }
        } else if (a.resume) {
            sweep_error(a.grid, "--resume", "continues the partial file of an --out: give --out");
        }
        if (!a.html.empty() && a.html != "-") {
            // Checked now, not after hours of searching (the page is written when the sweep is done).
            std::error_code ec;
            const fs::path html(a.html);
            if (fs::is_directory(html, ec))
                sweep_error(a.html, "--html", "is a folder: name the page's file");
            if (const auto dir = html.parent_path(); !dir.empty() && !fs::is_directory(dir, ec))
                sweep_error(a.html, "--html", fmt::format("its folder {} does not exist", dir.string()));
        }
        prep.emplace(prepare(std::move(grid), a));
        if (!o.final_path.empty()) {
            std::error_code ec;
            if (a.resume && !fs::exists(o.partial, ec) && fs::exists(o.final_path, ec)) {
                // Read as a partial file would be: another grid's rows, or cells out of order, are
                // the same errors; a finished file must hold every cell whole and nothing after.
                Output finished = o;
                finished.partial = o.final_path;
                const auto r = read_partial(finished, prep->keys, prep->grid.counts.size(), prep->fp);
                const auto bytes = fs::file_size(o.final_path, ec);
                if (ec || r.cells_done != prep->cells.size() || r.keep_bytes != bytes)
                    sweep_error(a.out, "--resume",
                                fmt::format("exists but holds {} of the grid's {} cells and no partial file is beside "
                                            "it: --force starts over",
                                            r.cells_done, prep->cells.size()));
                complete = true;
                std::cerr << fmt::format("trainsim: sweep: {} is complete ({} of {} cells): nothing to resume\n",
                                         o.final_path.string(), r.cells_done, prep->cells.size());
                start = prep->cells.size();
            } else if (a.resume && fs::exists(o.partial, ec)) {
                resumed = read_partial(o, prep->keys, prep->grid.counts.size(), prep->fp);
                fs::resize_file(o.partial, resumed.keep_bytes, ec);
                if (ec)
                    sweep_error(o.partial.string(), "--resume", "cannot cut its unfinished cell: " + ec.message());
                std::cerr << fmt::format("trainsim: sweep: resuming {}: {} of {} cells done\n", o.partial.string(),
                                         resumed.cells_done, prep->cells.size());
            }
            if (!complete) {
                start = resumed.cells_done;
                fd = ::open(o.partial.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC | O_NOFOLLOW, 0644);
                if (fd < 0)
                    throw OutputError({model::Diagnostic{o.partial.string(), 0, 0, "--out",
                                                         fmt::format("cannot open: {}", std::strerror(errno))}});
            }
        }
    } catch (...) {
        if (world) (void)world->broadcast(std::string()); // the other ranks stop; this one says why
        throw;
    }
    if (world) (void)world->broadcast(fmt::format("{} {}", start, prep->fp));
    struct FdGuard {
        int fd;
        ~FdGuard() {
            if (fd >= 0) ::close(fd);
        }
    } guard{fd};
    if (fd >= 0 && o.csv && !resumed.has_header) append(fd, csv_line(columns(), nullptr), o.partial);

    const auto tasks = make_tasks(*prep, start);
    const CoreUse use = core_use(a, world ? &*world : nullptr, tasks.size());
    prep->tmpl.threads = use.per_search;
    const Prepared& p = *prep;
    const auto& grid = p.grid;
    const auto& cells = p.cells;
    const bool csv = rows_as_csv(a);
    const bool bar = !a.quiet && (a.progress || isatty(STDERR_FILENO) != 0);
    std::optional<SweepProgress> progress;
    if (bar) progress.emplace(start, cells.size(), isatty(STDERR_FILENO) != 0);
    const auto t0 = std::chrono::steady_clock::now();
    std::vector<nlohmann::json> all; // without --out: printed at the end
    std::vector<double> cost;
    for (const auto& t : tasks) cost.push_back(sweep_search_cost(p.bases[t.first].model.layers, grid.counts));
    // Two tasks per search running at once within reach of the first unwritten one
    // (sweep_schedule.hpp); under MPI every rank is taken to run as many as this one.
    const std::size_t slots = static_cast<std::size_t>(use.jobs) * static_cast<std::size_t>(world ? world->size() : 1);
    SweepQueue queue(std::move(cost), 2 * slots);
    SweepTasks run;
    run.count = tasks.size();
    run.order = [&](std::size_t first_undelivered) { return queue.next(first_undelivered).value_or(tasks.size()); };
    run.compute = [&](std::size_t t) { return run_task(p, tasks[t], csv); };
    run.deliver = [&](std::size_t, SweepTaskRows rows) {
        for (const auto& text : rows) {
            if (fd >= 0) {
                append(fd, text, o.partial);
            } else {
                std::istringstream in(text);
                for (std::string line; std::getline(in, line);) all.push_back(nlohmann::json::parse(line));
            }
            if (progress) progress->cell_done();
        }
    };
    if (world) {
        try {
            world->run_root(run, use.jobs);
        } catch (const SweepRankFailed& e) {
            const auto& f = e.failure;
            const std::string who = fmt::format("rank {}{}", f.rank, f.host.empty() ? "" : " (" + f.host + ")");
            if (f.input) sweep_error(a.grid, who, f.message);
            throw std::runtime_error(fmt::format("{}: {}", who, f.message));
        }
    } else {
        run_sweep_tasks(run, use.jobs);
    }
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    const std::string ranks = world ? fmt::format(" over {} MPI ranks", world->size()) : std::string();
    if (fd >= 0) {
        std::error_code ec;
        fs::rename(o.partial, o.final_path, ec);
        if (ec)
            throw OutputError({model::Diagnostic{o.final_path.string(), 0, 0, "--out",
                                                 fmt::format("cannot rename {} over it: {}", o.partial.string(),
                                                             ec.message())}});
        std::cerr << fmt::format("trainsim: sweep: {} cells x {} GPU counts = {} rows in {}, {} searches{}, {:.1f} s\n",
                                 cells.size(), grid.counts.size(), cells.size() * grid.counts.size(),
                                 o.final_path.string(), tasks.size(), ranks, seconds);
    }
    if (!a.html.empty()) {
        SweepPage page;
        page.title = grid.title;
        page.grid_file = a.grid;
        page.expected_days = p.tmpl.basis == DaysBasis::expected;
        page.cells = cells.size();
        page.counts = grid.counts.size();
        const std::string html = sweep_html(page, fd >= 0 || complete ? read_rows(o) : all);
        const std::string note = write_file_atomically(a.html, "--html", [&](std::ostream& os) { os << html; });
        if (!note.empty()) std::cerr << "trainsim: " << note << "\n";
    }
    if (fd >= 0 || complete || a.html == "-") return kExitOk; // with --html -, standard output carries the page
    if (a.json && a.json_out) {
        *a.json_out = nlohmann::json(std::move(all));
    } else if (a.json) {
        for (const auto& r : all) std::cout << r.dump() << "\n";
    } else if (a.csv) {
        std::cout << csv_line(columns(), nullptr);
        for (const auto& r : all) std::cout << csv_line(columns(), r);
    } else {
        if (!grid.title.empty()) std::cout << grid.title << "\n";
        std::cout << fmt::format("{} cells x {} GPU counts in {:.1f} s ('*': on the cell's days-vs-cost front)\n\n",
                                 cells.size(), grid.counts.size(), seconds);
        std::cout << fmt::format("{:<16} {:<16} {:<5} {:<10} {:>6}  {:<38} {:>8} {:>9} {:>14}\n", "model", "gpu", "prec",
                                 "price", "GPUs", "best layout", "days", "exp.days", "bill");
        for (const auto& r : all) {
            auto str = [&](const char* k) { return r.contains(k) && r[k].is_string() ? r[k].get<std::string>() : "-"; };
            auto num = [&](const char* k, const char* f) {
                return r.contains(k) && r[k].is_number() ? fmt::format(fmt::runtime(f), r[k].get<double>())
                                                         : std::string("-");
            };
            const bool ok = r["status"] == "ok";
            std::cout << fmt::format(
                "{:<16} {:<16} {:<5} {:<10} {:>5}{}  {:<38} {:>8} {:>9} {:>14}\n", str("model"), str("gpu"),
                str("precision"), str("price"), r["num_gpus"].get<int>(), r["pareto"].get<bool>() ? "*" : " ",
                ok ? layout_words(r) : fmt::format("no plan ({})", r["excluded_by"].get<std::string>()),
                num("days_to_train", "{:.1f}"), num("expected_days", "{:.1f}"),
                r.contains("expected_cost") && r["expected_cost"].is_number()
                    ? model::format_money(r["expected_cost"].get<double>(), str("currency"))
                    : std::string("-"));
        }
    }
    return kExitOk;
}

// "tp8 pp2 dp4 mbs1 dist_opt rc:none" from a row (plan_json's layout fields), as the HTML table says it.
std::string layout_words(const nlohmann::json& r) {
    return sweep_layout_words(r);
}

} // namespace trainsim::sim::cli
