// Text helpers shared by the subcommands.
#ifndef FGEMMA_TOOLS_CLI_TEXT_H_
#define FGEMMA_TOOLS_CLI_TEXT_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "src/text/tokenizer.h"

namespace fg::cli {

// Strict UTF-8 checks (src/text/tokenizer.h; one implementation for the CLI and the library).
using text::IsValidUtf8;
using text::Utf8SequenceLength;

// `s` made printable on one terminal line: \n \r \t \\ and other control bytes as C escapes,
// bytes that are not valid UTF-8 as \xNN, valid characters as they are. Cut after about `max`
// bytes (at a character boundary) with a note of the full size.
std::string Printable(std::string_view s, size_t max = SIZE_MAX);

}  // namespace fg::cli

#endif  // FGEMMA_TOOLS_CLI_TEXT_H_
