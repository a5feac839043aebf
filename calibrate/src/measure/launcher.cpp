#include "launcher.hpp"

#include <fmt/format.h>

#include <csignal>
#include <cerrno>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <system_error>
#include <unistd.h>

namespace trainsim::calibrate::detail {

std::vector<pid_t> spawn_ranks(const std::vector<std::string>& args, int world) {
    std::vector<pid_t> pids;
    const pid_t parent = ::getpid();
    for (int r = 1; r < world; ++r) {
        std::vector<std::string> argv_s = args;
        argv_s.emplace_back("--rank");
        argv_s.push_back(std::to_string(r));
        std::vector<char*> argv;
        for (auto& a : argv_s) argv.push_back(a.data());
        argv.push_back(nullptr);
        const pid_t pid = ::fork();
        if (pid < 0) {
            const int err = errno;
            stop_ranks(pids);
            throw std::system_error(err, std::generic_category(), "fork of rank " + std::to_string(r));
        }
        if (pid == 0) {
            // Child: only async-signal-safe calls until exec.
            ::prctl(PR_SET_PDEATHSIG, SIGKILL);
            if (::getppid() != parent) ::_exit(127);  // the parent died before prctl
            ::execv("/proc/self/exe", argv.data());
            ::_exit(127);
        }
        pids.push_back(pid);
    }
    return pids;
}

std::string wait_ranks(const std::vector<pid_t>& pids) {
    std::string failed;
    for (std::size_t i = 0; i < pids.size(); ++i) {
        int status = 0;
        while (::waitpid(pids[i], &status, 0) < 0 && errno == EINTR) {
        }
        std::string what;
        if (WIFEXITED(status) && WEXITSTATUS(status) != 0) what = fmt::format("exit code {}", WEXITSTATUS(status));
        if (WIFSIGNALED(status)) what = fmt::format("signal {}", WTERMSIG(status));
        if (!what.empty()) failed += fmt::format("{}rank {} ({})", failed.empty() ? "" : ", ", i + 1, what);
    }
    return failed;
}

void stop_ranks(const std::vector<pid_t>& pids) {
    for (pid_t p : pids) ::kill(p, SIGTERM);
    for (pid_t p : pids) {
        int status = 0;
        while (::waitpid(p, &status, 0) < 0 && errno == EINTR) {
        }
    }
}

} // namespace trainsim::calibrate::detail
