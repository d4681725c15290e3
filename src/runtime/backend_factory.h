// The backends this build has, created for the compute units of an execution table
// (plan/execution_table.h). The engine is handed this factory and names no backend itself.
#pragma once

#include <memory>

#include "backend/backend.h"
#include "plan/execution_table.h"
#include "util/result.h"

namespace strata {

// The CPU backend for a Cpu unit, the CUDA backend on the unit's device for a Gpu unit (an error
// naming why when this build or machine has none).
Result<std::unique_ptr<Backend>> make_backend(const ComputeUnit& unit, const BackendConfig& config);

}  // namespace strata
