// Small sweeps for the tests of the market table and of sweeps over MPI ranks: two Llama-shaped
// models of 2 and 4 layers (hidden 512), whose searches take milliseconds.
#pragma once

#include "scratch_dir.hpp"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <sstream>
#include <string>
#include <vector>

namespace trainsim::test {

inline void write_tiny_models(const ScratchDir& dir) {
    for (int layers : {2, 4})
        write_text(dir.path() / fmt::format("tiny{}.config.json", layers),
                   fmt::format(R"({{"model_type": "llama", "hidden_size": 512, "num_hidden_layers": {},
"num_attention_heads": 8, "num_key_value_heads": 8, "intermediate_size": 1376, "vocab_size": 32000,
"max_position_embeddings": 2048, "tie_word_embeddings": false, "hidden_act": "silu"}})",
                               layers));
}

// 2 models x 2 GPUs x 2 prices = 8 cells (4 searches: the prices share one) x 2 counts = 16 rows.
inline constexpr const char* kTinyMarketGrid = R"(title: tiny market
models: [tiny2.config.json, tiny4.config.json]
gpus: [h100-sxm, a100-sxm-80gb]
counts: [8, 16]
tokens: [1B]
training: {seq_len: 1024, global_batch: 64}
prices:
  - {name: list, basis: gpu_hour, rate: 2.0, currency: USD}
  - {name: half, basis: gpu_hour, rate: 1.0, currency: USD}
)";

inline std::vector<nlohmann::json> json_lines(const std::string& text) {
    std::vector<nlohmann::json> rows;
    std::istringstream in(text);
    for (std::string line; std::getline(in, line);) rows.push_back(nlohmann::json::parse(line));
    return rows;
}

} // namespace trainsim::test
