// Result files (traces, HTML reports, error models) written so that a failure never leaves a
// half-written file over a good one, and so that what the path names is respected:
//   - a regular file or a new name: the content goes to a temporary file in the same folder,
//     renamed over the target only once it was written completely (rename within one file system
//     is atomic on POSIX); the old file's permissions are kept;
//   - "-", a character device (/dev/null, /dev/stdout) or a FIFO: written through as a stream,
//     as a shell redirection would (there is no half file to protect, and renaming over a device
//     node would replace it);
//   - a symlink: followed, and its final target written as above (said so in the returned note);
//   - a folder, a block device or a socket: refused.
// Temporary files left by a run that was killed (`.NAME.tmp.PID` whose process is gone) are
// removed before writing.
#pragma once

#include "trainsim/model/core/errors.hpp"

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

// Calls `write` on a stream to `path` as described above. `key` names the option the path came
// from ("--trace") in error messages. On failure (the file cannot be created, a write or flush
// fails, `write` throws) a temporary file is removed, a regular `path` is left as it was, and
// OutputError (or write's own exception) propagates. Returns a note for the user (a symlink that
// was followed), empty when there is nothing to say.
[[nodiscard]] std::string write_file_atomically(const std::filesystem::path& path, const std::string& key,
                                                const std::function<void(std::ostream&)>& write);

} // namespace trainsim::sim
