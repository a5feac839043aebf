// Helpers for the calibration tests (the scratch directory is scratch_dir.hpp): running trainsim-calibrate as a child
// process, synthetic samples with a known answer, and a toy plan the CPU backend's tiny
// measurement plan covers.
#pragma once

#include "trainsim/calibrate/core/descriptor.hpp"
#include "trainsim/calibrate/measure/measure.hpp"
#include "trainsim/calibrate/samples/sample.hpp"
#include "trainsim/model/core/scenario.hpp"
#include "trainsim/model/input/loader.hpp"

#include "scratch_dir.hpp"

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

namespace trainsim::test {

// The shipped H100 SXM profile (scenarios/hardware/h100-sxm.yaml), the calibration tests' device.
inline model::HardwareProfile h100() {
    return model::load_profile(std::filesystem::path(TRAINSIM_TEST_DATA_DIR) / "hardware" / "h100-sxm.yaml");
}

// Complete lines of a file (a torn last line is not counted).
inline std::size_t complete_lines(const std::filesystem::path& p) {
    const std::string t = read_text(p);
    std::size_t n = 0;
    for (char c : t) n += c == '\n' ? 1 : 0;
    return n;
}

struct ChildResult {
    int exit_code = -1;  // -signal when killed
    std::string out, err;
};

// Starts `exe args...` with stdout / stderr into files; returns its pid.
inline pid_t start_child(const std::string& exe, const std::vector<std::string>& args, const std::filesystem::path& out,
                         const std::filesystem::path& err) {
    std::vector<std::string> all{exe};
    all.insert(all.end(), args.begin(), args.end());
    std::vector<char*> argv;
    for (auto& a : all) argv.push_back(a.data());
    argv.push_back(nullptr);
    const pid_t pid = ::fork();
    if (pid == 0) {
        const int o = ::open(out.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
        const int e = ::open(err.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
        ::dup2(o, 1);
        ::dup2(e, 2);
        ::execv(exe.c_str(), argv.data());
        ::_exit(127);
    }
    return pid;
}

inline int wait_child(pid_t pid) {
    int status = 0;
    while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
    if (WIFEXITED(status)) return WEXITSTATUS(status);
    if (WIFSIGNALED(status)) return -WTERMSIG(status);
    return -1;
}

// Runs the command to completion.
inline ChildResult run_child(const std::string& exe, const std::vector<std::string>& args,
                             const std::filesystem::path& scratch) {
    const auto out = scratch / "child.out", err = scratch / "child.err";
    ChildResult r;
    r.exit_code = wait_child(start_child(exe, args, out, err));
    r.out = read_text(out);
    r.err = read_text(err);
    return r;
}

// --- synthetic samples -------------------------------------------------------------------------

inline calibrate::Sample synthetic(calibrate::Descriptor d, double seconds) {
    d.key = calibrate::make_key(d);
    calibrate::Sample s;
    s.desc = d;
    s.backend = "synthetic";
    s.impl = "formula";
    s.time = calibrate::summarize({seconds * 0.99, seconds, seconds * 1.01}, 1);
    s.measured_at = "2025-01-01T00:00:00Z";
    return s;
}

inline calibrate::Descriptor gemm_desc(std::int64_t m, std::int64_t n, std::int64_t k, const std::string& dtype,
                                       calibrate::AlgoChoice algo = calibrate::AlgoChoice::first) {
    calibrate::Descriptor d;
    d.kind = calibrate::OpKind::gemm;
    d.op = "gemm";
    d.dtype = dtype;
    d.m = m;
    d.n = n;
    d.k = k;
    d.algo = algo;
    d.label = "synthetic";
    return d;
}

inline calibrate::Descriptor memory_desc(const std::string& op, std::int64_t elements, const std::string& dtype) {
    calibrate::Descriptor d;
    d.kind = calibrate::OpKind::memory;
    d.op = op;
    d.dtype = dtype;
    d.elements = elements;
    d.label = "synthetic";
    return d;
}

inline calibrate::Descriptor collective_desc(const std::string& op, int group, double bytes) {
    calibrate::Descriptor d;
    d.kind = calibrate::OpKind::collective;
    d.op = op;
    d.dtype = "bf16";
    d.group_size = group;
    d.bytes = bytes;
    d.label = "synthetic";
    d.flush_l2 = false;
    return d;
}

// The toy layer of the CPU backend's tiny plan (calibrate/src/measure/plan.cpp kToy): simulating it with
// seq 128 x micro-batch 2 = 256 tokens at TP 1 hits the measured GEMM shapes exactly.
// A small synthetic H100-like run's samples (GEMMs, copies, 8-GPU all-reduces) that fit, in
// dir/samples.jsonl: for the fit and CLI tests that need a run without measuring.
inline void write_synthetic_h100_samples(const std::filesystem::path& dir) {
    std::filesystem::create_directories(dir);
    calibrate::SampleWriter w(dir / calibrate::kSamplesFile);
    for (std::int64_t n : {2048, 4096, 8192}) {
        auto d = gemm_desc(n, n, n, "bf16");
        w.append(synthetic(d, 4e-6 + d.flops() / 750e12));
    }
    for (std::int64_t e = 1 << 20; e <= (1 << 26); e *= 8) {
        auto d = memory_desc("copy", e, "bf16");
        w.append(synthetic(d, 2e-6 + d.bytes_moved() / 2.9e12));
    }
    for (double b = 1024; b <= 1 << 30; b *= 32) {
        auto d = collective_desc("all_reduce", 8, b);
        w.append(synthetic(d, 25e-6 + d.bytes * d.bus_factor() / 360e9));
    }
}

inline model::ModelArch toy_model() {
    model::ModelArch m;
    m.name = "toy";
    m.layers = 2;
    m.hidden = 256;
    m.heads = 4;
    m.kv_heads = 4;
    m.head_dim = 64;
    m.ffn = 704;
    m.ffn_type = model::FfnType::swiglu;
    m.vocab = 2048;
    return m;
}

} // namespace trainsim::test
