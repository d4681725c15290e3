#include "model/tensor_view.h"

namespace strata {

std::string_view memory_kind_name(MemoryKind k) {
    switch (k) {
        case MemoryKind::Host:
            return "host";
        case MemoryKind::PinnedHost:
            return "pinned";
        case MemoryKind::Device:
            return "device";
    }
    return "?";
}

}  // namespace strata
