// Text helpers for error messages about untrusted input.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace consensor {

// Printable form of untrusted text for error messages: at most `max_len` bytes, with
// non-printable bytes escaped as \xNN and "..." when cut.
std::string Printable(std::string_view s, size_t max_len = 40);

}  // namespace consensor
