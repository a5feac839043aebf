// Shared pieces of the libFuzzer targets in tests/fuzz/ (README.md there): the input as a file for
// readers that take a path, and the one rule for what a reader may throw.
//
// A reader given bad bytes must throw its documented input error (a model::InputError subclass:
// ScenarioError, ProfileError, SampleError) and nothing else. Any other exception (UnitError,
// std::logic_error, YAML::Exception, nlohmann's json::exception, std::out_of_range, ...) escaping a
// reader is a finding: the target prints its type and message and aborts, which libFuzzer records
// as a crash with the input that caused it. So are sanitizer reports, hangs (-timeout) and
// runaway memory (-rss_limit_mb).
#pragma once

#include "trainsim/model/core/errors.hpp"

#include <cxxabi.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <string_view>
#include <typeinfo>

namespace trainsim::fuzz {

// The scenarios/ folder of the source tree (presets, profiles), as the CLI's default data dir.
inline std::filesystem::path data_dir() { return TRAINSIM_DEFAULT_DATA_DIR; }

// A per-process scratch file named trainsim-fuzz-<tag>-<pid><suffix> in $TMPDIR (or /tmp),
// rewritten with each input and removed when the process exits normally. The pid keeps parallel
// fuzzers (-jobs / -fork) apart.
class InputFile {
public:
    InputFile(std::string_view tag, std::string_view suffix) {
        const char* tmp = std::getenv("TMPDIR");
        const std::filesystem::path dir = tmp && *tmp ? tmp : "/tmp";
        path_ = dir / ("trainsim-fuzz-" + std::string(tag) + "-" + std::to_string(::getpid()) + std::string(suffix));
    }
    ~InputFile() {
        std::error_code ec;
        std::filesystem::remove(path_, ec);
    }
    InputFile(const InputFile&) = delete;
    InputFile& operator=(const InputFile&) = delete;

    // Replaces the file's contents with the bytes; returns its path.
    const std::filesystem::path& write(const std::uint8_t* data, std::size_t size) {
        std::ofstream out(path_, std::ios::binary | std::ios::trunc);
        out.write(reinterpret_cast<const char*>(data), static_cast<std::streamsize>(size));
        out.close();
        if (!out) {
            std::fprintf(stderr, "trainsim fuzz: cannot write the input file %s\n", path_.c_str());
            std::abort();  // the harness, not the reader, failed: stop instead of fuzzing nothing
        }
        return path_;
    }
    [[nodiscard]] const std::filesystem::path& path() const { return path_; }

private:
    std::filesystem::path path_;
};

inline std::string demangled(const std::type_info& t) {
    int status = 0;
    std::unique_ptr<char, void (*)(void*)> name(abi::__cxa_demangle(t.name(), nullptr, nullptr, &status), std::free);
    return status == 0 && name ? std::string(name.get()) : std::string(t.name());
}

// A finding: says what happened and aborts, so that libFuzzer saves the input as a crash.
[[noreturn]] inline void finding(std::string_view what) {
    std::fprintf(stderr, "\n==trainsim fuzz finding== %.*s\n", static_cast<int>(what.size()), what.data());
    std::abort();
}

// For steps that have no documented error (writing back what was read): every exception is a finding.
struct NeverExpected {};

// Runs one read. `Expected` is the documented input error of that reader; an exception of any
// other type is a finding. Returns true when the read returned normally.
template <class Expected = model::InputError, class Read> bool read_or_reject(std::string_view reader, Read&& read) {
    try {
        read();
        return true;
    } catch (const Expected&) {
        return false;  // bad input, reported as documented
    } catch (const std::exception& e) {
        finding(std::string(reader) + " threw " + demangled(typeid(e)) + " (not its documented input error): " +
                e.what());
    } catch (...) {
        finding(std::string(reader) + " threw something that is not a std::exception");
    }
}

} // namespace trainsim::fuzz
