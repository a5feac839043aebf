#include "trainsim/model/core/errors.hpp"
#include "trainsim/model/core/scenario.hpp"

#include <fmt/format.h>

namespace trainsim::model {

std::string to_string(Precision p) {
    switch (p) {
    case Precision::bf16: return "bf16";
    case Precision::fp16: return "fp16";
    case Precision::fp8: return "fp8";
    }
    return "?";
}
std::string to_string(Provenance p) {
    return p == Provenance::calibrated ? "calibrated" : "datasheet+published";
}
std::string to_string(FfnType v) {
    switch (v) {
    case FfnType::swiglu: return "swiglu";
    case FfnType::gelu: return "gelu";
    case FfnType::relu2: return "relu2";
    }
    return "?";
}
std::string to_string(Sharding v) {
    switch (v) {
    case Sharding::none: return "none";
    case Sharding::dist_opt: return "dist_opt";
    case Sharding::zero1: return "zero1";
    case Sharding::zero2: return "zero2";
    case Sharding::zero3: return "zero3";
    case Sharding::fsdp: return "fsdp";
    case Sharding::hsdp: return "hsdp";
    }
    return "?";
}
std::string to_string(Recompute v) {
    switch (v) {
    case Recompute::none: return "none";
    case Recompute::selective: return "selective";
    case Recompute::full: return "full";
    }
    return "?";
}
std::string to_string(IntraFabric v) {
    switch (v) {
    case IntraFabric::nvswitch: return "nvswitch";
    case IntraFabric::nvlink_bridge: return "nvlink-bridge";
    case IntraFabric::pcie: return "pcie";
    }
    return "?";
}
std::string to_string(InterFabric v) {
    switch (v) {
    case InterFabric::infiniband: return "infiniband";
    case InterFabric::roce: return "roce";
    case InterFabric::ethernet: return "ethernet";
    }
    return "?";
}
std::string to_string(Offload v) {
    switch (v) {
        case Offload::none:
            return "none";
        case Offload::optimizer:
            return "optimizer";
        case Offload::params:
            return "params";
    }
    return "?";
}
std::string to_string(PriceBasis v) {
    switch (v) {
        case PriceBasis::gpu_hour:
            return "gpu_hour";
        case PriceBasis::machine_month:
            return "machine_month";
        case PriceBasis::machine_hour:
            return "machine_hour";
    }
    return "?";
}
std::string to_string(Commitment v) {
    switch (v) {
    case Commitment::on_demand: return "on_demand";
    case Commitment::monthly: return "monthly";
    case Commitment::quarterly: return "quarterly";
    case Commitment::annual: return "annual";
    case Commitment::spot:
        return "spot";
    }
    return "?";
}
std::string to_string(BillingIncrement v) {
    switch (v) {
        case BillingIncrement::second:
            return "second";
        case BillingIncrement::minute:
            return "minute";
        case BillingIncrement::hour:
            return "hour";
    }
    return "?";
}

std::string to_string(OptimizerState v) {
    switch (v) {
    case OptimizerState::fp32: return "fp32";
    case OptimizerState::bf16: return "bf16";
    case OptimizerState::int8: return "8bit";
    }
    return "?";
}

std::string to_string(Method v) {
    switch (v) {
    case Method::pretrain: return "pretrain";
    case Method::full: return "full";
    case Method::lora: return "lora";
    case Method::qlora: return "qlora";
    }
    return "?";
}

std::string to_string(BaseFormat v) { return v == BaseFormat::bf16 ? "bf16" : "nf4"; }

std::string to_string(FsdpFetch v) {
    return v == FsdpFetch::layer ? "layer" : "module";
}

std::string to_string(SelectiveRecompute v) {
    return v == SelectiveRecompute::attention ? "attention" : "alternate_matmuls";
}

std::string to_string(HostDispatch v) {
    switch (v) {
        case HostDispatch::te:
            return "te";
        case HostDispatch::legacy:
            return "legacy";
        case HostDispatch::eager:
            return "eager";
        case HostDispatch::compiled:
            return "compiled";
        case HostDispatch::graphs:
            return "graphs";
    }
    return "?";
}

std::string to_string(MicrobatchSync v) {
    switch (v) {
        case MicrobatchSync::none:
            return "none";
        case MicrobatchSync::forward:
            return "forward";
        case MicrobatchSync::forward_backward:
            return "forward-backward";
    }
    return "?";
}

std::string to_string(PpSchedule v) {
    switch (v) {
        case PpSchedule::automatic:
            return "auto";
        case PpSchedule::one_f_one_b:
            return "1f1b";
        case PpSchedule::interleaved:
            return "interleaved";
        case PpSchedule::zb_h1:
            return "zb-h1";
        case PpSchedule::zb_v:
            return "zb-v";
        case PpSchedule::dualpipe_v:
            return "dualpipe-v";
    }
    return "?";
}

std::string to_string(GradAccumulation v) {
    switch (v) {
        case GradAccumulation::fused:
            return "fused";
        case GradAccumulation::megatron_ddp:
            return "megatron-ddp";
        case GradAccumulation::deepspeed:
            return "deepspeed";
        case GradAccumulation::autograd:
            return "autograd";
    }
    return "?";
}

std::string to_string(Elementwise v) {
    return v == Elementwise::fused ? "fused" : "eager";
}

std::string to_string(CrossEntropy v) {
    switch (v) {
        case CrossEntropy::megatron:
            return "megatron";
        case CrossEntropy::pytorch:
            return "pytorch";
        case CrossEntropy::fused:
            return "fused";
    }
    return "?";
}

std::string to_string(AttentionImpl v) {
    switch (v) {
    case AttentionImpl::flash: return "flash";
    case AttentionImpl::triton: return "triton";
    case AttentionImpl::unfused: return "unfused";
    case AttentionImpl::flash2:
        return "flash2";
    }
    return "?";
}

std::string to_string(RankOrder v) {
    switch (v) {
    case RankOrder::tp_cp_dp_pp: return "tp-cp-dp-pp";
    case RankOrder::tp_pp_cp_dp: return "tp-pp-cp-dp";
    case RankOrder::cp_dp_tp_pp: return "cp-dp-tp-pp";
    case RankOrder::cp_dp_pp_tp: return "cp-dp-pp-tp";
    case RankOrder::pp_tp_cp_dp: return "pp-tp-cp-dp";
    case RankOrder::pp_cp_dp_tp: return "pp-cp-dp-tp";
    }
    return "?";
}

std::string Diagnostic::format() const {
    std::string loc = file;
    if (line > 0) loc += fmt::format(":{}:{}", line, col);
    return key.empty() ? fmt::format("{}: {}", loc, message) : fmt::format("{}: {}: {}", loc, key, message);
}

std::pair<int, int> line_col(std::string_view text, std::size_t byte) {
    int line = 1, col = 1;
    for (std::size_t i = 0; i < byte && i < text.size(); ++i) {
        if (text[i] == '\n') {
            ++line;
            col = 1;
        } else {
            ++col;
        }
    }
    return {line, col};
}

namespace {
std::string join(const std::string& kind, const std::vector<Diagnostic>& diags) {
    std::string s = fmt::format("{} {} problem{}:", diags.size(), kind, diags.size() == 1 ? "" : "s");
    for (const auto& d : diags) s += "\n  " + d.format();
    return s;
}
} // namespace

InputError::InputError(const std::string& what_kind, std::vector<Diagnostic> diags)
    : std::runtime_error(join(what_kind, diags)), diags_(std::move(diags)) {}

} // namespace trainsim::model
