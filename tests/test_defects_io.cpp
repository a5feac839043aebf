// Files and streams (issue #45 item 7): calibrate's outputs get the same checks as trainsim's
// (a device node, FIFO or symlink is never replaced by a plain file; a profile that would not load
// is never written); a failed write to standard output is an error; topology --dot and multi-plan
// traces are written atomically (all or nothing); no input or output blocks or reads without end
// on a FIFO or a device, and such a path is named for what it is; temporaries of an interrupted
// write are removed on SIGINT / SIGTERM.
#include "trainsim/model/core/file_io.hpp"

#include "trainsim/calibrate/core/calibrate_error.hpp"
#include "trainsim/calibrate/measure/measure.hpp"

#include "cli_runner.hpp"
#include "test_calibrate_support.hpp"

#include <fmt/format.h>
#include <catch2/catch.hpp>

#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <ostream>
#include <stdexcept>
#include <string>

namespace fs = std::filesystem;
namespace test = trainsim::test;
namespace model = trainsim::model;
namespace calibrate = trainsim::calibrate;
using Catch::Matchers::Contains;

namespace {

struct Run {
    int rc = -1;     // exit status; 124 when `timeout` had to stop it (it hung)
    std::string out; // what the shell command printed on its standard output
};

// Runs `sh -c` on `command` in `dir`; the binaries started through trainsim_exe() / calibrate_exe()
// are stopped after 20 s, so a hang fails the test instead of blocking the suite.
Run shell(const fs::path& dir, const std::string& command) {
    const auto c = test::run_command(fmt::format("cd '{}' && {}", dir.string(), command));
    return Run{c.rc, c.out};
}

std::string trainsim_exe() {
    return fmt::format("TRAINSIM_DATA_DIR='{}' timeout -k 5 20 '{}'", TRAINSIM_TEST_DATA_DIR, TRAINSIM_EXE);
}
std::string calibrate_exe() {
    return fmt::format("timeout -k 5 20 '{}'", TRAINSIM_CALIBRATE_EXE);
}
std::string data_dir() {
    return fmt::format("--data-dir '{}'", TRAINSIM_TEST_DATA_DIR);
}

// The shipped two-plan example with a small batch (fast to simulate, small traces).
void write_scenario(const fs::path& file) {
    std::string text = test::read_text(fs::path(TRAINSIM_TEST_DATA_DIR) / "examples" / "default.yaml");
    const auto at = text.find("global_batch: 1024");
    REQUIRE(at != std::string::npos);
    text.replace(at, std::string("global_batch: 1024").size(), "global_batch: 8");
    test::write_text(file, text);
}

// A run directory whose samples are all "unsupported": before, fit wrote a profile from them and
// only then found that it could not be loaded.
void write_unsupported_run(const fs::path& dir) {
    fs::create_directories(dir);
    calibrate::SampleWriter w(dir / calibrate::kSamplesFile);
    for (const std::string dtype : {"bf16", "fp16", "fp8_e4m3"})
        for (const std::int64_t n : {2048, 4096}) {
            calibrate::Sample u;
            u.desc = test::gemm_desc(n, n, n, dtype);
            u.desc.key = calibrate::make_key(u.desc);
            u.status = "unsupported";
            u.reason = "not on this device";
            u.backend = "cuda";
            w.append(u);
        }
}

// A small synthetic H100-like run that fits (as in test_calibrate_cli.cpp).
void write_good_run(const fs::path& dir) { test::write_synthetic_h100_samples(dir); }

bool make_null_device(const fs::path& p) {
    return ::mknod(p.c_str(), S_IFCHR | 0666, makedev(1, 3)) == 0;
}

std::size_t entries(const fs::path& dir) {
    return static_cast<std::size_t>(std::distance(fs::directory_iterator(dir), fs::directory_iterator()));
}

} // namespace

// ---- 1. calibrate fit --out: the output checks of --html / --trace; validate before writing ----

