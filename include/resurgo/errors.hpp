// Exceptions thrown by the C++ API. Each maps to one RSG_E* code of the C API
// and one Python exception class.
#pragma once

#include <stdexcept>
#include <string>

namespace resurgo {

enum class ErrorCode : int {
  kInvalidArgument = -1,
  kNotFound = -2,
  kCorrupt = -3,
  kMismatch = -4,
  kStorage = -5,
  kConfig = -6,
  kFormat = -7,
  kState = -8,
  kInternal = -9,
};

class Error : public std::runtime_error {
 public:
  Error(ErrorCode code, const std::string& message)
      : std::runtime_error(message), code_(code) {}
  ErrorCode code() const noexcept { return code_; }

 private:
  ErrorCode code_;
};

#define RESURGO_DEFINE_ERROR(Name, Code)                                      \
  class Name : public Error {                                                 \
   public:                                                                    \
    explicit Name(const std::string& message) : Error(ErrorCode::Code, message) {} \
  };

RESURGO_DEFINE_ERROR(InvalidArgumentError, kInvalidArgument)
RESURGO_DEFINE_ERROR(NotFoundError, kNotFound)
RESURGO_DEFINE_ERROR(CorruptionError, kCorrupt)
RESURGO_DEFINE_ERROR(MismatchError, kMismatch)
RESURGO_DEFINE_ERROR(StorageError, kStorage)
RESURGO_DEFINE_ERROR(ConfigError, kConfig)
RESURGO_DEFINE_ERROR(FormatError, kFormat)
RESURGO_DEFINE_ERROR(StateError, kState)

#undef RESURGO_DEFINE_ERROR

// Rethrows a copy of `error` with its dynamic type preserved.
[[noreturn]] void rethrow_as_is(const Error& error);

}  // namespace resurgo
