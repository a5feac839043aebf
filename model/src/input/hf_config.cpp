// Reads a Hugging Face `config.json` of the llama / mistral / qwen2 families into a ModelArch
// (docs/formats.md section 1, `model: {hf_config: ...}`). Fields and their meaning follow
// transformers' LlamaConfig / MistralConfig / Qwen2Config; only dense decoder shapes are read.
#include "trainsim/model/input/loader.hpp"

#include "input_support.hpp"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <array>
#include <map>
#include <set>

namespace trainsim::model {
namespace fs = std::filesystem;
using detail::Diags;
using detail::report;
using detail::Site;
using Json = nlohmann::json;

namespace {

constexpr std::array<std::string_view, 3> kFamilies{"llama", "mistral", "qwen2"};

class HfReader {
public:
    HfReader(std::string file, const std::string& text, const Json& j, Diags& out)
        : file_(std::move(file)), text_(text), j_(j), out_(out) {}

    // Where `field` is written: the first `"field"` in the text (config.json is flat), else unknown.
    Site site(const std::string& field) const {
        const auto pos = text_.find(fmt::format("\"{}\"", field));
        if (pos == std::string::npos) return Site{file_, 0, 0, field};
        auto [line, col] = line_col(text_, pos);
        return Site{file_, line, col, field};
    }

    bool has(const std::string& field) const { return j_.contains(field) && !j_.at(field).is_null(); }

    std::optional<std::string> string(const std::string& field) {
        if (!has(field)) {
            report(out_, site(field), "missing required field");
            return std::nullopt;
        }
        const Json& v = j_.at(field);
        if (!v.is_string()) {
            report(out_, site(field), fmt::format("expected a string, got {}", v.dump()));
            return std::nullopt;
        }
        return v.get<std::string>();
    }

    // A positive integer within the physical range of the scenario key it fills (`key`); a missing
    // optional field gives nullopt without a report.
    std::optional<int> integer(const std::string& field, bool required, const std::string& key) {
        if (!has(field)) {
            if (required) report(out_, site(field), "missing required field");
            return std::nullopt;
        }
        const Json& v = j_.at(field);
        if (!v.is_number_integer()) {
            report(out_, site(field), fmt::format("expected an integer, got {}", v.dump()));
            return std::nullopt;
        }
        const auto x = v.get<long long>();
        if (x < 1 || x > INT_MAX) {
            report(out_, site(field), fmt::format("must be a positive integer, got {}", x));
            return std::nullopt;
        }
        const auto problems = check_key_value(key, std::to_string(x));
        for (const auto& p : problems) report(out_, site(field), p);
        if (!problems.empty()) return std::nullopt;
        return static_cast<int>(x);
    }