TEST_CASE("fit --out --force writes through a device node, refuses a FIFO nobody reads, follows a symlink",
          "[defects-io]") {
    test::ScratchDir tmp;
    write_unsupported_run(tmp / "bad");
    write_good_run(tmp / "run");
    Run r;

    SECTION("a character device (our own /dev/null) stays a device") {
        const auto node = tmp / "null";
        if (!make_null_device(node)) {
            WARN("not root: cannot make device nodes");
            return;
        }
        r = shell(tmp.path(), fmt::format("{} fit run --base h100-sxm --out '{}' --force {} 2>&1", calibrate_exe(),
                                          node.string(), data_dir()));
        CHECK(r.rc == 0);
        CHECK(fs::is_character_file(fs::symlink_status(node)));
    }
    SECTION("a FIFO with no reader is refused at once and stays a FIFO") {
        const auto fifo = tmp / "pipe";
        REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
        r = shell(tmp.path(), fmt::format("{} fit run --base h100-sxm --out '{}' --force {} 2>&1", calibrate_exe(),
                                          fifo.string(), data_dir()));
        CHECK(r.rc == 2);
        CHECK_THAT(r.out, Contains("pipe") && Contains("FIFO") && Contains("nothing reads"));
        CHECK(fs::is_fifo(fs::symlink_status(fifo)));
    }
    SECTION("a symlink stays a link and its target gets the profile") {
        const auto target = tmp / "target.yaml";
        test::write_text(target, "old\n");
        fs::create_symlink(target, tmp / "link.yaml");
        r = shell(tmp.path(), fmt::format("{} fit run --base h100-sxm --out link.yaml --force {} 2>&1", calibrate_exe(),
                                          data_dir()));
        CHECK(r.rc == 0);
        CHECK(fs::is_symlink(fs::symlink_status(tmp / "link.yaml")));
        CHECK_THAT(test::read_text(target), Contains("id:"));
    }
    SECTION("a profile that would not load is never written, not even over a file with --force") {
        test::write_text(tmp / "keep.yaml", "old profile\n");
        r = shell(tmp.path(), fmt::format("{} fit bad --base h100-sxm --out keep.yaml --force {} 2>&1", calibrate_exe(),
                                          data_dir()));
        CHECK(r.rc == 2);
        CHECK(test::read_text(tmp / "keep.yaml") == "old profile\n");
    }
}

// ---- 2. a failed write to standard output ----

TEST_CASE("a result that cannot reach standard output is an error: /dev/full and a closed stdout", "[defects-io]") {
    test::ScratchDir tmp;
    write_scenario(tmp / "s.yaml");
    for (const std::string redirect : {">/dev/full", ">&-"}) {
        CAPTURE(redirect);
        // stderr into the pipe, then stdout away: what the tool says about it is captured.
        Run r = shell(tmp.path(), fmt::format("{} simulate s.yaml --json 2>&1 {}", trainsim_exe(), redirect));
        CHECK(r.rc == 2);
        CHECK_THAT(r.out, Contains("cannot write to standard output"));
        r = shell(tmp.path(), fmt::format("{} show h100-sxm --json {} 2>&1 {}", calibrate_exe(), data_dir(), redirect));
        CHECK(r.rc == 2);
        CHECK_THAT(r.out, Contains("cannot write to standard output"));
    }
    // And nothing changes where stdout works.
    const Run ok =
        shell(tmp.path(), fmt::format("{} show h100-sxm --json {} 2>/dev/null", calibrate_exe(), data_dir()));
    CHECK(ok.rc == 0);
    CHECK_THAT(ok.out, Contains("{"));
}

// ---- 3. topology --dot through the checked atomic writer ----

TEST_CASE("topology --dot: a full device is an error, a FIFO nobody reads is refused, a file is replaced whole",
          "[defects-io]") {
    test::ScratchDir tmp;
    write_scenario(tmp / "s.yaml");
    Run r = shell(tmp.path(), fmt::format("{} topology s.yaml --dot /dev/full 2>&1", trainsim_exe()));
    CHECK(r.rc == 2);
    CHECK_THAT(r.out, Contains("--dot") && Contains("write failed"));
    REQUIRE(::mkfifo((tmp / "pipe").c_str(), 0600) == 0);
    r = shell(tmp.path(), fmt::format("{} topology s.yaml --dot pipe 2>&1", trainsim_exe()));
    CHECK(r.rc == 2);
    CHECK_THAT(r.out, Contains("nothing reads"));
    r = shell(tmp.path(), fmt::format("{} topology s.yaml --dot t.dot 2>&1", trainsim_exe()));
    CHECK(r.rc == 0);
    CHECK_THAT(test::read_text(tmp / "t.dot"), Contains("graph"));
    CHECK(entries(tmp.path()) == 3); // s.yaml, pipe, t.dot: no temporary left
}

// ---- 4. multi-plan traces: all or nothing ----

