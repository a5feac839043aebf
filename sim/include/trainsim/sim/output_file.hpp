// Result files (traces, HTML reports) written so that a failure never leaves a half-written file
// over a good one: the content goes to a temporary file in the same folder, renamed over the
// target only once it was written completely (rename within one file system is atomic on POSIX).
#pragma once

#include "trainsim/model/errors.hpp"

#include <filesystem>
#include <functional>
#include <iosfwd>
#include <string>
#include <vector>

namespace trainsim::sim {

// An output file that cannot be written: missing folder, no permission, disk full (exit code 2).
class OutputError : public model::InputError {
public:
    explicit OutputError(std::vector<model::Diagnostic> diags) : InputError("output file", std::move(diags)) {}
};

// Calls `write` on a stream to a temporary file next to `path`, then renames it to `path`.
// `key` names the option the path came from ("--trace") in error messages.
// On failure (the file cannot be created, a write or flush fails, `write` throws) the temporary
// file is removed, `path` is left as it was, and OutputError (or write's own exception) propagates.
void write_file_atomically(const std::filesystem::path& path, const std::string& key,
                           const std::function<void(std::ostream&)>& write);

} // namespace trainsim::sim
