// trainsim._trainsim: the Python module's C++ half (docs/python.md). Each function fills the
// arguments of a CLI command (sim/src/cli/commands.hpp) and runs that command with --json, its
// JSON handed back through json_out instead of printed: the module returns exactly what the CLI's
// --json prints, computed by the same code. The Python half (trainsim/__init__.py) adds to_pandas.
//
// A scenario (or sweep grid) is a path (str, bytes, os.PathLike) or a dict with the keys of the
// YAML file. A dict goes to the same loader as YAML text (its JSON form, which YAML reads), named
// "<dict>": problems name the key path ("plans[1].parallel.tp"); relative paths in it are read
// from the current directory. Bad input raises trainsim.Error (a ValueError) whose message is what
// the CLI prints after "trainsim: " and whose `diagnostics` lists each problem's file, line, col,
// key and message; a broken invariant raises trainsim.InternalError (a RuntimeError).
#include "commands.hpp"

#include "trainsim/model/core/errors.hpp"

#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <vector>

namespace py = pybind11;

namespace trainsim::sim::python {
namespace {

using nlohmann::json;

// The file name a dict scenario or grid carries in diagnostics. Its line:col point into the JSON
// text the module wrote, which the caller never saw: messages about it name the key path only.
constexpr const char* kDictName = "<dict>";

py::object& error_type() {
    static py::object t; // set once at import; the module lives as long as the interpreter
    return t;
}

// Raises trainsim.Error for `e`: the CLI's message (without line:col for a dict) and the diagnostics.
[[noreturn]] void raise_input_error(const model::InputError& e) {
    std::string msg = e.what();
    const auto first_line = msg.substr(0, msg.find('\n'));
    py::list diags;
    bool from_dict = false;
    for (const auto& d : e.diagnostics()) {
        py::dict one;
        one["file"] = d.file;
        one["line"] = d.line;
        one["col"] = d.col;
        one["key"] = d.key;
        one["message"] = d.message;
        diags.append(one);
        from_dict = from_dict || d.file == kDictName;
    }
    if (from_dict) {
        msg = first_line;
        for (auto d : e.diagnostics()) {
            if (d.file == kDictName) d.line = d.col = 0;
            msg += "\n  " + d.format();
        }
    }
    py::object err = error_type()(msg);
    err.attr("diagnostics") = diags;
    PyErr_SetObject(error_type().ptr(), err.ptr());
    throw py::error_already_set();
}

// A problem in a dict (file kDictName) or in a keyword argument (file "trainsim.plan" ...).
[[noreturn]] void raise_value_error(const std::string& file, const std::string& key, const std::string& msg) {
    raise_input_error(model::InputError("argument", {model::Diagnostic{file, 0, 0, key, msg}}));
}

// ---- Python -> JSON (a dict scenario) ----

std::string child(const std::string& path, const std::string& key) {
    return path.empty() ? key : path + "." + key;
}

json to_json(py::handle h, const std::string& path) {
    if (h.is_none()) return nullptr;
    if (py::isinstance<py::bool_>(h)) return h.cast<bool>();
    if (py::isinstance<py::int_>(h)) {
        int overflow = 0;
        const long long v = PyLong_AsLongLongAndOverflow(h.ptr(), &overflow);
        if (overflow != 0) raise_value_error(kDictName, path, "an integer beyond 64 bits");
        return v;
    }
    if (py::isinstance<py::float_>(h)) {
        const double v = h.cast<double>();
        if (!std::isfinite(v)) raise_value_error(kDictName, path, fmt::format("not a finite number ({})", v));
        return v;
    }
    if (py::isinstance<py::str>(h)) return h.cast<std::string>();
    if (py::hasattr(h, "__fspath__")) return py::module_::import("os").attr("fsdecode")(h).cast<std::string>();
    if (py::isinstance<py::dict>(h) || py::isinstance(h, py::module_::import("collections.abc").attr("Mapping"))) {
        json obj = json::object();
        for (auto item : h.attr("items")()) {
            const auto kv = item.cast<py::tuple>();
            if (!py::isinstance<py::str>(kv[0]))
                raise_value_error(kDictName, path.empty() ? std::string("(top level)") : path,
                                  fmt::format("key {} is a {}, not a string", py::repr(kv[0]).cast<std::string>(),
                                              py::type::of(kv[0]).attr("__name__").cast<std::string>()));
            const auto key = kv[0].cast<std::string>();
            obj[key] = to_json(kv[1], child(path, key));
        }
        return obj;
    }
    if (py::isinstance<py::list>(h) || py::isinstance<py::tuple>(h)) {
        json arr = json::array();
        std::size_t i = 0;
        for (auto item : h) arr.push_back(to_json(item, fmt::format("{}[{}]", path, i++)));
        return arr;
    }
    // NumPy scalars and the like: numpy.bool_ as a bool (its __index__ would make it 0 or 1),
    // integers by __index__, reals by __float__.
    if (const auto t = py::type::of(h); py::str(t.attr("__module__")).cast<std::string>() == "numpy" &&
                                        py::str(t.attr("__name__")).cast<std::string>() == "bool_")
        return PyObject_IsTrue(h.ptr()) == 1;
    if (py::hasattr(h, "__index__")) return to_json(py::reinterpret_steal<py::object>(PyNumber_Index(h.ptr())), path);
    if (py::hasattr(h, "__float__")) return to_json(py::float_(py::reinterpret_borrow<py::object>(h)), path);
    raise_value_error(kDictName, path,
                      fmt::format("a {} is not a scenario value (str, int, float, bool, None, list or dict)",
                                  py::type::of(h).attr("__name__").cast<std::string>()));
}

// ---- JSON -> Python (the result) ----

// Invalid UTF-8 is replaced (U+FFFD), as the CLI's dump does (error_handler_t::replace).
py::str utf8(const std::string& s) {
    PyObject* o = PyUnicode_DecodeUTF8(s.data(), static_cast<Py_ssize_t>(s.size()), "replace");
    if (o == nullptr) throw py::error_already_set();
    return py::reinterpret_steal<py::str>(o);
}

py::object to_python(const json& j) {
    switch (j.type()) {
        case json::value_t::null:
        case json::value_t::discarded:
            return py::none();
        case json::value_t::boolean:
            return py::bool_(j.get<bool>());
        case json::value_t::number_integer:
            return py::int_(j.get<std::int64_t>());
        case json::value_t::number_unsigned:
            return py::int_(j.get<std::uint64_t>());
        case json::value_t::number_float: {
            // The CLI's dump writes a non-finite number as null.
            const double v = j.get<double>();
            return std::isfinite(v) ? py::object(py::float_(v)) : py::object(py::none());
        }
        case json::value_t::string:
            return utf8(j.get_ref<const std::string&>());
        case json::value_t::array: {
            py::list l;
            for (const auto& e : j) l.append(to_python(e));
            return l;
        }
        case json::value_t::object: {
            py::dict d;
            for (const auto& [k, v] : j.items()) d[utf8(k)] = to_python(v);
            return d;
        }
        case json::value_t::binary: {
            const auto& b = j.get_binary();
            return py::bytes(reinterpret_cast<const char*>(b.data()), b.size());
        }
    }
    return py::none();
}

// ---- the scenario argument ----

struct Source {
    std::string file;                // a path, or kDictName
    std::optional<std::string> text; // a dict's YAML (JSON) text
};

Source source(py::handle scenario, const char* what) {
    if (py::isinstance<py::str>(scenario) || py::isinstance<py::bytes>(scenario) || py::hasattr(scenario, "__fspath__"))
        return {py::module_::import("os").attr("fsdecode")(scenario).cast<std::string>(), std::nullopt};
    if (py::isinstance<py::dict>(scenario) ||
        py::isinstance(scenario, py::module_::import("collections.abc").attr("Mapping")))
        return {kDictName, to_json(scenario, "").dump(2, ' ', false)};
    throw py::type_error(fmt::format("{} is a path (str or os.PathLike) or a dict, not a {}", what,
                                     py::type::of(scenario).attr("__name__").cast<std::string>()));
}

// Runs a command with the GIL released; its input errors become trainsim.Error.
template <class F>
json run_command(F&& f) {
    json out;
    try {
        py::gil_scoped_release nogil;
        f(out);
    } catch (const model::InputError& e) {
        raise_input_error(e);
    }
    return out;
}

// ---- the commands ----

py::object simulate_or_compare(py::handle scenario, bool side_by_side, const std::string& data_dir,
                               const std::string& profile, const std::string& stack, bool all_ranks,
                               const std::string& trace) {
    const auto src = source(scenario, "scenario");
    cli::Common c;
    c.file = src.file;
    c.text = src.text;
    c.data_dir = data_dir;
    c.profile = profile;
    c.stack = stack;
    c.all_ranks = all_ranks;
    c.json = true;
    if (trace == "-")
        raise_value_error("trainsim.simulate", "trace", "'-' (standard output) is for the CLI: give a file name");
    c.trace = trace;
    return to_python(run_command([&](json& out) {
        c.json_out = &out;
        (void)cli::run_plans(c, side_by_side);
    }));
}

// The GPU counts: one int or a sequence of ints, each as `plan --gpus` takes it.
std::vector<int> gpu_counts(py::handle h) {
    std::vector<int> out;
    auto one = [&](py::handle v) {
        if (py::isinstance<py::bool_>(v) || !py::isinstance<py::int_>(v))
            throw py::type_error(fmt::format("gpus: an int or a list of ints, not a {}",
                                             py::type::of(v).attr("__name__").cast<std::string>()));
        const long long n = v.cast<long long>();
        if (n < 1 || n > cli::kMaxPlanGpus)
            raise_value_error("trainsim.plan", "gpus", fmt::format("{} is not in 1 to {}", n, cli::kMaxPlanGpus));
        out.push_back(static_cast<int>(n));
    };
    if (py::isinstance<py::int_>(h))
        one(h);
    else if (py::isinstance<py::str>(h))
        throw py::type_error("gpus: an int or a list of ints, not a str");
    else
        for (auto v : h) one(v);
    return out;
}

// A count or size that the CLI takes as text ("1T", "5%"): a str as it is, a number as the CLI
// would read its digits.
std::string text_of(py::handle h, const char* name) {
    if (py::isinstance<py::str>(h)) return h.cast<std::string>();
    if (py::isinstance<py::int_>(h) && !py::isinstance<py::bool_>(h)) return fmt::format("{}", h.cast<long long>());
    if (py::isinstance<py::float_>(h)) return fmt::format("{}", h.cast<double>());
    throw py::type_error(
        fmt::format("{}: a str or a number, not a {}", name, py::type::of(h).attr("__name__").cast<std::string>()));
}

template <class T>
void set(std::optional<T> v, T& field) {
    if (v) field = std::move(*v);
}

} // namespace
} // namespace trainsim::sim::python

