// Output of the seed fine-tune's compact dialect:  <tool_N>(key="value", n=3, on=true)<end>
// (several calls may follow each other; text outside calls is content). Each call is rewritten
// into the official call syntax and parsed by text::ParseModelOutput, so names and values get
// the same schema typing; <tool_N> is named by tool_map[N].
#ifndef FGEMMA_CALL_COMPACT_H_
#define FGEMMA_CALL_COMPACT_H_

#include <string>
#include <string_view>
#include <vector>

#include "fgemma/status.h"
#include "src/text/call_parser.h"
#include "src/text/tool_catalog.h"

namespace fg::call {

// InvalidArgument "compact: offset N: what" for malformed output or an unmapped <tool_N>.
StatusOr<text::ParsedOutput> ParseCompactOutput(std::string_view text,
                                                const std::vector<std::string>& tool_map,
                                                const text::ToolCatalog& catalog);

}  // namespace fg::call

#endif  // FGEMMA_CALL_COMPACT_H_
