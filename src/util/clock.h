// Elapsed time for statistics: the one clock strata measures stalls, loads and phases with.
#pragma once

#include <chrono>

namespace strata {

using SteadyClock = std::chrono::steady_clock;

inline double seconds_since(SteadyClock::time_point t0) {
    return std::chrono::duration<double>(SteadyClock::now() - t0).count();
}

}  // namespace strata
