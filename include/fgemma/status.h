// fg::Status and fg::StatusOr<T>: the error type of every fgemma API.
//
// Anything derived from files, flags, network or user text returns a Status, never aborts.
// Context is added on the way up with WithContext(), outermost first:
//   gguf: tensor 'blk.3.attn_q.weight': offset past end of file
#ifndef FGEMMA_STATUS_H_
#define FGEMMA_STATUS_H_

#include <cstdlib>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>

namespace fg {

enum class StatusCode : int {
  kOk = 0,
  kInvalidArgument,     // bad flag, bad user text, bad JSON
  kNotFound,            // missing file, key, tensor
  kOutOfRange,          // value outside its allowed range (context length, ids)
  kDataLoss,            // corrupt or truncated file contents
  kUnimplemented,       // a well-formed request fgemma does not support (unknown quant type)
  kResourceExhausted,   // out of memory, too large to allocate
  kFailedPrecondition,  // state does not allow the call (decode before prefill)
  kIo,                  // the OS refused (open, read, write, mmap)
  kInternal,            // a bug in fgemma
};

std::string_view StatusCodeName(StatusCode code);

class [[nodiscard]] Status {
 public:
  Status() = default;  // OK
  Status(StatusCode code, std::string message) : code_(code), message_(std::move(message)) {
    if (code_ == StatusCode::kOk) message_.clear();
  }

  bool ok() const { return code_ == StatusCode::kOk; }
  StatusCode code() const { return code_; }
  const std::string& message() const { return message_; }

  // Prepends "context: " to the message of an error; OK stays OK.
  Status WithContext(std::string_view context) const&;
  Status WithContext(std::string_view context) &&;

  // "INVALID_ARGUMENT: message" or "OK".
  std::string ToString() const;

  // Marks a status as deliberately unchecked.
  void IgnoreError() const {}

  friend bool operator==(const Status& a, const Status& b) {
    return a.code_ == b.code_ && a.message_ == b.message_;
  }

 private:
  StatusCode code_ = StatusCode::kOk;
  std::string message_;
};

inline Status OkStatus() { return Status(); }
inline Status InvalidArgumentError(std::string m) { return {StatusCode::kInvalidArgument, std::move(m)}; }
inline Status NotFoundError(std::string m) { return {StatusCode::kNotFound, std::move(m)}; }
inline Status OutOfRangeError(std::string m) { return {StatusCode::kOutOfRange, std::move(m)}; }
inline Status DataLossError(std::string m) { return {StatusCode::kDataLoss, std::move(m)}; }
inline Status UnimplementedError(std::string m) { return {StatusCode::kUnimplemented, std::move(m)}; }
inline Status ResourceExhaustedError(std::string m) {
  return {StatusCode::kResourceExhausted, std::move(m)};
}
inline Status FailedPreconditionError(std::string m) {
  return {StatusCode::kFailedPrecondition, std::move(m)};
}
inline Status IoError(std::string m) { return {StatusCode::kIo, std::move(m)}; }
inline Status InternalError(std::string m) { return {StatusCode::kInternal, std::move(m)}; }

// Holds either a value or a non-OK Status.
template <typename T>
class [[nodiscard]] StatusOr {
  static_assert(!std::is_same_v<std::decay_t<T>, Status>, "StatusOr<Status> is not allowed");

 public:
  StatusOr(const Status& status) : status_(status) { CheckNotOk(); }  // NOLINT: implicit
  StatusOr(Status&& status) : status_(std::move(status)) { CheckNotOk(); }  // NOLINT: implicit
  template <typename U = T,
            typename = std::enable_if_t<std::is_constructible_v<T, U&&> &&
                                        !std::is_same_v<std::decay_t<U>, Status> &&
                                        !std::is_same_v<std::decay_t<U>, StatusOr<T>>>>
  StatusOr(U&& value) : value_(std::forward<U>(value)) {}  // NOLINT: implicit

  bool ok() const { return status_.ok(); }
  const Status& status() const& { return status_; }
  Status status() && { return std::move(status_); }

  const T& value() const& { CheckOk(); return *value_; }
  T& value() & { CheckOk(); return *value_; }
  T&& value() && { CheckOk(); return std::move(*value_); }
  const T& operator*() const& { return value(); }
  T& operator*() & { return value(); }
  T&& operator*() && { return std::move(*this).value(); }
  const T* operator->() const { return &value(); }
  T* operator->() { return &value(); }

 private:
  void CheckNotOk() const {
    if (status_.ok()) std::abort();  // a StatusOr built from OkStatus() has no value: a bug
  }
  void CheckOk() const {
    if (!status_.ok()) std::abort();  // reading the value of an error: a bug
  }
  Status status_;
  std::optional<T> value_;
};

}  // namespace fg

#define FG_STATUS_CONCAT_INNER_(a, b) a##b
#define FG_STATUS_CONCAT_(a, b) FG_STATUS_CONCAT_INNER_(a, b)

// Returns the Status of `expr` from the enclosing function if it is not OK.
#define FG_RETURN_IF_ERROR(expr)                  \
  do {                                            \
    ::fg::Status fg_status_tmp_ = (expr);         \
    if (!fg_status_tmp_.ok()) return fg_status_tmp_; \
  } while (0)

// FG_ASSIGN_OR_RETURN(auto x, MakeX()); declares/assigns x or returns the error.
#define FG_ASSIGN_OR_RETURN(lhs, expr) \
  FG_ASSIGN_OR_RETURN_IMPL_(FG_STATUS_CONCAT_(fg_statusor_, __LINE__), lhs, expr)
#define FG_ASSIGN_OR_RETURN_IMPL_(tmp, lhs, expr) \
  auto tmp = (expr);                              \
  if (!tmp.ok()) return std::move(tmp).status();  \
  lhs = std::move(tmp).value()

#endif  // FGEMMA_STATUS_H_
