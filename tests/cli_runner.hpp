// Runs the built trainsim executable as a user would (for CLI contract tests).
#pragma once

#include <array>
#include <cstdio>
#include <memory>
#include <stdexcept>
#include <string>
#include <sys/wait.h>

namespace trainsim::test {

struct CliRun {
    int rc = -1;        // exit status (-1: killed by a signal)
    std::string out;    // standard output (standard error is discarded)
};

// Runs `cmd` through the shell (popen): its exit status (-1 when it did not exit normally) and
// what it wrote on standard output.
inline CliRun run_command(const std::string& cmd) {
    CliRun r;
    std::unique_ptr<FILE, int (*)(FILE*)> pipe(popen(cmd.c_str(), "r"), pclose);
    if (!pipe) throw std::runtime_error("cannot start: " + cmd);
    std::array<char, 4096> buf{};
    while (std::fgets(buf.data(), buf.size(), pipe.get()) != nullptr) r.out += buf.data();
    const int status = pclose(pipe.release());
    r.rc = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    return r;
}

// `args` follow the executable, shell-quoted by the caller; TRAINSIM_DATA_DIR points at the
// shipped scenarios/ data.
// `with_stderr`: standard error is captured too, after standard output's lines as they interleave.
inline CliRun run_trainsim(const std::string& args, bool with_stderr = false) {
    return run_command(std::string("TRAINSIM_DATA_DIR='") + TRAINSIM_TEST_DATA_DIR + "' '" + TRAINSIM_EXE + "' " +
                       args + (with_stderr ? " 2>&1" : " 2>/dev/null"));
}

} // namespace trainsim::test