TEST_CASE("a multi-plan trace that fails on its second file leaves the first file as it was", "[defects-io]") {
    test::ScratchDir tmp;
    write_scenario(tmp / "s.yaml");
    test::write_text(tmp / "step.1.json", "old first trace");
    fs::create_directory(tmp / "step.2.json"); // the second trace cannot be written
    Run r = shell(tmp.path(), fmt::format("{} simulate s.yaml --trace step.json 2>&1", trainsim_exe()));
    CHECK(r.rc == 2);
    CHECK_THAT(r.out, Contains("step.2.json") && Contains("folder"));
    CHECK(test::read_text(tmp / "step.1.json") == "old first trace");
    CHECK(entries(tmp.path()) == 3); // s.yaml, step.1.json, step.2.json: no temporary left
    // With both writable, both are replaced.
    fs::remove(tmp / "step.2.json");
    r = shell(tmp.path(), fmt::format("{} simulate s.yaml --trace step.json 2>&1", trainsim_exe()));
    CHECK(r.rc == 0);
    CHECK_THAT(test::read_text(tmp / "step.1.json"), Contains("traceEvents"));
    CHECK_THAT(test::read_text(tmp / "step.2.json"), Contains("traceEvents"));
}

// ---- 5 and 6. no input or output blocks or reads without end; the path is named for what it is ----

TEST_CASE("the shared reader refuses folders, FIFOs and devices before reading, and caps the size", "[defects-io]") {
    test::ScratchDir tmp;
    REQUIRE(::mkfifo((tmp / "fifo").c_str(), 0600) == 0); // no writer: opening it to read would block
    const auto refused = [](const fs::path& p) {
        try {
            (void)model::read_regular_file(p, model::kMaxInputBytes);
        } catch (const model::FileReadError& e) {
            return std::string(e.what());
        }
        return std::string("read");
    };
    CHECK_THAT(refused(tmp / "fifo"), Contains("fifo") && Contains("is a FIFO"));
    CHECK_THAT(refused("/dev/zero"), Contains("/dev/zero") && Contains("is a character device"));
    CHECK_THAT(refused(tmp.path()), Contains("is a folder"));
    CHECK_THAT(refused(tmp / "nope"), Contains("cannot open") && Contains("no such file"));
    test::write_text(tmp / "big", std::string(2048, 'x'));
    CHECK_THROWS_WITH(model::read_regular_file(tmp / "big", 1024), Contains("larger than"));
    CHECK(model::read_regular_file(tmp / "big", 4096).size() == 2048);
}

TEST_CASE("calibrate's inputs: /dev/zero, a FIFO and a folder are refused at once and named for what they are",
          "[defects-io]") {
    test::ScratchDir tmp;
    REQUIRE(::mkfifo((tmp / "fifo").c_str(), 0600) == 0);
    fs::create_directory(tmp / "folder");
    // One refusal of each kind per importer (each start of the binary costs about a second on CI).
    Run r = shell(tmp.path(), fmt::format("{} import nccl-tests /dev/zero --out run 2>&1", calibrate_exe()));
    CHECK(r.rc == 2);
    CHECK_THAT(r.out, Contains("/dev/zero") && Contains("is a character device"));
    r = shell(tmp.path(), fmt::format("{} import gemm fifo --out run 2>&1", calibrate_exe()));
    CHECK(r.rc == 2);
    CHECK_THAT(r.out, Contains("fifo") && Contains("is a FIFO"));
    r = shell(tmp.path(), fmt::format("{} import gemm /dev/zero folder --out run 2>&1", calibrate_exe()));
    CHECK(r.rc == 2);
    CHECK_THAT(r.out, Contains("is a character device"));
    r = shell(tmp.path(), fmt::format("{} import nccl-tests folder --out run 2>&1", calibrate_exe()));
    CHECK(r.rc == 2);
    CHECK_THAT(r.out, Contains("is a folder"));
    // samples.jsonl that is /dev/zero or a FIFO with no writer.
    fs::create_directory(tmp / "zero-run");
    fs::create_symlink("/dev/zero", tmp / "zero-run" / "samples.jsonl");
    CHECK_THROWS_WITH(calibrate::read_samples(tmp / "zero-run" / "samples.jsonl"),
                      Contains("samples.jsonl") && Contains("is a character device"));
    fs::create_directory(tmp / "fifo-run");
    REQUIRE(::mkfifo((tmp / "fifo-run" / "samples.jsonl").c_str(), 0600) == 0);
    r = shell(tmp.path(),
              fmt::format("{} fit fifo-run --base h100-sxm --out p.yaml {} 2>&1", calibrate_exe(), data_dir()));
    CHECK(r.rc == 2);
    CHECK_THAT(r.out, Contains("samples.jsonl") && Contains("is a FIFO"));
    CHECK_FALSE(fs::exists(tmp / "p.yaml"));
}