    std::optional<bool> boolean(const std::string& field) {
        if (!has(field)) return std::nullopt;
        const Json& v = j_.at(field);
        if (!v.is_boolean()) {
            report(out_, site(field), fmt::format("expected true or false, got {}", v.dump()));
            return std::nullopt;
        }
        return v.get<bool>();
    }

private:
    std::string file_;
    const std::string& text_;
    const Json& j_;
    Diags& out_;
};

// silu (SwiGLU in these families) or gelu*; anything else has no FFN model here.
std::optional<FfnType> ffn_of(const std::string& act) {
    if (act == "silu" || act == "swish") return FfnType::swiglu;
    if (act.starts_with("gelu")) return FfnType::gelu;
    return std::nullopt;
}

// `_name_or_path` when the file has it; else the file name without ".json" / ".config.json"
// ("llama2-7b.config.json" -> "llama2-7b"), or the folder for a plain "config.json" (HF layout).
std::string model_name(const Json& j, const fs::path& file) {
    if (auto it = j.find("_name_or_path"); it != j.end() && it->is_string() && !it->get<std::string>().empty())
        return it->get<std::string>();
    std::string stem = file.stem().string();
    if (stem.ends_with(".config")) stem.resize(stem.size() - std::string_view(".config").size());
    if (stem == "config" && !file.parent_path().filename().empty()) return file.parent_path().filename().string();
    return stem;
}

} // namespace

ModelArch load_hf_config(const std::filesystem::path& file) {
    const std::string name = file.string();
    Diags out;
    auto text = detail::read_text(file, Site{name, 0, 0, ""}, out);
    if (!text) throw ScenarioError(out);
    Json j;
    // A key written twice in one object: JSON (RFC 8259 section 4) leaves it to the reader, and
    // nlohmann keeps the last, so which value a run used would depend on the reader. Refused,
    // naming the key, like a repeated YAML key. The parser callback sees each object's keys in
    // order: one set of seen keys per open object.
    std::vector<std::set<std::string>> open_objects;
    std::vector<std::string> repeated;
    const Json::parser_callback_t note_keys = [&](int, Json::parse_event_t event, Json& parsed) {
        if (event == Json::parse_event_t::object_start) open_objects.emplace_back();
        else if (event == Json::parse_event_t::object_end && !open_objects.empty()) open_objects.pop_back();
        else if (event == Json::parse_event_t::key && !open_objects.empty() && parsed.is_string() &&
                 !open_objects.back().insert(parsed.get<std::string>()).second)
            repeated.push_back(parsed.get<std::string>());
        return true;
    };
    try {
        j = Json::parse(*text, note_keys);
    } catch (const Json::parse_error& e) {
        auto [line, col] = line_col(*text, e.byte > 0 ? e.byte - 1 : 0);
        report(out, Site{name, line, col, ""}, fmt::format("JSON syntax error: {}", e.what()));
        throw ScenarioError(out);
    } catch (const Json::exception& e) {  // not a syntax error: a number out of range ("1e584"), ...
        report(out, Site{name, 0, 0, ""}, fmt::format("not a readable config.json: {}", e.what()));
        throw ScenarioError(out);
    }
    if (!j.is_object()) {
        report(out, Site{name, 1, 1, ""}, "a config.json is a JSON object");
        throw ScenarioError(out);
    }
    if (!repeated.empty()) {
        std::map<std::string, std::size_t> searched_from;  // the next occurrence of each repeated key
        for (const auto& key : repeated) {
            const std::string quoted = Json(key).dump(-1, ' ', false, Json::error_handler_t::replace);
            const auto first = text->find(quoted);
            auto& from = searched_from.try_emplace(key, first == std::string::npos ? 0 : first + 1).first->second;
            const auto pos = text->find(quoted, from);
            Site at{name, 0, 0, key};
            if (pos != std::string::npos) {
                auto [line, col] = line_col(*text, pos);
                at.line = line;
                at.col = col;
                from = pos + 1;
            }
            const int first_line = first == std::string::npos ? 0 : line_col(*text, first).first;
            report(out, at,
                   fmt::format("key '{}' is written twice in one object (first at line {}); JSON readers differ on "
                               "which one counts, so write it once",
                               key, first_line));
        }
        throw ScenarioError(out);
    }

    HfReader r(name, *text, j, out);
    if (auto type = r.string("model_type")) {
        if (std::find(kFamilies.begin(), kFamilies.end(), *type) == kFamilies.end())
            report(out, r.site("model_type"),
                   fmt::format("unsupported model_type '{}' (supported: llama, mistral, qwen2)", *type));
    }
    auto layers = r.integer("num_hidden_layers", true, "model.layers");
    auto hidden = r.integer("hidden_size", true, "model.hidden");
    auto heads = r.integer("num_attention_heads", true, "model.heads");
    auto kv_heads = r.integer("num_key_value_heads", false, "model.kv_heads");
    auto ffn = r.integer("intermediate_size", true, "model.ffn");
    auto vocab = r.integer("vocab_size", true, "model.vocab");
    auto head_dim = r.integer("head_dim", false, "model.head_dim");
    auto tied = r.boolean("tie_word_embeddings");
    std::optional<FfnType> ffn_type;
    if (auto act = r.string("hidden_act")) {
        ffn_type = ffn_of(*act);
        if (!ffn_type)
            report(out, r.site("hidden_act"), fmt::format("unsupported hidden_act '{}' (silu or gelu*)", *act));
    }
    if (!out.empty()) throw ScenarioError(out);

    ModelArch m;
    m.name = model_name(j, file);
    m.source = "Hugging Face config.json: " + name;
    m.layers = *layers;
    m.hidden = *hidden;
    m.heads = *heads;
    m.kv_heads = kv_heads.value_or(*heads);
    m.ffn = *ffn;
    m.ffn_type = *ffn_type;
    m.vocab = *vocab;
    m.tied_embeddings = tied.value_or(false);
    m.head_dim = head_dim ? *head_dim : m.hidden / m.heads;
    const std::map<std::string, std::string> field_of{
        {"heads", "num_attention_heads"}, {"kv_heads", "num_key_value_heads"}, {"head_dim", "head_dim"}};
    for (const auto& p : detail::check_model_shape(m, head_dim.has_value()))
        report(out, r.site(field_of.at(p.key)),
               p.key == "heads" ? fmt::format("{} (hidden_size / num_attention_heads, and there is no head_dim)",
                                              p.message)
                                : p.message);
    if (!out.empty()) throw ScenarioError(out);
    return m;
}

} // namespace trainsim::model
