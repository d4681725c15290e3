#include "backend/cuda/cublas_loader.h"

#include <dlfcn.h>

#include <string>

namespace strata::cuda {

namespace {

struct Loaded {
    CublasApi api;
    bool ok = false;
    std::string reason;
};

template <typename Fn>
bool resolve(void* lib, const char* name, Fn& fn) {
    fn = reinterpret_cast<Fn>(dlsym(lib, name));
    return fn != nullptr;
}

Loaded load() {
    Loaded l;
    void* lib = nullptr;
    for (const char* name : {"libcublas.so.13", "libcublas.so.12", "libcublas.so"}) {
        lib = dlopen(name, RTLD_NOW | RTLD_LOCAL);
        if (lib) break;
    }
    if (!lib) {
        const char* e = dlerror();
        l.reason =
            std::string("cuBLAS could not be loaded (") + (e ? e : "libcublas.so not found") + ")";
        return l;
    }
    CublasApi& a = l.api;
    const char* missing = nullptr;
    if (!resolve(lib, "cublasCreate_v2", a.create)) missing = "cublasCreate_v2";
    if (!resolve(lib, "cublasDestroy_v2", a.destroy)) missing = "cublasDestroy_v2";
    if (!resolve(lib, "cublasSetStream_v2", a.set_stream)) missing = "cublasSetStream_v2";
    if (!resolve(lib, "cublasSetWorkspace_v2", a.set_workspace)) missing = "cublasSetWorkspace_v2";
    if (!resolve(lib, "cublasGemmEx", a.gemm_ex)) missing = "cublasGemmEx";
    resolve(lib, "cublasGetStatusString", a.status_string);
    if (missing) {
        l.reason = std::string("the cuBLAS library found has no ") + missing;
        dlclose(lib);
        return l;
    }
    l.ok = true;
    return l;
}

const Loaded& loaded() {
    static const Loaded l = load();
    return l;
}

}  // namespace

const CublasApi* cublas_api() {
    return loaded().ok ? &loaded().api : nullptr;
}

std::string_view cublas_unavailable_reason() {
    return loaded().reason;
}

}  // namespace strata::cuda
