// Files in and out, shared by both binaries (trainsim and trainsim-calibrate link model/):
//
// Reading: every input reader takes its text from read_regular_file, which refuses what is not a
// regular file (a folder, a FIFO, a socket, a device such as /dev/zero) BEFORE reading it — a FIFO
// is opened with O_NONBLOCK, so one with no writer never blocks — names what the path is, and
// stops at a size cap (a wrong file never eats the memory).
//
// Writing: result files (traces, HTML reports, profiles, samples) are written so that a failure
// never leaves a half-written file over a good one, and so that what the path names is respected:
//   - a regular file or a new name: the content goes to a temporary file `.NAME.tmp.PID` in the
//     same folder, renamed over the target only once it was written completely (rename within
//     one file system is atomic on POSIX); the old file's permissions are kept;
//   - "-", a character device (/dev/null, /dev/stdout) or a FIFO with a reader: written through
//     as a stream, as a shell redirection would (there is no half file to protect, and renaming
//     over a device node would replace it); a FIFO that nothing reads is refused at once instead
//     of waiting for a reader;
//   - a symlink: followed, and its final target written as above (said so in the returned note);
//   - a folder, a block device or a socket: refused.
// Temporary files are removed when a write fails, when SIGINT or SIGTERM ends the process while
// they are written, and — left by a run that was killed otherwise (`.NAME.tmp.PID` whose process
// is gone) — before the same output is written again.
#pragma once

#include "trainsim/model/core/errors.hpp"

#include <cstddef>
#include <filesystem>
#include <functional>
#include <iosfwd>
#include <stdexcept>
#include <string>
#include <vector>

namespace trainsim::model {

// ---- reading ----

// Scenarios, profiles, stack profiles and HF configs: a file of many MiB is a wrong file.
inline constexpr std::size_t kMaxInputBytes = std::size_t{16} << 20;
// Data files (validation CSVs, samples, nccl-tests / GEMM / trainer logs): 256 MiB.
inline constexpr std::size_t kMaxDataFileBytes = std::size_t{256} << 20;

// An input that cannot be read. what() names the path ("cannot open 'x.yaml': no such file",
// "'/dev/zero' is a character device, not a regular file ..."); reason() is the same without the
// path, for errors that carry the path separately.
class FileReadError : public std::runtime_error {
public:
    FileReadError(const std::string& message, std::string reason)
        : std::runtime_error(message), reason_(std::move(reason)) {}
    [[nodiscard]] const std::string& reason() const { return reason_; }

private:
    std::string reason_;
};

// What `path` is, in words ("a FIFO", "a folder", "a character device"...), following symlinks;
// empty for a regular file or a path that does not exist.
[[nodiscard]] std::string describe_non_regular(const std::filesystem::path& path);

// The whole content of the regular file `file`, read up to `max_bytes` (throws FileReadError when
// it is longer, is not a regular file, or cannot be opened or read).
[[nodiscard]] std::string read_regular_file(const std::filesystem::path& file, std::size_t max_bytes);

// ---- writing ----

// An output file that cannot be written: missing folder, no permission, disk full (exit code 2).
class OutputError : public InputError {
public:
    explicit OutputError(std::vector<Diagnostic> diags) : InputError("output file", std::move(diags)) {}
};

struct OutputOptions {
    bool replace = true;  // false: an existing path (of any kind) is refused, never overwritten
    bool durable = false; // fsync the file and its folder before it counts as written
};

// Several outputs committed together: stage() writes each (regular targets to their temporary
// file), commit() renames every staged file into place once all were written. Destroyed without
// commit() (an exception, a later stage that failed), it removes its temporaries and the targets
// are left as they were.
class OutputBatch {
public:
    OutputBatch() = default;
    OutputBatch(const OutputBatch&) = delete;
    OutputBatch& operator=(const OutputBatch&) = delete;
    ~OutputBatch();

    // Writes `write`'s output for `path` as described at the top. `key` names the option the path
    // came from ("--trace") in error messages. Throws OutputError (or write's own exception) with
    // this stage's temporary removed. Returns a note for the user (a symlink that was followed),
    // empty when there is nothing to say.
    [[nodiscard]] std::string stage(const std::filesystem::path& path, const std::string& key,
                                    const std::function<void(std::ostream&)>& write, OutputOptions options = {});
    // Moves every staged file into place (throws OutputError naming the one that could not be).
    void commit();

private:
    struct Pending {
        std::filesystem::path tmp, target;
        std::string key;
        OutputOptions options;
        int slot = -1; // the signal handler's entry for tmp
    };
    void discard() noexcept;
    std::vector<Pending> pending_;
};

// One output, staged and committed at once (see OutputBatch).
[[nodiscard]] std::string write_file_atomically(const std::filesystem::path& path, const std::string& key,
                                                const std::function<void(std::ostream&)>& write,
                                                OutputOptions options = {});

// Flushes standard output and standard error and says whether everything written to standard
// output arrived (a full disk, /dev/full, a closed descriptor fail here; `error` says so). Called
// by both mains before they exit.
[[nodiscard]] bool standard_streams_ok(std::string& error);

// A standard descriptor (0, 1, 2) that is closed at start-up is opened on /dev/null read-only: a
// file opened later cannot take its number (and receive what was meant for the terminal), and a
// write to it fails (EBADF) as it did when it was closed, so the failure is still reported.
void guard_standard_descriptors() noexcept;

} // namespace trainsim::model
