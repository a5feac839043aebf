#include "trainsim/calibrate/measure/rendezvous.hpp"

#include "trainsim/calibrate/core/calibrate_error.hpp"

#include <fmt/format.h>

#include <unistd.h>

#include <array>
#include <fstream>
#include <sstream>
#include <thread>

namespace trainsim::calibrate {

namespace fs = std::filesystem;

std::string host_name() {
    std::array<char, 256> buf{};
    if (::gethostname(buf.data(), buf.size() - 1) != 0) return "unknown";
    return buf.data();
}

namespace {

// Written beside the target and renamed into place: readers see the whole file or none.
void write_atomic(const fs::path& file, const std::string& text) {
    const fs::path tmp = file.string() + fmt::format(".tmp-{}", ::getpid());
    {
        std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
        out << text;
        if (!out.flush()) throw CalibrationInputError(tmp.string(), "cannot write the rendezvous file");
    }
    std::error_code ec;
    fs::rename(tmp, file, ec);
    if (ec) throw CalibrationInputError(file.string(), "cannot publish the rendezvous file: " + ec.message());
}

std::string read_all(const fs::path& file) {
    std::ifstream in(file, std::ios::binary);
    std::ostringstream ss;
    ss << in.rdbuf();
    return ss.str();
}

// Polls every 10 ms until ready() or the deadline.
template <class F> bool wait_for(F ready, std::chrono::milliseconds timeout) {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    while (!ready()) {
        if (std::chrono::steady_clock::now() > deadline) return false;
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    return true;
}

} // namespace

RendezvousResult rendezvous(const fs::path& dir, const std::string& session, int rank, int world,
                            const std::function<std::vector<unsigned char>()>& make_id,
                            std::chrono::milliseconds timeout) {
    if (world < 1 || rank < 0 || rank >= world)
        throw CalibrationInputError("--rank", fmt::format("rank {} is not in [0, {})", rank, world));
    std::error_code ec;
    fs::create_directories(dir, ec);
    auto host_file = [&](int r) { return dir / fmt::format("{}.host.{}", session, r); };
    const fs::path id_file = dir / (session + ".id");
    write_atomic(host_file(rank), host_name());

    RendezvousResult out;
    if (rank == 0) {
        const bool all = wait_for(
            [&] {
                for (int r = 0; r < world; ++r)
                    if (!fs::exists(host_file(r))) return false;
                return true;
            },
            timeout);
        if (!all) {
            std::string missing;
            for (int r = 0; r < world; ++r)
                if (!fs::exists(host_file(r))) missing += (missing.empty() ? "" : ", ") + std::to_string(r);
            throw CalibrationInputError(dir.string(), fmt::format("rendezvous '{}': ranks {} did not show up within {} s",
                                                                  session, missing, timeout.count() / 1000));
        }
        for (int r = 0; r < world; ++r) out.hosts.push_back(read_all(host_file(r)));
        out.id = make_id();
        // Hex id on the first line, then one host per rank.
        std::string text;
        for (unsigned char c : out.id) text += fmt::format("{:02x}", c);
        text += "\n";
        for (const auto& h : out.hosts) text += h + "\n";
        write_atomic(id_file, text);
        return out;
    }
    if (!wait_for([&] { return fs::exists(id_file); }, timeout))
        throw CalibrationInputError(dir.string(),
                                    fmt::format("rendezvous '{}': rank 0 did not publish the NCCL id within {} s",
                                                session, timeout.count() / 1000));
    std::istringstream in(read_all(id_file));
    std::string hex, host;
    std::getline(in, hex);
    if (hex.size() % 2 != 0) throw CalibrationInputError(id_file.string(), "malformed rendezvous id");
    for (std::size_t i = 0; i < hex.size(); i += 2)
        out.id.push_back(static_cast<unsigned char>(std::stoi(hex.substr(i, 2), nullptr, 16)));
    while (std::getline(in, host)) out.hosts.push_back(host);
    if (static_cast<int>(out.hosts.size()) != world)
        throw CalibrationInputError(id_file.string(), fmt::format("rendezvous lists {} hosts, expected {}",
                                                                  out.hosts.size(), world));
    return out;
}

} // namespace trainsim::calibrate
