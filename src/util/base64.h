// Standard base64 (RFC 4648, with padding), for binary payloads in JSON answers.
#pragma once

#include <string>
#include <string_view>

namespace strata {

std::string base64_encode(std::string_view bytes);

}  // namespace strata