PYBIND11_MODULE(_trainsim, m) {
    using namespace trainsim::sim;
    using namespace trainsim::sim::python;
    m.doc() = "trainsim's commands from Python: the same library code and the same fields as the CLI's --json";
    m.attr("__version__") = TRAINSIM_VERSION;

    error_type() = py::reinterpret_steal<py::object>(PyErr_NewExceptionWithDoc(
        "trainsim.Error",
        "Bad input (a scenario, a grid, a profile, an argument): the message the CLI prints, and `diagnostics`, "
        "one dict per problem with file, line, col, key and message.",
        PyExc_ValueError, nullptr));
    m.attr("Error") = error_type();
    // Any other C++ exception is what the CLI calls an internal error (exit 1); pybind11's own
    // (TypeError, a Python error passing through) and bad_alloc (MemoryError) keep their types.
    static py::exception<trainsim::sim::SimulationStuck> internal(m, "InternalError", PyExc_RuntimeError);
    py::register_exception_translator([](std::exception_ptr p) {
        try {
            if (p) std::rethrow_exception(p);
        } catch (const py::builtin_exception&) {
            throw;
        } catch (const py::error_already_set&) {
            throw;
        } catch (const std::bad_alloc&) {
            throw;
        } catch (const trainsim::model::InputError& e) {
            // Raised outside run_command (none today): still a trainsim.Error.
            PyErr_SetString(error_type().ptr(), e.what());
        } catch (const std::exception& e) {
            PyErr_SetString(internal.ptr(), fmt::format("internal error: {}", e.what()).c_str());
        }
    });

    const char* common_doc = R"(scenario: a scenario YAML path (str or os.PathLike) or a dict with its keys.
data_dir: the folder with models/ and hardware/ (default: $TRAINSIM_DATA_DIR or the shipped scenarios/).
profile: a hardware profile YAML used for every plan. stack: a stack profile YAML every plan runs with.
all_ranks: simulate every rank (slower, same result).)";

    m.def(
        "simulate",
        [](const py::object& scenario, const std::string& data_dir, const std::string& profile,
           const std::string& stack, bool all_ranks, const std::string& trace) {
            return simulate_or_compare(scenario, false, data_dir, profile, stack, all_ranks, trace);
        },
        py::arg("scenario"), py::kw_only(), py::arg("data_dir") = "", py::arg("profile") = "", py::arg("stack") = "",
        py::arg("all_ranks") = false, py::arg("trace") = "",
        (std::string("Simulates every plan of a scenario: what `trainsim simulate FILE --json` prints (one plan: "
                     "its object; several: {'plans': [...]}).\n") +
         common_doc + "\ntrace: write the step as a Chrome/Perfetto trace (several plans: FILE.1.json ...).")
            .c_str());
    m.def(
        "compare",
        [](const py::object& scenario, const std::string& data_dir, const std::string& profile,
           const std::string& stack,
           bool all_ranks) { return simulate_or_compare(scenario, true, data_dir, profile, stack, all_ranks, ""); },
        py::arg("scenario"), py::kw_only(), py::arg("data_dir") = "", py::arg("profile") = "", py::arg("stack") = "",
        py::arg("all_ranks") = false,
        (std::string("A scenario's plans side by side: what `trainsim compare FILE --json` prints (the same JSON as "
                     "simulate; to_pandas() makes the table).\n") +
         common_doc)
            .c_str());

    m.def(
        "plan",
        [](const py::object& scenario, const std::string& data_dir, const std::string& profile,
           const std::string& stack, const std::string& model, const std::string& gpu, const py::object& gpus,
           const py::object& tokens, std::optional<int> seq_len, std::optional<int> global_batch,
           std::optional<std::string> precision, std::optional<double> price, std::optional<std::string> currency,
           std::optional<long long> top, const std::string& rank, std::optional<double> deadline_days,
           std::optional<double> budget, std::optional<int> max_micro_batch, const py::object& memory_headroom,
           bool try_without_sp, bool no_prune, unsigned threads, std::optional<std::string> days,
           std::optional<std::string> checkpoint_bandwidth, std::optional<double> gpu_mtbf_hours,
           std::optional<double> restart_minutes, bool max_tokens, std::vector<std::string> models, bool no_offload) {
            cli::PlanArgs a;
            if (!scenario.is_none()) {
                const auto src = source(scenario, "scenario");
                a.file = src.file;
                a.text = src.text;
            }
            a.data_dir = data_dir;
            a.profile = profile;
            a.stack = stack;
            a.model = model;
            a.gpu = gpu;
            if (!gpus.is_none()) a.gpus = gpu_counts(gpus);
            if (!tokens.is_none()) a.tokens = text_of(tokens, "tokens");
            set(seq_len, a.seq_len);
            set(global_batch, a.global_batch);
            set(precision, a.precision);
            a.price = price;
            set(currency, a.currency);
            set(top, a.top);
            a.rank = rank;
            a.deadline_days = deadline_days;
            a.budget = budget;
            set(max_micro_batch, a.max_micro_batch);
            if (!memory_headroom.is_none()) a.memory_headroom = text_of(memory_headroom, "memory_headroom");
            a.try_without_sp = try_without_sp;
            a.no_prune = no_prune;
            a.threads = threads;
            set(days, a.days);
            a.checkpoint_bandwidth = checkpoint_bandwidth;
            a.gpu_mtbf_hours = gpu_mtbf_hours;
            a.restart_minutes = restart_minutes;
            a.max_tokens = max_tokens;
            a.models = std::move(models);
            a.no_offload = no_offload;
            a.json = true;
            a.quiet = true;
            return to_python(run_command([&](nlohmann::json& out) {
                a.json_out = &out;
                (void)cli::run_plan_search(a);
            }));
        },
        py::arg("scenario") = py::none(), py::kw_only(), py::arg("data_dir") = "", py::arg("profile") = "",
        py::arg("stack") = "", py::arg("model") = "", py::arg("gpu") = "", py::arg("gpus") = py::none(),
        py::arg("tokens") = py::none(), py::arg("seq_len") = py::none(), py::arg("global_batch") = py::none(),
        py::arg("precision") = py::none(), py::arg("price") = py::none(), py::arg("currency") = py::none(),
        py::arg("top") = py::none(), py::arg("rank") = "", py::arg("deadline_days") = py::none(),
        py::arg("budget") = py::none(), py::arg("max_micro_batch") = py::none(),
        py::arg("memory_headroom") = py::none(), py::arg("try_without_sp") = false, py::arg("no_prune") = false,
        py::arg("threads") = 0u, py::arg("days") = py::none(), py::arg("checkpoint_bandwidth") = py::none(),
        py::arg("gpu_mtbf_hours") = py::none(), py::arg("restart_minutes") = py::none(), py::arg("max_tokens") = false,
        py::arg("models") = std::vector<std::string>{}, py::arg("no_offload") = false,
        R"(Searches the parallel layouts of a scenario's first plan, or of the plan the keywords describe
(model, gpu, gpus: `trainsim plan --model M --gpu G --gpus N`), and ranks them: what
`trainsim plan ... --json` prints ({'plans': [...], 'search': {...}, 'frontier': [...] with several
counts, ...}; with max_tokens=True what `plan --max-tokens --json` prints). Every keyword is the
CLI flag of the same name (dashes as underscores; defaults as the CLI's): gpus is an int or a list
of ints, tokens a count such as '1T' (default: 20 per parameter), memory_headroom a fraction such
as '5%'.)");

    m.def(
        "sweep",
        [](const py::object& grid, const std::string& data_dir, unsigned threads) {
            const auto src = source(grid, "grid");
            cli::SweepArgs a;
            a.grid = src.file;
            a.grid_text = src.text;
            a.data_dir = data_dir;
            a.threads = threads;
            a.json = true;
            a.quiet = true;
            return to_python(run_command([&](nlohmann::json& out) {
                a.json_out = &out;
                (void)cli::run_sweep(a);
            }));
        },
        py::arg("grid"), py::kw_only(), py::arg("data_dir") = "", py::arg("threads") = 0u,
        R"(A plan search per cell of a sweep grid (a YAML path or a dict with its keys, docs/plan-search.md
"Sweeps"): the rows `trainsim sweep GRID --json` prints, as a list of dicts (one per cell and GPU
count). For long or resumable sweeps (--out, --resume) use the CLI.)");
}
