#include "backend/backend.h"

namespace strata {

std::string_view act_name(Act a) {
    switch (a) {
        case Act::Hidden:
            return "hidden";
        case Act::Normed:
            return "normed";
        case Act::Q:
            return "q";
        case Act::K:
            return "k";
        case Act::V:
            return "v";
        case Act::AttnOut:
            return "attn_out";
        case Act::Out:
            return "out";
        case Act::Side:
            return "side";
        case Act::Count:
            break;
    }
    return "?";
}

}  // namespace strata
