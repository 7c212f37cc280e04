// Status and Result<T>: the library's only error channel (no exceptions across the API, no exit()).
// Every fallible call returns Status or Result<T>; the message says what went wrong and what to do.
// Categories mirror where the failure came from so front ends can map them to exit codes.
// Tested in tests/core/status_test.cpp.
#pragma once

#include <cassert>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <variant>

namespace vortex {

enum class ErrorCode : uint8_t {
  kOk = 0,
  kInvalidArgument,  // caller passed something wrong (bad shape, bad flag value)
  kNotFound,         // file / tensor / name missing
  kIo,               // read/write/mmap failure
  kFormat,           // malformed file contents (safetensors header, JSON, checkpoint layout)
  kUnsupported,      // valid but not implemented for this config / arch / dtype
  kOutOfMemory,
  kCuda,
  kCublas,
  kCudnn,
  kNccl,
  kInternal,   // a bug in Vortex
  kCancelled,  // the caller asked the work to stop (checked between transformer blocks)
};

const char* error_code_name(ErrorCode code);

class [[nodiscard]] Status {
 public:
  Status() = default;
  Status(ErrorCode code, std::string message) : code_(code), message_(std::move(message)) {}

  static Status Ok() { return {}; }
  bool ok() const { return code_ == ErrorCode::kOk; }
  ErrorCode code() const { return code_; }
  const std::string& message() const { return message_; }
  // "<category>: <message>", or "ok".
  std::string to_string() const;
  // Same code, message prefixed with "<context>: ".
  Status with_context(std::string_view context) const;

 private:
  ErrorCode code_ = ErrorCode::kOk;
  std::string message_;
};

inline Status invalid_argument(std::string m) { return {ErrorCode::kInvalidArgument, std::move(m)}; }
inline Status not_found(std::string m) { return {ErrorCode::kNotFound, std::move(m)}; }
inline Status io_error(std::string m) { return {ErrorCode::kIo, std::move(m)}; }
inline Status format_error(std::string m) { return {ErrorCode::kFormat, std::move(m)}; }
inline Status unsupported(std::string m) { return {ErrorCode::kUnsupported, std::move(m)}; }
inline Status internal_error(std::string m) { return {ErrorCode::kInternal, std::move(m)}; }
inline Status cancelled(std::string m) { return {ErrorCode::kCancelled, std::move(m)}; }

template <typename T>
class [[nodiscard]] Result {
 public:
  Result(T value) : v_(std::move(value)) {}        // NOLINT(google-explicit-constructor)
  Result(Status status) : v_(std::move(status)) {  // NOLINT(google-explicit-constructor)
    assert(!std::get<Status>(v_).ok() && "Result constructed from an ok Status");
  }

  bool ok() const { return std::holds_alternative<T>(v_); }
  const Status& status() const {
    static const Status kOkStatus;
    return ok() ? kOkStatus : std::get<Status>(v_);
  }
  T& value() & { return std::get<T>(v_); }
  const T& value() const& { return std::get<T>(v_); }
  T&& value() && { return std::get<T>(std::move(v_)); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }

 private:
  std::variant<T, Status> v_;
};

}  // namespace vortex

#define VORTEX_CONCAT_INNER_(a, b) a##b
#define VORTEX_CONCAT_(a, b) VORTEX_CONCAT_INNER_(a, b)

#define VORTEX_RETURN_IF_ERROR(expr)                 \
  do {                                               \
    ::vortex::Status vortex_status_ = (expr);        \
    if (!vortex_status_.ok()) return vortex_status_; \
  } while (0)

#define VORTEX_ASSIGN_OR_RETURN_IMPL_(tmp, lhs, expr) \
  auto tmp = (expr);                                  \
  if (!tmp.ok()) return tmp.status();                 \
  lhs = std::move(tmp).value()

// VORTEX_ASSIGN_OR_RETURN(auto x, make_x());  or  VORTEX_ASSIGN_OR_RETURN(x, make_x());
#define VORTEX_ASSIGN_OR_RETURN(lhs, expr) \
  VORTEX_ASSIGN_OR_RETURN_IMPL_(VORTEX_CONCAT_(vortex_result_, __LINE__), lhs, expr)
