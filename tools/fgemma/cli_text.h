// Text helpers shared by the subcommands.
#ifndef FGEMMA_TOOLS_CLI_TEXT_H_
#define FGEMMA_TOOLS_CLI_TEXT_H_

#include <cstddef>
#include <cstdint>
#include <cstdio>
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

enum class LineRead {
  kLine,     // `line` holds the next line (without its '\n')
  kTooLong,  // the line had more than `max_bytes` bytes: it was read to its end and dropped
  kRunaway,  // the line went on past `max_line_bytes`: reading stopped inside it
  kEnd,      // end of input (or a read error: check ferror) before any byte of a line
};

// Reads one line of at most `max_bytes` bytes from `in` (a final line without '\n' counts).
// Memory stays bounded by `max_bytes` whatever the input (/dev/zero has no newline), and time by
// `max_line_bytes`.
LineRead ReadLine(std::FILE* in, size_t max_bytes, size_t max_line_bytes, std::string* line);

}  // namespace fg::cli

#endif  // FGEMMA_TOOLS_CLI_TEXT_H_
