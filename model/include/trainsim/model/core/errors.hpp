// Typed errors for bad input. Only main() turns them into messages and exit codes.
#pragma once

#include <cstddef>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace trainsim::model {

// One problem in an input file, located at file:line:col (1-based; 0 = unknown) and key path.
struct Diagnostic {
    std::string file;
    int line = 0;
    int col = 0;
    std::string key;  // e.g. "plans[1].parallel.tp"
    std::string message;
    [[nodiscard]] std::string format() const;  // "file:line:col: key: message"
};

// 1-based line and column of the 0-based byte offset `byte` in `text` (clamped to its end): where
// a parser that counts bytes (nlohmann::json's parse_error::byte) stopped.
[[nodiscard]] std::pair<int, int> line_col(std::string_view text, std::size_t byte);

// Base of all input errors: carries every problem found, not just the first.
class InputError : public std::runtime_error {
public:
    InputError(const std::string& what_kind, std::vector<Diagnostic> diags);
    [[nodiscard]] const std::vector<Diagnostic>& diagnostics() const { return diags_; }

private:
    std::vector<Diagnostic> diags_;
};

// A malformed or impossible scenario (exit code 2).
class ScenarioError : public InputError {
public:
    explicit ScenarioError(std::vector<Diagnostic> diags) : InputError("scenario", std::move(diags)) {}
};

// A missing or malformed hardware profile (exit code 2).
class ProfileError : public InputError {
public:
    explicit ProfileError(std::vector<Diagnostic> diags) : InputError("hardware profile", std::move(diags)) {}
};

// A missing or malformed stack profile (exit code 2).
class StackProfileError : public InputError {
public:
    explicit StackProfileError(std::vector<Diagnostic> diags) : InputError("stack profile", std::move(diags)) {}
};

} // namespace trainsim::model
