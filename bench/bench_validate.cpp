// Speed of `trainsim validate` on a large file (issue #45 item 7): N rows of four shapes (a 1.7B
// model on 32 A100s at four micro-batch sizes), generated here, read by load_validation_csv and
// compared by validate_rows. Target on the 2-core development machine: 100,000 rows in seconds
// (rows that simulate the same plan are simulated once); peak memory is measured with
// `/usr/bin/time -v trainsim validate` (docs/accuracy.md).
#include "trainsim/model/input/validation_set.hpp"
#include "trainsim/sim/validate/validate.hpp"

#include <benchmark/benchmark.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>

#include <unistd.h>

namespace {

namespace fs = std::filesystem;

fs::path data_dir() {
    const char* env = std::getenv("TRAINSIM_DATA_DIR");
    return env != nullptr ? env : TRAINSIM_DATA_DIR_DEFAULT;
}

// A CSV of `n` rows in the validation schema, four shapes in turn, each with its own id.
fs::path write_rows(std::size_t n) {
    const auto file = fs::temp_directory_path() / ("trainsim-bench-validate-" + std::to_string(::getpid()) + ".csv");
    std::ofstream out(file);
    out << "id,source_group,source,model,layers,hidden,heads,kv_heads,ffn,ffn_type,vocab,seq_len,gpu,num_gpus,tp,pp,"
           "vp,cp,dp,sequence_parallel,sharding,micro_batch,global_batch,recompute,precision,framework,kind,"
           "tokens_per_s_per_gpu,derivation,notes\n";
    for (std::size_t i = 0; i < n; ++i)
        out << i + 1 << ",bench,bench,GPT-1.7B,24,2304,24,24,9216,gelu,51200,2048,a100-sxm-80gb,32,1,1,1,1,32,false,"
            << "none," << (1 << (i % 4)) << ",512,full,fp16,megatron-lm-2021,step," << 9000 + i % 100 << ",,\n";
    return file;
}

void BM_Validate_Rows(benchmark::State& state) {
    const auto n = static_cast<std::size_t>(state.range(0));
    const auto file = write_rows(n);
    const unsigned threads = std::max(1u, std::thread::hardware_concurrency());
    for (auto _ : state) {
        const auto rows = trainsim::model::load_validation_csv(file, data_dir());
        const auto rep = trainsim::sim::validate_rows(rows, "", threads);
        benchmark::DoNotOptimize(rep.overall.mape);
    }
    fs::remove(file);
    state.counters["rows"] = static_cast<double>(n);
}
BENCHMARK(BM_Validate_Rows)->Arg(1000)->Arg(100000)->Unit(benchmark::kSecond)->Iterations(1)->UseRealTime();

} // namespace
