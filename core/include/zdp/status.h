// Status / StatusOr<T>: the error path of every zdp library call (LevelDB-style).
// Library code returns these; only main() functions turn them into exit codes. The one
// typed exception, zdp::Error, carries a Status across API boundaries that cannot return
// one (constructors, StatusOr::value() on an error).
#pragma once

#include <optional>
#include <stdexcept>
#include <string>
#include <utility>

namespace zdp {

enum class StatusCode : int {
  kOk = 0,
  kInvalidArgument,  // the caller passed something impossible (names the argument)
  kNotFound,         // a key, file or name that should exist does not
  kTimeout,          // a deadline passed (names what was awaited and for how long)
  kPeerFailure,      // another rank died or its connection broke
  kAborted,          // stopped because of an earlier failure (sticky stream / comm error)
  kIoError,          // socket / file system failure
  kCudaError,
  kNcclError,
  kCublasError,
  kOutOfMemory,
  kUnavailable,      // a feature not compiled into this build
  kInternal,         // a broken invariant inside zdp: a bug
};

const char* to_string(StatusCode code);

class [[nodiscard]] Status {
 public:
  Status() = default;  // OK
  Status(StatusCode code, std::string message) : code_(code), message_(std::move(message)) {}

  static Status Ok() { return Status(); }

  bool ok() const { return code_ == StatusCode::kOk; }
  StatusCode code() const { return code_; }
  const std::string& message() const { return message_; }
  // "Timeout: rank 1: all_reduce ... timed out" ("OK" when ok()).
  std::string to_string() const;
  // Returns a copy whose message starts with `context + ": "`; OK stays OK.
  Status with_context(const std::string& context) const;
  // Throws zdp::Error when not OK.
  void throw_if_error() const;

 private:
  StatusCode code_ = StatusCode::kOk;
  std::string message_;
};

// The single typed exception of zdp.
class Error : public std::runtime_error {
 public:
  explicit Error(Status status) : std::runtime_error(status.to_string()), status_(std::move(status)) {}
  const Status& status() const { return status_; }

 private:
  Status status_;
};

template <typename T>
class [[nodiscard]] StatusOr {
 public:
  StatusOr(Status status)  // NOLINT: implicit by design
      : status_(status.ok() ? Status(StatusCode::kInternal, "StatusOr constructed from an OK status without a value")
                            : std::move(status)) {}
  StatusOr(T value) : value_(std::move(value)) {}  // NOLINT: implicit by design

  bool ok() const { return status_.ok(); }
  const Status& status() const { return status_; }

  // REQUIRES: ok(). Otherwise throws zdp::Error with the held status.
  T& value() & { check(); return *value_; }
  const T& value() const& { check(); return *value_; }
  T&& value() && { check(); return std::move(*value_); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }
  T&& operator*() && { return std::move(*this).value(); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }

 private:
  void check() const { if (!status_.ok()) throw Error(status_); }
  Status status_;
  std::optional<T> value_;
};

// "[rank 3/4 host:pid] file.cc:42": where an error was raised, for check macros.
std::string error_site(const char* file, int line);

}  // namespace zdp

#define ZDP_STATUS_CONCAT_INNER(a, b) a##b
#define ZDP_STATUS_CONCAT(a, b) ZDP_STATUS_CONCAT_INNER(a, b)

// Returns the status from the enclosing function when `expr` is not OK.
#define ZDP_RETURN_IF_ERROR(expr)                   \
  do {                                              \
    ::zdp::Status zdp_status_ = (expr);             \
    if (!zdp_status_.ok()) return zdp_status_;      \
  } while (0)

// `ZDP_ASSIGN_OR_RETURN(auto x, f());` declares x from a StatusOr or returns its error.
#define ZDP_ASSIGN_OR_RETURN(lhs, expr) \
  ZDP_ASSIGN_OR_RETURN_IMPL(ZDP_STATUS_CONCAT(zdp_statusor_, __LINE__), lhs, expr)
#define ZDP_ASSIGN_OR_RETURN_IMPL(tmp, lhs, expr) \
  auto tmp = (expr);                              \
  if (!tmp.ok()) return tmp.status();             \
  lhs = std::move(tmp).value()