TEST_CASE("trainsim's inputs and outputs: a FIFO is never waited on, /dev/zero and a folder are named",
          "[defects-io]") {
    test::ScratchDir tmp;
    write_scenario(tmp / "s.yaml");
    REQUIRE(::mkfifo((tmp / "fifo").c_str(), 0600) == 0);
    fs::create_directory(tmp / "folder");
    Run r = shell(tmp.path(), fmt::format("{} simulate fifo 2>&1", trainsim_exe()));
    CHECK(r.rc == 2);
    CHECK_THAT(r.out, Contains("fifo") && Contains("is a FIFO"));
    r = shell(tmp.path(), fmt::format("{} simulate /dev/zero 2>&1", trainsim_exe()));
    CHECK(r.rc == 2);
    CHECK_THAT(r.out, Contains("is a character device"));
    r = shell(tmp.path(), fmt::format("{} validate folder 2>&1", trainsim_exe()));
    CHECK(r.rc == 2);
    CHECK_THAT(r.out, Contains("is a folder"));
    r = shell(tmp.path(), fmt::format("{} simulate s.yaml --stack fifo 2>&1", trainsim_exe()));
    CHECK(r.rc == 2);
    CHECK_THAT(r.out, Contains("is a FIFO"));
    // Outputs: a FIFO that nothing reads.
    // (two plans: --trace t.json writes t.1.json and t.2.json)
    REQUIRE(::mkfifo((tmp / "t.1.json").c_str(), 0600) == 0);
    r = shell(tmp.path(), fmt::format("{} simulate s.yaml --trace t.json 2>&1", trainsim_exe()));
    CHECK(r.rc == 2);
    CHECK_THAT(r.out, Contains("t.1.json") && Contains("nothing reads"));
    r = shell(tmp.path(), fmt::format("{} report s.yaml --html fifo 2>&1", trainsim_exe()));
    CHECK(r.rc == 2);
    CHECK_THAT(r.out, Contains("nothing reads"));
    CHECK(fs::is_fifo(fs::symlink_status(tmp / "fifo")));
}

// ---- 7. temporaries of an interrupted write ----

TEST_CASE("a write stopped by SIGTERM or SIGINT leaves no temporary file and dies of that signal", "[defects-io]") {
    for (const int sig : {SIGTERM, SIGINT}) {
        CAPTURE(sig);
        test::ScratchDir tmp;
        const auto out = tmp / "trace.json";
        test::write_text(out, "old");
        const pid_t pid = ::fork();
        REQUIRE(pid >= 0);
        if (pid == 0) {
            // The child writes part of a result, then is interrupted as a user's Ctrl-C would.
            ::signal(sig, SIG_DFL);
            try {
                (void)model::write_file_atomically(out, "--trace", [&](std::ostream& os) {
                    os << std::string(1 << 20, 'x');
                    os.flush();
                    ::raise(sig);
                });
            } catch (...) {
            }
            ::_exit(0); // not reached: the signal ends the child
        }
        int status = 0;
        while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
        }
        CHECK(WIFSIGNALED(status));
        if (WIFSIGNALED(status)) CHECK(WTERMSIG(status) == sig);
        CHECK(test::read_text(out) == "old");
        CHECK(entries(tmp.path()) == 1); // the temporary is gone
    }
}

TEST_CASE("measure's sample writer refuses a FIFO named samples.jsonl without waiting for a reader", "[defects-io]") {
    test::ScratchDir tmp;
    const auto fifo = tmp / "samples.jsonl";
    REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
    // In a child with an alarm: a writer that waits for a reader is killed instead of hanging the suite.
    const pid_t pid = ::fork();
    REQUIRE(pid >= 0);
    if (pid == 0) {
        ::alarm(10);
        try {
            calibrate::SampleWriter w(fifo);
        } catch (const calibrate::SampleError& e) {
            ::_exit(std::string(e.what()).find("is a FIFO") != std::string::npos ? 0 : 3);
        } catch (...) {
            ::_exit(4);
        }
        ::_exit(5); // opened: not refused
    }
    int status = 0;
    while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
    REQUIRE(WIFEXITED(status)); // not killed by the alarm
    CHECK(WEXITSTATUS(status) == 0);
    CHECK(fs::is_fifo(fs::symlink_status(fifo)));
}
