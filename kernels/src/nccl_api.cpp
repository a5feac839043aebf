#include "nccl_api.hpp"

#include "trainsim/kernels/kernel_error.hpp"

#include <dlfcn.h>

#include <cstdlib>
#include <cstring>
#include <optional>
#include <string>
#include <vector>

namespace trainsim::kernels::detail {

namespace {

// The soname NCCL 2 installs and the PyTorch wheels (nvidia-nccl-cu12 / -cu13) ship.
constexpr const char* kSoname = "libnccl.so.2";

template <class F>
bool resolve(void* lib, const char* name, F& out, std::string& missing) {
    void* p = dlsym(lib, name);
    if (p == nullptr) {
        missing += missing.empty() ? name : std::string(", ") + name;
        return false;
    }
    static_assert(sizeof(out) == sizeof(p));
    std::memcpy(&out, &p, sizeof(out)); // object pointer -> function pointer (POSIX guarantees it works)
    return true;
}

struct Loaded {
    std::optional<NcclApi> api;
    std::string error; // every place tried, when nothing loaded
};

std::vector<std::string> candidates() {
    std::vector<std::string> c;
    if (const char* home = std::getenv("NCCL_HOME"); home != nullptr && *home != '\0') {
        c.push_back(std::string(home) + "/lib/" + kSoname);
        c.push_back(std::string(home) + "/lib64/" + kSoname);
    }
    c.emplace_back(kSoname); // no slash: the dynamic loader's own search
#ifdef TRAINSIM_NCCL_BUILD_DIR
    c.push_back(std::string(TRAINSIM_NCCL_BUILD_DIR) + "/" + kSoname);
#endif
    return c;
}

Loaded load() {
    Loaded out;
    std::string tried;
    for (const auto& path : candidates()) {
        // RTLD_LOCAL: NCCL's symbols stay out of the global namespace (no clash with another copy,
        // e.g. one a Python extension loaded); RTLD_NOW: a broken library fails here, not mid-run.
        void* lib = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
        if (lib == nullptr) {
            const char* e = dlerror();
            tried += "\n  " + path + ": " + (e != nullptr ? e : "not loadable");
            continue;
        }
        NcclApi a;
        std::string missing;
        resolve(lib, "ncclGetVersion", a.GetVersion, missing);
        resolve(lib, "ncclGetUniqueId", a.GetUniqueId, missing);
        resolve(lib, "ncclCommInitRank", a.CommInitRank, missing);
        resolve(lib, "ncclCommInitRankConfig", a.CommInitRankConfig, missing);
        resolve(lib, "ncclCommSplit", a.CommSplit, missing);
        resolve(lib, "ncclCommUserRank", a.CommUserRank, missing);
        resolve(lib, "ncclCommCount", a.CommCount, missing);
        resolve(lib, "ncclCommGetAsyncError", a.CommGetAsyncError, missing);
        resolve(lib, "ncclCommAbort", a.CommAbort, missing);
        resolve(lib, "ncclCommFinalize", a.CommFinalize, missing);
        resolve(lib, "ncclCommDestroy", a.CommDestroy, missing);
        resolve(lib, "ncclGetErrorString", a.GetErrorString, missing);
        resolve(lib, "ncclGetLastError", a.GetLastError, missing);
        resolve(lib, "ncclAllReduce", a.AllReduce, missing);
        resolve(lib, "ncclAllGather", a.AllGather, missing);
        resolve(lib, "ncclReduceScatter", a.ReduceScatter, missing);
        resolve(lib, "ncclSend", a.Send, missing);
        resolve(lib, "ncclRecv", a.Recv, missing);
        resolve(lib, "ncclGroupStart", a.GroupStart, missing);
        resolve(lib, "ncclGroupEnd", a.GroupEnd, missing);
        if (!missing.empty()) {
            tried += "\n  " + path + ": lacks " + missing + " (NCCL 2.18 or later is needed: ncclCommSplit)";
            dlclose(lib);
            continue;
        }
        if (a.GetVersion(&a.version) != ncclSuccess) a.version = 0;
        // The path the loader actually used (a bare soname resolves to a file somewhere).
        Dl_info info{};
        a.library = dladdr(reinterpret_cast<void*>(a.GetVersion), &info) != 0 && info.dli_fname != nullptr
                        ? info.dli_fname
                        : path;
        out.api = std::move(a); // the handle stays open for the life of the process
        return out;
    }
    out.error = "NCCL (" + std::string(kSoname) + ") was not found; looked at:" + tried +
                "\nSet NCCL_HOME to the folder holding lib/" + kSoname +
                " (for PyTorch's wheel: <site-packages>/nvidia/nccl), or add its folder to LD_LIBRARY_PATH";
    return out;
}

const Loaded& loaded() {
    static const Loaded l = load(); // C++ magic static: loaded once, thread-safe
    return l;
}

} // namespace

const NcclApi& nccl() {
    const Loaded& l = loaded();
    if (!l.api) throw NcclNotFound(l.error);
    return *l.api;
}

const NcclApi* try_nccl(std::string* why) noexcept {
    try {
        const Loaded& l = loaded();
        if (l.api) return &*l.api;
        if (why != nullptr) *why = l.error;
    } catch (...) {
        if (why != nullptr) *why = "NCCL could not be loaded";
    }
    return nullptr;
}

} // namespace trainsim::kernels::detail
