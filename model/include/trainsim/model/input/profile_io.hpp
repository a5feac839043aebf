// Hardware-profile files (docs/formats.md section 3): read strictly (every problem with
// file:line:col and key path) and written so that they read back exactly. The profile format is
// shared by trainsim-calibrate (the writer) and the simulator (the reader); the scenario loader
// (loader.hpp) resolves a plan's GPU through resolve_profile.
#pragma once

#include "trainsim/model/core/errors.hpp"
#include "trainsim/model/core/hardware_profile.hpp"

#include <filesystem>
#include <map>
#include <string>
#include <string_view>
#include <vector>

namespace trainsim::model {

// A profile by path, or by id looked up in data_dir/hardware/<id>.yaml.
[[nodiscard]] HardwareProfile load_profile(const std::filesystem::path& file);
// The same strict reading of a profile's text; `name` stands for the file in diagnostics.
[[nodiscard]] HardwareProfile load_profile_text(const std::string& text, const std::string& name);
[[nodiscard]] HardwareProfile resolve_profile(const std::string& id_or_path,
                                              const std::filesystem::path& relative_to,
                                              const std::filesystem::path& data_dir);
// The file resolve_profile reads (it need not exist): id_or_path is a path when it contains a '/'
// or ends in .yaml / .yml (relative paths are taken from relative_to), else an id looked up as
// data_dir/hardware/<id>.yaml.
[[nodiscard]] std::filesystem::path profile_path(const std::string& id_or_path,
                                                 const std::filesystem::path& relative_to,
                                                 const std::filesystem::path& data_dir);
// Writes a profile in the same format (used by trainsim-calibrate fit). The rendered text is read
// back through the strict reader first: a profile that would not load is refused (ProfileError)
// and nothing is written. Written through the checked atomic writer (core/file_io.hpp): never
// overwrites unless force; a device or FIFO is written through, never replaced by a file; throws
// ProfileError naming the file otherwise.
void write_profile(const HardwareProfile& profile, const std::filesystem::path& file, bool force);

// The datasheet figures a calibrated table depends on, by profile key (`calibrated.measured_on`):
// the dense peaks govern the GEMM table of their precision, the HBM bandwidth the memory curves,
// the NVLink rate the intra-node collectives and the NIC rate the inter-node ones.
inline constexpr std::string_view kMeasuredOnKeys[] = {"compute.dense_peak.bf16",       "compute.dense_peak.fp16",
                                                       "compute.dense_peak.fp8",        "memory.hbm_bandwidth",
                                                       "interconnect.nvlink_bandwidth", "node.nic_rate"};
// The profile's figures of kMeasuredOnKeys as measured_on records them ("300 GB/s"), for a fit to
// store with the tables it measured (absent peaks are left out).
[[nodiscard]] std::map<std::string, std::string> datasheet_fingerprint(const HardwareProfile& p);

// Ids (file stems) of the *.yaml files in dir, sorted; empty when dir does not exist.
[[nodiscard]] std::vector<std::string> list_ids(const std::filesystem::path& dir);

} // namespace trainsim::model
