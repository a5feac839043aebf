// trainsim fit-stack: a stack profile fitted on the user's own runs (docs/calibration.md
// "Calibrating on your own runs").
#include "commands.hpp"

#include "trainsim/model/input/stack_io.hpp"
#include "trainsim/sim/stack/stack_report.hpp"

namespace trainsim::sim::cli {

std::string command_line(int argc, char** argv) {
    std::string s;
    for (int i = 0; i < argc; ++i) s += (i ? " " : "") + std::string(argv[i]);
    return s;
}

void add_cluster_flags(CLI::App* cmd, ClusterFlags& f, const std::string& what) {
    f.gpus_per_node_opt = cmd->add_option(
        "--gpus-per-node", f.gpus_per_node,
        fmt::format("GPUs per node of the cluster {}, where its source states it (default: what the row's source "
                    "states in scenarios/validation/clusters.yaml, else each GPU profile's typical node)",
                    what));
    f.nics_per_node_opt =
        cmd->add_option("--nics-per-node", f.nics_per_node, "NICs per node of that cluster (default: as for --gpus-per-node)");
    cmd->add_option("--nic-rate", f.nic_rate,
                    "line rate per NIC of that cluster, e.g. 200Gbit/s (default: as for --gpus-per-node)");
}

std::optional<model::ValidationCluster> checked_cluster(const ClusterFlags& f, const std::string& command) {
    model::ValidationCluster c;
    std::vector<std::string> bad;
    auto check_as_key = [&](const std::string& option, const std::string& key, const std::string& value) {
        for (const auto& m : model::check_key_value(key, value)) bad.push_back(option + ": " + m);
    };
    // Given at all, checked: an explicit 0 or -1 is an error, not "the profile's".
    if (f.gpus_per_node_opt && f.gpus_per_node_opt->count() > 0) {
        check_as_key("--gpus-per-node", "cluster.gpus_per_node", std::to_string(f.gpus_per_node));
        c.gpus_per_node = f.gpus_per_node;
    }
    if (f.nics_per_node_opt && f.nics_per_node_opt->count() > 0) {
        check_as_key("--nics-per-node", "cluster.nics_per_node", std::to_string(f.nics_per_node));
        c.nics_per_node = f.nics_per_node;
    }
    if (!f.nic_rate.empty()) {
        const auto before = bad.size();
        check_as_key("--nic-rate", "cluster.nic_rate", f.nic_rate);
        if (bad.size() == before) c.nic_rate = model::parse_bandwidth(f.nic_rate);
    }
    for (const auto& b : bad) std::cerr << "trainsim: " << command << ": " << b << "\n";
    if (!bad.empty()) return std::nullopt;
    return c;
}

StackFitResult fit_on_files(const std::vector<std::string>& files, const std::string& data, const std::string& name,
                            const std::string& fitted_with, const model::ValidationCluster& cluster) {
    std::vector<model::ValidationRow> runs;
    for (const auto& f : files) {
        std::vector<model::Diagnostic> warnings;
        auto rows = model::load_validation_csv(f, data_dir(data), cluster, &warnings);
        for (const auto& w : warnings) std::cerr << "trainsim: warning: " << w.format() << "\n";
        runs.insert(runs.end(), std::make_move_iterator(rows.begin()), std::make_move_iterator(rows.end()));
    }
    StackFitOptions opt;
    opt.name = name;
    opt.fitted_with = fitted_with;
    opt.fitted_on = fmt::format("{}", fmt::join(files, ", "));
    opt.threads = std::max(1u, std::thread::hardware_concurrency());
    try {
        return fit_stack(runs, opt);
    } catch (const std::invalid_argument& e) {
        throw model::ScenarioError({model::Diagnostic{files.front(), 0, 0, "", e.what()}});
    }
}

int run_fit_stack(const FitStackArgs& a, const std::string& fitted_with) {
    const std::string name = a.name.empty() ? fs::path(a.out.empty() ? a.files.front() : a.out).stem().string() : a.name;
    if (!a.out.empty() && !a.force) {
        std::error_code ec;
        if (fs::exists(a.out, ec)) {
            std::cerr << fmt::format("trainsim: fit-stack: --out {}: already exists; refusing to overwrite it (use "
                                     "--force)\n",
                                     a.out);
            return kExitBadInput;
        }
    }
    const auto cluster = checked_cluster(a.cluster, "fit-stack");
    if (!cluster) return kExitBadInput;
    auto fit = fit_on_files(a.files, a.data_dir, name, fitted_with, *cluster);
    if (!a.out.empty()) {
        fit.stack.source_file = a.out;
        const std::string text = model::render_stack_profile(fit.stack);
        // What is written must read back: checked before it replaces anything.
        (void)model::load_stack_profile_text(text, a.out);
        if (const auto note = write_file_atomically(a.out, "--out", [&](std::ostream& os) { os << text; }); !note.empty())
            std::cerr << "trainsim: " << note << "\n";
    }
    if (a.json) std::cout << stack_fit_json(fit.stack).dump(2, ' ', false, nlohmann::json::error_handler_t::replace) << "\n";
    else {
        std::cout << stack_fit_text(fit);
        if (!a.out.empty())
            std::cout << fmt::format("wrote {}: use it with --stack {} (simulate, compare, report, plan, validate) or "
                                     "parallel.stack in a scenario\n",
                                     a.out, a.out);
    }
    return kExitOk;
}

} // namespace trainsim::sim::cli
