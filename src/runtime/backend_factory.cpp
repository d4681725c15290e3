#include "runtime/backend_factory.h"

#include "backend/cpu/cpu_backend.h"
#if STRATA_HAVE_CUDA
#include "backend/cuda/cuda_backend.h"
#endif

namespace strata {

Result<std::unique_ptr<Backend>> make_backend(const ComputeUnit& unit,
                                              const BackendConfig& config) {
    switch (unit.kind) {
        case ComputeUnit::Kind::Cpu:
            return make_cpu_backend(config);
        case ComputeUnit::Kind::Gpu:
#if STRATA_HAVE_CUDA
            return make_cuda_backend(config, unit.device);
#else
            return err("this strata was built without CUDA: it cannot run layers on a GPU");
#endif
    }
    return err("unknown compute unit");
}

}  // namespace strata
