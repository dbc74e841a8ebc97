// fgemma tokenize: text -> token ids with a model's vocabulary (same ids as llama.cpp).
#include <cstdio>
#include <string>
#include <vector>

#include "src/base/mapped_file.h"
#include "src/gguf/reader.h"
#include "src/text/tokenizer.h"
#include "tools/fgemma/cli_text.h"
#include "tools/fgemma/commands.h"
#include "tools/fgemma/common_flags.h"
#include "tools/fgemma/flags.h"

namespace fg::cli {
int CmdTokenize(int argc, char** argv) {
  std::string file;
  bool ids_only = false, no_bos = false, no_special = false, show_pieces = false;
  std::vector<std::string> text_args;
  FlagParser flags("tokenize", "Tokenize text with a model's vocabulary and print the token ids.");
  CommonFlags common;
  common.Register(flags, CommonFlags::kModel);
  flags.AddBool("--ids", &ids_only, "print the ids on one line, separated by spaces");
  flags.AddBool("--no-bos", &no_bos, "do not add the BOS/EOS tokens the vocabulary asks for");
  flags.AddBool(
      "--no-special", &no_special,
      "treat control-token texts such as <start_of_turn> as plain text "
      "(user-defined tokens such as \"\\n\" or \"<table>\" still match, as in llama.cpp)");
  flags.AddBool("--show-pieces", &show_pieces,
                "print each id with its piece (escaped), tab-separated");
  flags.AddString("--file", &file, "FILE", "read the text from FILE ('-' for stdin) instead");
  flags.SetPositionals(&text_args, "TEXT", 0, -1);
  flags.AddNote(
      "Without --ids, prints one id per line. Several TEXT arguments are joined with single "
      "spaces. The text is bytes: invalid UTF-8 is tokenized as llama.cpp does (byte tokens).");
  if (auto rc = flags.Parse(argc, argv)) return *rc;
  if (Status s = common.Check(); !s.ok()) return UsageError("tokenize", s.message());

  std::string text;
  if (!file.empty()) {
    if (!text_args.empty()) {
      return ReportError("tokenize", InvalidArgumentError("give either TEXT or --file, not both"),
                         /*usage=*/true);
    }
    // At most kMaxInputFileBytes either way (a regular file's size is checked before reading).
    StatusOr<std::string> content = file == "-"
                                        ? ReadFdToString(0, kMaxInputFileBytes, "stdin")
                                        : ReadFileToString(file);
    if (!content.ok()) return ReportError("tokenize", content.status());
    text = std::move(*content);
  } else {
    if (text_args.empty()) {
      return ReportError("tokenize", InvalidArgumentError("no text given (TEXT or --file FILE)"),
                         /*usage=*/true);
    }
    for (size_t i = 0; i < text_args.size(); ++i) {
      if (i) text.push_back(' ');
      text += text_args[i];
    }
  }

  StatusOr<std::string> path = common.ModelPath();
  if (!path.ok()) return ReportError("tokenize", path.status());
  const std::string model = *path;
  StatusOr<std::unique_ptr<gguf::File>> gguf = gguf::File::Open(model);
  if (!gguf.ok()) return ReportError("tokenize", gguf.status());  // names the path
  StatusOr<std::unique_ptr<text::Tokenizer>> tok = text::Tokenizer::FromGguf(**gguf);
  if (!tok.ok()) return ReportError("tokenize", tok.status().WithContext(model));

  const std::vector<int32_t> ids = (*tok)->Encode(text, !no_bos, !no_special);
  std::string out;
  if (ids_only) {
    for (size_t i = 0; i < ids.size(); ++i) {
      if (i) out.push_back(' ');
      out += std::to_string(ids[i]);
    }
    out.push_back('\n');
  } else {
    for (int32_t id : ids) {
      out += std::to_string(id);
      if (show_pieces) {
        out.push_back('\t');
        out += Printable((*tok)->TokenToPiece(id, /*special=*/true));
      }
      out.push_back('\n');
    }
  }
  std::fwrite(out.data(), 1, out.size(), stdout);
  return kExitOk;  // a failed write is reported by FinishStdout (cli_main.cc)
}

}  // namespace fg::cli
