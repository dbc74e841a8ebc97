#include "tools/fgemma/cli_text.h"

#include <cstdio>

namespace fg::cli {

std::string Printable(std::string_view s, size_t max) {
  std::string out;
  size_t i = 0;
  while (i < s.size() && i < max) {
    const unsigned char c = static_cast<unsigned char>(s[i]);
    const size_t n = Utf8SequenceLength(s, i);
    if (c == '\n') {
      out += "\\n";
    } else if (c == '\r') {
      out += "\\r";
    } else if (c == '\t') {
      out += "\\t";
    } else if (c == '\\') {
      out += "\\\\";
    } else if (n == 0 || c < 0x20 || c == 0x7f) {
      char buf[8];
      std::snprintf(buf, sizeof(buf), "\\x%02x", c);
      out += buf;
    } else {
      out.append(s.substr(i, n));
      i += n;
      continue;
    }
    ++i;
  }
  if (i < s.size()) out += "... (" + std::to_string(s.size()) + " bytes)";
  return out;
}

LineRead ReadLine(std::FILE* in, size_t max_bytes, size_t max_line_bytes, std::string* line) {
  line->clear();
  size_t length = 0;
  int c;
  while ((c = getc_unlocked(in)) != EOF && c != '\n') {
    if (++length > max_line_bytes) return LineRead::kRunaway;
    if (length <= max_bytes) line->push_back(static_cast<char>(c));
  }
  if (c == EOF && length == 0) return LineRead::kEnd;
  if (length > max_bytes) {
    line->clear();
    return LineRead::kTooLong;
  }
  return LineRead::kLine;
}

}  // namespace fg::cli
