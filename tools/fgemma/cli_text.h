// Text helpers shared by the subcommands.
#ifndef FGEMMA_TOOLS_CLI_TEXT_H_
#define FGEMMA_TOOLS_CLI_TEXT_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace fg::cli {

// Length of the valid UTF-8 sequence starting at s[i] (1-4), or 0 if the bytes there are not
// one (bad lead byte, truncated, overlong, surrogate, past U+10FFFF).
size_t Utf8SequenceLength(std::string_view s, size_t i);

// Strict UTF-8 validity of the whole string.
bool IsValidUtf8(std::string_view s);

// `s` made printable on one terminal line: \n \r \t \\ and other control bytes as C escapes,
// bytes that are not valid UTF-8 as \xNN, valid characters as they are. Cut after about `max`
// bytes (at a character boundary) with a note of the full size.
std::string Printable(std::string_view s, size_t max = SIZE_MAX);

}  // namespace fg::cli

#endif  // FGEMMA_TOOLS_CLI_TEXT_H_
