// Result files respect what their path names (issue #19 item 1): a regular file is replaced
// atomically, a device node or FIFO is written through (never replaced by a file), a symlink is
// followed (the link stays), "-" is stdout, and temporaries of a killed run are cleaned up.
#include "trainsim/sim/report/output_file.hpp"

#include <fmt/format.h>
#include <catch2/catch.hpp>

#include "scratch_dir.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <array>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>
#include <string>

namespace fs = std::filesystem;
namespace test = trainsim::test;
using trainsim::sim::OutputError;
using trainsim::sim::write_file_atomically;

namespace {




auto text(const std::string& t) {
    return [t](std::ostream& os) { os << t; };
}

} // namespace

TEST_CASE("a regular output file is replaced whole and keeps its permissions", "[output]") {
    test::ScratchDir tmp;
    const auto out = tmp.path() / "report.html";
    test::write_text(out, "OLD");
    fs::permissions(out, fs::perms::owner_read | fs::perms::owner_write | fs::perms::group_read);
    CHECK(write_file_atomically(out, "--html", text("NEW")).empty());
    CHECK(test::read_text(out) == "NEW");
    CHECK(fs::status(out).permissions() == (fs::perms::owner_read | fs::perms::owner_write | fs::perms::group_read));
    // A writer that fails leaves the old file and no temporary.
    CHECK_THROWS_AS(write_file_atomically(out, "--html", [](std::ostream&) { throw OutputError({}); }), OutputError);
    CHECK(test::read_text(out) == "NEW");
    CHECK(std::distance(fs::directory_iterator(tmp.path()), fs::directory_iterator()) == 1);
}

TEST_CASE("a symlinked output is followed: the link stays and its target gets the content", "[output]") {
    test::ScratchDir tmp;
    fs::create_directories(tmp.path() / "real");
    const auto target = tmp.path() / "real" / "report.html";
    test::write_text(target, "OLD");
    const auto link = tmp.path() / "latest.html";
    fs::create_symlink(target, link);
    const std::string note = write_file_atomically(link, "--html", text("NEW"));
    CHECK(fs::is_symlink(fs::symlink_status(link)));
    CHECK(test::read_text(target) == "NEW");
    CHECK(note.find("symlink") != std::string::npos);
    CHECK(note.find(fs::canonical(target).string()) != std::string::npos);
    // A dangling link creates its target.
    const auto dangling = tmp.path() / "next.html";
    fs::create_symlink(tmp.path() / "real" / "next-target.html", dangling);
    (void)write_file_atomically(dangling, "--html", text("FIRST"));
    CHECK(fs::is_symlink(fs::symlink_status(dangling)));
    CHECK(test::read_text(tmp.path() / "real" / "next-target.html") == "FIRST");
}

TEST_CASE("a FIFO output is written through and stays a FIFO", "[output]") {
    test::ScratchDir tmp;
    const auto fifo = tmp.path() / "pipe";
    REQUIRE(mkfifo(fifo.c_str(), 0600) == 0);
    // A reader that does not block on open, so the writer's open succeeds at once.
    const int rd = open(fifo.c_str(), O_RDONLY | O_NONBLOCK);
    REQUIRE(rd >= 0);
    (void)write_file_atomically(fifo, "--trace", text("through the pipe"));
    std::array<char, 64> buf{};
    const ssize_t n = read(rd, buf.data(), buf.size());
    close(rd);
    CHECK(std::string(buf.data(), n > 0 ? static_cast<std::size_t>(n) : 0) == "through the pipe");
    CHECK(fs::is_fifo(fs::symlink_status(fifo)));
}

TEST_CASE("a character-device output is written through: a full device is an error and stays a device",
          "[output]") {
    test::ScratchDir tmp;
    // Our own /dev/full and /dev/null (major 1, minors 7 and 3); only root may make device nodes.
    const auto full = tmp.path() / "full";
    const auto null = tmp.path() / "null";
    if (mknod(full.c_str(), S_IFCHR | 0666, makedev(1, 7)) != 0 || mknod(null.c_str(), S_IFCHR | 0666, makedev(1, 3)) != 0) {
        WARN("not root: cannot make device nodes, so the device cases are not run here");
        return;
    }
    CHECK_THROWS_AS(write_file_atomically(full, "--html", text(std::string(1 << 16, 'x'))), OutputError);
    CHECK(fs::is_character_file(fs::symlink_status(full)));
    CHECK(write_file_atomically(null, "--html", text("discarded")).empty());
    CHECK(fs::is_character_file(fs::symlink_status(null)));
    CHECK(std::distance(fs::directory_iterator(tmp.path()), fs::directory_iterator()) == 2); // no temporaries
}

TEST_CASE("'-' as an output is standard output, not a file named '-'", "[output]") {
    test::ScratchDir tmp;
    const auto cwd = fs::current_path();
    fs::current_path(tmp.path());
    std::ostringstream captured;
    auto* old = std::cout.rdbuf(captured.rdbuf());
    std::string note;
    try {
        note = write_file_atomically("-", "--trace", text("{\"traceEvents\": []}"));
    } catch (...) {
        std::cout.rdbuf(old);
        fs::current_path(cwd);
        throw;
    }
    std::cout.rdbuf(old);
    fs::current_path(cwd);
    CHECK(captured.str() == "{\"traceEvents\": []}");
    CHECK(note.empty());
    CHECK_FALSE(fs::exists(tmp.path() / "-"));
}

TEST_CASE("temporaries left by a killed writer are removed, a live writer's are kept", "[output]") {
    test::ScratchDir tmp;
    const auto out = tmp.path() / "trace.json";
    // pid 999999999 is beyond Linux's pid_max (2^22): no such process.
    const auto stale = tmp.path() / ".trace.json.tmp.999999999";
    test::write_text(stale, std::string(1000, 'x'));
    // pid 1 (init) is always alive: its temporary is not ours to remove.
    const auto live = tmp.path() / ".trace.json.tmp.1";
    test::write_text(live, "in progress");
    const auto other = tmp.path() / ".other.json.tmp.999999999"; // another target's
    test::write_text(other, "other");
    (void)write_file_atomically(out, "--trace", text("{}"));
    CHECK_FALSE(fs::exists(stale));
    CHECK(fs::exists(live));
    CHECK(fs::exists(other));
    CHECK(test::read_text(out) == "{}");
}

TEST_CASE("a folder, a block device or an unresolvable link as output is refused naming the option",
          "[output]") {
    test::ScratchDir tmp;
    try {
        (void)write_file_atomically(tmp.path(), "--html", text("x"));
        FAIL("a folder was accepted");
    } catch (const OutputError& e) {
        REQUIRE(e.diagnostics().size() == 1);
        CHECK(e.diagnostics()[0].key == "--html");
        CHECK(e.diagnostics()[0].message.find("folder") != std::string::npos);
    }
    const auto loop = tmp.path() / "loop";
    fs::create_symlink(loop, loop); // a link to itself never resolves
    CHECK_THROWS_AS(write_file_atomically(loop, "--html", text("x")), OutputError);
    CHECK(fs::is_symlink(fs::symlink_status(loop)));
}
