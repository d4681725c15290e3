// The plan for people: what `strata inspect` prints after the model description. A summary
// (mode and why, budget, memory, streaming sizes, the speed limit and the tier that bounds it),
// the traffic of each tier, and a per-layer table of what stays in RAM and what is streamed.
#pragma once

#include <string>

#include "plan/plan.h"

namespace strata {

std::string plan_text(const Plan& plan);

}  // namespace strata
