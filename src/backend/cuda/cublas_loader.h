// cuBLAS, loaded at run time: the binary has no link-time dependency on it, so it starts (and
// runs the prompt GEMM on its own matvec kernels) where the library is not installed.
#pragma once

#include <cublas_v2.h>

#include <string_view>

namespace strata::cuda {

// The entry points the prompt GEMM uses, typed from the prototypes in <cublas_v2.h>.
// cublasGemmEx is overloaded in C++ (a wrapper for the old compute-type enum), so its type is
// spelled out; the static_cast only compiles when it matches the library's declaration.
using CublasGemmEx =
    decltype(static_cast<cublasStatus_t (*)(
                 cublasHandle_t, cublasOperation_t, cublasOperation_t, int, int, int, const void*,
                 const void*, cudaDataType, int, const void*, cudaDataType, int, const void*, void*,
                 cudaDataType, int, cublasComputeType_t, cublasGemmAlgo_t)>(&cublasGemmEx));

struct CublasApi {
    decltype(&cublasCreate_v2) create = nullptr;
    decltype(&cublasDestroy_v2) destroy = nullptr;
    decltype(&cublasSetStream_v2) set_stream = nullptr;
    decltype(&cublasSetWorkspace_v2) set_workspace = nullptr;
    CublasGemmEx gemm_ex = nullptr;
    decltype(&cublasGetStatusString) status_string = nullptr;  // may be null
};

// The library, loaded once per process (libcublas.so.13, then .12, then libcublas.so; it stays
// loaded until exit). Null when none could be loaded or one lacks an entry point.
const CublasApi* cublas_api();

// Why cublas_api() is null ("" when it is not).
std::string_view cublas_unavailable_reason();

}  // namespace strata::cuda
