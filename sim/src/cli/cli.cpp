#include "trainsim/sim/cli/cli.hpp"

#include "commands.hpp"

#include "trainsim/model/input/stack_io.hpp"

#ifndef TRAINSIM_VERSION
#define TRAINSIM_VERSION "unknown"
#endif

namespace trainsim::sim {

using namespace cli;

int run_cli(int argc, char** argv) {
    CLI::App app{"trainsim: discrete-event simulation of LLM training steps -> days, GPU-hours, money"};
    app.set_version_flag("--version", std::string("trainsim ") + TRAINSIM_VERSION);
    app.require_subcommand(1);
    Common sim_args, cmp_args, exp_args;
    auto* simulate = app.add_subcommand("simulate", "simulate every plan of a scenario and report each in detail");
    add_common(simulate, sim_args);
    add_csv(simulate, sim_args);
    add_lang(simulate, sim_args.lang);
    simulate->add_option("--trace", sim_args.trace,
                         "write the simulated step as a Chrome/Perfetto trace (several plans: FILE.1.json, "
                         "FILE.2.json ...)");
    auto* compare = app.add_subcommand("compare", "simulate a scenario's plans and show them side by side");
    add_common(compare, cmp_args);
    add_csv(compare, cmp_args);
    add_lang(compare, cmp_args.lang);
    Common rep_args;
    ReportArgs rep_opts;
    auto* report_cmd = app.add_subcommand("report", "write a self-contained HTML report of a scenario (and print what "
                                                "compare prints)");
    add_common(report_cmd, rep_args);
    add_csv(report_cmd, rep_args);
    add_lang(report_cmd, rep_args.lang);
    report_cmd->add_option("--html", rep_opts.html, "the HTML file to write")->required();
    report_cmd->add_option("--scaling-gpus", rep_opts.scaling_gpus,
                           "GPU counts of the scaling chart (default 8,16,...,1024)")
        ->delimiter(',')
        ->check(CLI::Range(1, 1 << 20));
    report_cmd->add_flag("--no-scaling", rep_opts.no_scaling, "leave the scaling chart out");
    auto* keys = app.add_subcommand("keys", "list every scenario key with its type, unit, default and description");
    bool markdown = false;
    keys->add_flag("--markdown", markdown, "as a Markdown table (docs/scenario-keys.md)");
    auto* expl = app.add_subcommand("explain", "show the workload (op shapes and collectives) a scenario builds");
    add_common(expl, exp_args);

    Common topo_args;
    FabricArgs topo_fabric;
    std::string topo_dot;
    auto* topo = app.add_subcommand("topology", "print the cluster topology a scenario builds (or write it as GraphViz)");
    add_common(topo, topo_args);
    add_fabric(topo, topo_fabric);
    topo->add_option("--dot", topo_dot, "write GraphViz to this file ('-' for stdout) instead of the summary");

    CollectiveArgs coll_args;
    auto* coll = app.add_subcommand("collective", "time one NCCL collective on a cluster (nccl-tests algbw / busbw)");
    coll->add_option("--gpu", coll_args.gpu, "hardware profile id or YAML path")->required();
    coll->add_option("--op", coll_args.op, "all_reduce | all_gather | reduce_scatter | all_to_all | send_recv");
    coll->add_option("--gpus", coll_args.gpus, "GPUs in the collective (whole nodes when more than one node)");
    coll->add_option("--gpus-per-node", coll_args.gpus_per_node, "GPUs per node (default: the profile's node)");
    coll->add_option("--nics-per-node", coll_args.nics_per_node, "NICs per node (default: the profile's node)");
    coll->add_option("--nic-rate", coll_args.nic_rate, "line rate per NIC, e.g. 400Gbit/s (default: the profile's)");
    coll->add_option("--intra", coll_args.intra, "fabric inside a node: nvswitch | nvlink-bridge | pcie");
    coll->add_option("--size", coll_args.size, "buffer size (nccl-tests -b/-e), e.g. 4GiB");
    coll->add_option("--algo", coll_args.algo, "force an algorithm: ring | tree | nvls | nvls_tree | direct");
    coll->add_option("--data-dir", coll_args.data_dir, "folder with hardware/ (default: $TRAINSIM_DATA_DIR or the "
                                                      "shipped scenarios/)");
    add_fabric(coll, coll_args.fabric);
    coll->add_flag("--json", coll_args.json,
                   "print time_s, algbw_gbps, busbw_gbps, algorithm, intra_node_path as JSON");

    auto* val = app.add_subcommand("validate", "simulate every row of a published-measurements CSV and report the error");
    std::string val_file, val_data, val_kind;
    bool val_json = false, val_verbose = false;
    val->add_option("FILE", val_file, "CSV in the schema of shared/validation/README.md")->required();
    val->add_option("--data-dir", val_data, "folder with models/ and hardware/");
    val->add_option("--kind", val_kind, "only rows of this kind (step | end_to_end)");
    val->add_flag("--json", val_json, "print machine-readable JSON");
    val->add_flag("--verbose,-v", val_verbose, "list what was chosen for blank cells, per row");
    std::vector<std::string> val_by;
    val->add_option("--by", val_by,
                    fmt::format("also group the errors by a property of the simulated plans: {}; KEY:KEY... for a "
                                "cross table (repeatable)",
                                fmt::join(group_keys(), ", ")));
    std::vector<std::string> val_rows;
    val->add_option("--row", val_rows,
                    "print the full simulation report of these row ids instead (with --json: their JSON report)");
    ClusterFlags val_cluster_flags;
    add_cluster_flags(val, val_cluster_flags);
    bool val_split = false;
    val->add_flag("--split-accumulation", val_split,
                  "also split the step time of rows that differ only in their global batch into a per-step and a "
                  "per-micro-batch part (least squares over grad_accum), measured and simulated");

    std::string val_stack;
    std::vector<std::string> val_fit_on;
    auto* val_stack_opt = val->add_option("--stack", val_stack,
                    "run every row with this stack profile (trainsim fit-stack); its fit gives the rows' bands")
        ->check(non_empty_path);
    val->add_option("--fit-on", val_fit_on,
                    "fit a stack profile on these runs (CSV in the same schema) first and validate FILE with it; rows "
                    "of FILE that are also runs (same id) are flagged in_fit and left out of the summary")
        ->excludes(val_stack_opt);

    FitStackArgs fit_args;
    auto* fit_cmd = app.add_subcommand("fit-stack",
                                       "fit a stack profile (your software stack's few physical factors) on measured "
                                       "runs of your own trainer");
    fit_cmd->add_option("RUNS", fit_args.files,
                        "runs as CSV in the schema of shared/validation/README.md (trainsim-calibrate import run "
                        "writes them from trainer logs)")
        ->required();
    fit_cmd->add_option("--out", fit_args.out, "write the stack profile (YAML) here, atomically");
    fit_cmd->add_option("--name", fit_args.name, "the stack profile's name (default: --out's file name)");
    fit_cmd->add_option("--data-dir", fit_args.data_dir, "folder with models/ and hardware/");
    fit_cmd->add_flag("--force", fit_args.force, "replace an existing --out file");
    fit_cmd->add_flag("--json", fit_args.json, "print the fit (parameters, uncertainties, runs) as JSON");
    add_cluster_flags(fit_cmd, fit_args.cluster, "the runs were measured on");

    SweepArgs sweep_args;
    auto* sweep_cmd = app.add_subcommand("sweep", "a plan search per cell of a grid of models, GPUs, counts, precisions, "
                                                  "tokens and prices: one row per cell and GPU count");
    sweep_cmd->add_option("GRID", sweep_args.grid, "sweep grid YAML (docs/plan-search.md \"Sweeps\")")->required();
    sweep_cmd->add_option("--out", sweep_args.out,
                          "write the rows here (.csv or .jsonl), cell by cell into OUT.partial, renamed to OUT when done");
    sweep_cmd->add_flag("--resume", sweep_args.resume, "continue the sweep in OUT.partial (a killed sweep)");
    sweep_cmd->add_flag("--force", sweep_args.force, "start over: replace OUT (when done) and drop OUT.partial");
    sweep_cmd->add_option("--data-dir", sweep_args.data_dir, "folder with models/ and hardware/");
    sweep_cmd->add_option("--jobs,-j", sweep_args.jobs,
                          "searches at once in this process, on as many threads (default: one per core, up to the "
                          "searches; under mpirun the node's cores are shared by its ranks)");
    sweep_cmd->add_option("--threads", sweep_args.threads,
                          "worker threads per search (default: the cores left to each of the --jobs)");
    sweep_cmd->add_option("--html", sweep_args.html,
                          "also write the market table as a self-contained HTML page here (- for standard output)");
    sweep_cmd->add_flag("--json", sweep_args.json, "without --out: print the rows as JSON lines");
    sweep_cmd->add_flag("--csv", sweep_args.csv, "without --out: print the rows as CSV")->excludes("--json");
    auto* sweep_quiet = sweep_cmd->add_flag("--quiet,-q", sweep_args.quiet, "no progress bar");
    sweep_cmd->add_flag("--progress", sweep_args.progress,
                        "the progress line (cells done and time left) on standard error even when it is not a terminal")
        ->excludes(sweep_quiet);

    auto* emc = app.add_subcommand("error-model",
                                   "run validate on published-measurement files and write the error-band table "
                                   "(docs/trust.md)");
    std::vector<std::string> em_files, em_held_out;
    std::string em_out, em_data;
    emc->add_option("FILES", em_files, "published-measurement CSVs (rows that guided a constant: seen)")->required();
    emc->add_option("--held-out", em_held_out, "CSVs whose rows guided no constant (held out)");
    emc->add_option("--out", em_out, "write the table here (atomically) instead of stdout");
    emc->add_option("--data-dir", em_data, "folder with models/ and hardware/");
    bool em_cross = false;
    emc->add_flag("--cross-validate", em_cross,
                  "print each file's band coverage and width in sample and with the table built from the other "
                  "files only (leave-file-out); the table is still written with --out");

    PlanArgs plan_args;
    auto* plan_cmd = app.add_subcommand("plan", "search every valid parallel layout, simulate those that fit, rank them");
    plan_cmd->add_option("FILE", plan_args.file, "scenario YAML (its first plan gives model, training, GPU, pricing)");
    plan_cmd->add_option("--data-dir", plan_args.data_dir, "folder with models/ and hardware/");
    plan_cmd->add_option("--profile", plan_args.profile, "hardware profile YAML used instead of the scenario's");
    plan_cmd->add_option("--stack", plan_args.stack,
                         "stack profile YAML (trainsim fit-stack) the plans run with, in place of parallel.stack")
        ->check(non_empty_path);
    plan_cmd->add_option("--model", plan_args.model, "model preset id (e.g. llama2-70b)");
    plan_cmd->add_option("--gpu", plan_args.gpu, "hardware profile id (e.g. h100-sxm)");
    plan_cmd->add_option("--gpus", plan_args.gpus, "GPU count(s) to search, e.g. 64 or 32,64 (1 to 65536)")
        ->delimiter(',')
        ->check(CLI::Range(1, kMaxPlanGpus));
    plan_cmd->add_option("--tokens", plan_args.tokens, "tokens to train on, e.g. 1T (default: 20 per parameter, compute-optimal)");
    plan_cmd->add_option("--seq-len", plan_args.seq_len, "sequence length (default 4096)");
    plan_cmd->add_option("--global-batch", plan_args.global_batch, "sequences per step (default 1024)");
    plan_cmd->add_option("--precision", plan_args.precision, "bf16 | fp16 | fp8 (default bf16)");
    plan_cmd->add_option("--method", plan_args.method,
                         "what is trained: pretrain | full | lora | qlora (default pretrain; with a FILE, its "
                         "training.method). A fine-tune that fits at no GPU count is searched again with full "
                         "fine-tuning's memory recipes (docs/plan-search.md)");
    plan_cmd->add_option("--price", plan_args.price,
                         "price per GPU-hour (flag form; default: none, and money is reported as 'no price')");
    plan_cmd->add_option("--currency", plan_args.currency, "currency of --price (default USD)");
    plan_cmd->add_option("--top", plan_args.top, "plans to show (default 10)");
    plan_cmd->add_option("--rank", plan_args.rank, "days | cost (default: cost with --deadline-days, else days)");
    plan_cmd->add_option("--deadline-days", plan_args.deadline_days,
                         "cheapest plan that trains in at most this many days (the expected wall clock; --days)");
    plan_cmd->add_option("--budget", plan_args.budget,
                         "fastest plan whose bill is at most this much (the expected run in whole billing units; "
                         "--days)");
    plan_cmd->add_option("--max-micro-batch", plan_args.max_micro_batch, "largest micro-batch tried (default 8)");
    plan_cmd->add_option("--memory-headroom", plan_args.memory_headroom,
                         "HBM a plan must leave free against allocator fragmentation, e.g. 5% (default 5%)");
    plan_cmd->add_flag("--try-without-sp", plan_args.try_without_sp, "also try tp > 1 without sequence parallelism");
    plan_cmd
        ->add_option("--pp-schedules", plan_args.pp_schedules,
                     "pipeline schedules to search, e.g. auto,zb-h1,zb-v,dualpipe-v (auto: 1f1b and interleaved); "
                     "default: those the plan's framework offers (docs/plan-search.md)")
        ->delimiter(',');
    plan_cmd->add_flag("--no-prune", plan_args.no_prune, "simulate every plan that fits (no dominance / bound pruning)");
    plan_cmd->add_option("--threads", plan_args.threads, "worker threads (default: all cores)");
    plan_cmd->add_option("--days", plan_args.days,
                         "expected | steady: days and bill ranked and held to --deadline-days / --budget: the "
                         "expected wall clock with checkpoints, failures and restarts and its bill in whole billing "
                         "units (default), or the steady state");
    plan_cmd->add_option("--checkpoint-bandwidth", plan_args.checkpoint_bandwidth,
                         "checkpoint write bandwidth per node (default: the scenario's run.checkpoint_bandwidth, "
                         "5 GB/s)");
    plan_cmd->add_option(
        "--gpu-mtbf-hours", plan_args.gpu_mtbf_hours,
        "mean time between interruptions blamed on one GPU (default: run.gpu_mtbf, Llama 3's 64,149 h)");
    plan_cmd->add_option("--restart-minutes", plan_args.restart_minutes,
                         "time lost per restart besides lost work (default: run.restart, 17 min from Llama 3)");
    plan_cmd->add_flag("--max-tokens", plan_args.max_tokens,
                       "ask backwards: the most tokens each GPU count trains within --budget and / or "
                       "--deadline-days (docs/plan-search.md)");
    plan_cmd->add_option("--models", plan_args.models,
                         "with --max-tokens: the largest of these models (preset ids or config.json files) that "
                         "trains on its compute-optimal tokens within the budget / deadline")
        ->delimiter(',');
    plan_cmd->add_flag("--json", plan_args.json, "print {\"plans\": [...]} as JSON");
    plan_cmd->add_flag("--csv", plan_args.csv, "print the plans as CSV");
    plan_cmd->add_flag("--frontier", plan_args.frontier_csv,
                       "with --csv and several --gpus: one row per GPU count, its best plan and whether it is on the "
                       "days-vs-cost Pareto front");
    plan_cmd->add_flag("--quiet,-q", plan_args.quiet, "no progress bar");
    add_lang(plan_cmd, plan_args.lang);
    plan_cmd->add_flag("--no-offload", plan_args.no_offload,
                       "do not try CPU offload where no GPU-only layout fits (parallel.offload)");

    try {
        app.parse(argc, argv);
    } catch (const CLI::ParseError& e) {
        // A first word that is not an option and names no command: say so, with the closest one
        // (CLI11 alone says "A subcommand is required").
        if (argc > 1 && argv[1][0] != '-') {
            std::vector<std::string> names;
            for (const auto* sub : app.get_subcommands([](const CLI::App*) { return true; }))
                names.push_back(sub->get_name());
            if (std::find(names.begin(), names.end(), argv[1]) == names.end()) {
                std::cerr << fmt::format("trainsim: unknown command '{}'{} (one of: {}); see trainsim --help\n",
                                         argv[1], model::did_you_mean(argv[1], names), fmt::join(names, ", "));
                return kExitBadInput;
            }
        }
        const int rc = app.exit(e);
        return rc == 0 ? kExitOk : kExitBadInput;
    }
    if (*simulate) return run_plans(sim_args, false);
    if (*compare) return run_plans(cmp_args, true);
    if (*report_cmd) return run_report(rep_args, rep_opts);
    if (*keys) return print_keys(markdown);
    if (*expl) return explain(exp_args);
    if (*topo) return print_topology(topo_args, topo_fabric, topo_dot);
    if (*coll) return run_collective(coll_args);
    if (*plan_cmd) return run_plan_search(plan_args);
    if (*sweep_cmd) return run_sweep(sweep_args);
    if (*fit_cmd) return run_fit_stack(fit_args, command_line(argc, argv));
    if (*emc) {
        std::vector<PublishedFile> files;
        auto load = [&](const std::string& file, bool held_out) {
            files.push_back({fs::path(file).filename().string(), model::load_validation_csv(file, data_dir(em_data)),
                             held_out});
        };
        for (const auto& f : em_files) load(f, false);
        for (const auto& f : em_held_out) load(f, true);
        const unsigned threads = std::max(1u, std::thread::hardware_concurrency());
        if (em_cross) {
            std::cout << "80% bands per file (step rows): in sample = the table built from every file (what "
                         "scripts/error-model ships); "
                         "leave-file-out = the table from the other files only\n";
            std::cout << fmt::format("  {:<30} {:>5}  {:>9} {:>7}  {:>14} {:>7}  {:>10}\n", "file", "rows",
                                     "in sample", "width", "leave-file-out", "width", "table rows");
            auto pct = [](const BandStats& b, double v, int width) {
                return b.rows > 0 ? fmt::format("{:>{}.0f}%", 100 * v, width - 1) : fmt::format("{:>{}}", "-", width);
            };
            for (const auto& c : cross_validate_bands(files, threads))
                std::cout << fmt::format("  {:<30} {:>5}  {} {}  {} {}  {:>10}\n", c.file, c.rows,
                                         pct(c.in_sample, c.in_sample.coverage, 9),
                                         pct(c.in_sample, c.in_sample.median_width, 7),
                                         pct(c.left_out, c.left_out.coverage, 14),
                                         pct(c.left_out, c.left_out.median_width, 7), c.left_out_basis);
        }
        if (em_cross && em_out.empty()) return kExitOk;
        std::vector<ErrorSample> samples;
        for (const auto& f : files) {
            const auto s = error_samples(f.rows, f.name, f.held_out, threads);
            samples.insert(samples.end(), s.begin(), s.end());
        }
        const auto table = error_model_json(build_error_model(samples)).dump(1, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
        if (em_out.empty())
            std::cout << table;
        else if (const auto note = write_file_atomically(em_out, "--out", [&](std::ostream& os) { os << table; });
                 !note.empty())
            std::cerr << "trainsim: " << note << "\n";
        return kExitOk;
    }
    if (*val) {
        if (!val_kind.empty() && val_kind != "step" && val_kind != "end_to_end") {
            std::cerr << fmt::format("trainsim: validate: --kind: unknown kind '{}'{} (step, end_to_end)\n", val_kind,
                                     model::did_you_mean(val_kind, {"step", "end_to_end"}));
            return kExitBadInput;
        }
        if (!val_by.empty() && !val_rows.empty()) {
            std::cerr << "trainsim: validate: --by groups a whole file's errors; it does not go with --row\n";
            return kExitBadInput;
        }
        if (val_split && !val_rows.empty()) {
            std::cerr << "trainsim: validate: --split-accumulation fits a whole file's rows; it does not go with "
                         "--row\n";
            return kExitBadInput;
        }
        for (const auto& spec : val_by) {
            try {
                (void)parse_group_spec(spec);
            } catch (const std::invalid_argument& e) {
                std::cerr << fmt::format("trainsim: validate: --by {}: {}\n", spec, e.what());
                return kExitBadInput;
            }
        }
        const auto val_cluster = checked_cluster(val_cluster_flags, "validate");
        if (!val_cluster) return kExitBadInput;
        if (const auto clusters = model::source_clusters_file(data_dir(val_data)); !fs::exists(clusters))
            std::cerr << fmt::format("trainsim: validate: note: no {}: the rows' nodes are what the command line "
                                     "states, else each GPU profile's typical node\n",
                                     clusters.string());
        std::vector<model::Diagnostic> csv_warnings;
        auto rows = model::load_validation_csv(val_file, data_dir(val_data), *val_cluster, &csv_warnings);
        for (const auto& w : csv_warnings) std::cerr << "trainsim: validate: warning: " << w.format() << "\n";
        // A stack profile: given (--stack), or fitted here on the runs (--fit-on).
        std::shared_ptr<const model::StackProfile> stack;
        std::optional<StackFitResult> fit;
        std::vector<std::string> in_fit;
        if (!val_fit_on.empty()) {
            fit = fit_on_files(val_fit_on, val_data, fs::path(val_fit_on.front()).stem().string(),
                               command_line(argc, argv), *val_cluster);
            // A row is a run of the fit when it is the same measurement: its id, GPU count and
            // measured value (ids repeat across files: every published file numbers from 1).
            for (const auto& row : rows)
                for (const auto& run : fit->stack.runs)
                    if (row.id == run.id && row.plan.num_gpus() == run.gpus &&
                        std::abs(row.measured_tokens_per_s_per_gpu - run.measured) <= 1e-9 * run.measured)
                        in_fit.push_back(row.id);
            stack = std::make_shared<const model::StackProfile>(fit->stack);
            if (!val_json && val_rows.empty()) std::cout << stack_fit_text(*fit) << "\n";
        } else if (!val_stack.empty()) {
            stack = std::make_shared<const model::StackProfile>(model::load_stack_profile(val_stack));
        }
        if (stack) apply_stack_to_rows(rows, stack);
        for (const auto& id : val_rows) {
            if (std::none_of(rows.begin(), rows.end(), [&](const model::ValidationRow& r) { return r.id == id; })) {
                std::cerr << fmt::format("trainsim: {}: --row {}: no row with this id\n", val_file, id);
                return kExitBadInput;
            }
        }
        if (!val_rows.empty() && val_json) {
            // --json with --row: the JSON report of just those rows.
            std::erase_if(rows, [&](const model::ValidationRow& r) {
                return std::find(val_rows.begin(), val_rows.end(), r.id) == val_rows.end();
            });
        } else if (!val_rows.empty()) {
            for (const auto& row : rows) {
                if (std::find(val_rows.begin(), val_rows.end(), row.id) == val_rows.end()) continue;
                if (!row.skip_reason.empty()) {
                    const int col = row.column_number(row.skip_column);
                    std::cout << fmt::format("row {} ({}:{}{}): skipped: {}\n", row.id, val_file, row.line,
                                             col > 0 ? fmt::format(":{} {}", col, row.skip_column) : "",
                                             row.skip_reason);
                    continue;
                }
                auto choices = row.choices;
                const auto plan = tune_blank_cells(row, choices);
                const auto e = estimate_plan(plan, {}, true);
                std::cout << format_plan(plan, e);
                if (e.step) {
                    std::cout << "  compute-stream time by kernel:";
                    for (const auto& [name, t] : e.step->kernel_time)
                        std::cout << fmt::format(" {} {:.1f}%,", name, 100.0 * t.seconds() / e.step_time_s);
                    std::cout << "\n";
                }
                std::cout << fmt::format("  measured {:.0f} tokens/s per GPU ({})\n", row.measured_tokens_per_s_per_gpu,
                                         row.source);
                for (const auto& c : choices) std::cout << "  chose " << c << "\n";
                std::cout << "\n";
            }
            return kExitOk;
        }
        const unsigned threads = std::max(1u, std::thread::hardware_concurrency());
        const auto em = load_error_model(data_dir(val_data));
        const bool bar = rows.size() >= kProgressFrom && isatty(STDERR_FILENO) != 0;
        RowHook hook;
        if (stack) hook = stack_band_hook(stack, em ? &*em : nullptr);
        const auto rep = validate_rows(rows, val_kind, threads, em ? &*em : nullptr,
                                       bar ? progress_bar("rows") : nullptr, hook, in_fit);
        if (val_json) {
            auto j = report_json(rep);
            if (stack) j["stack"] = stack_fit_json(*stack);
            for (const auto& spec : val_by) j["summary"]["by"][spec] = groups_json(group_errors(rep, spec));
            if (val_split) j["summary"]["accumulation_split"] = accumulation_json(split_accumulation(rows, rep));
            std::cout << j.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) << "\n";
        } else {
            std::cout << report_text(rep, val_verbose);
            for (const auto& spec : val_by) std::cout << groups_text(spec, group_errors(rep, spec));
            if (val_split) std::cout << accumulation_text(split_accumulation(rows, rep));
        }
        if (rep.overall.n == 0 && rep.in_fit > 0) {
            std::cerr << fmt::format("trainsim: {}: every compared row is also a run of the fit (--fit-on): nothing "
                                     "is left to judge it on\n",
                                     val_file);
            return kExitBadInput;
        }
        if (rep.overall.n == 0) {
            // A file with no row, or none that could be compared, measured nothing: not a 0% error.
            // Said with every kind of reason, its count and its first rows (id, line, column).
            std::cerr << "trainsim: " << nothing_compared_text(rep, val_file);
            return kExitBadInput;
        }
        return kExitOk;
    }
    return kExitBadInput;
}

} // namespace trainsim::sim
