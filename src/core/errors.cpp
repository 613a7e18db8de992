#include "resurgo/errors.hpp"

namespace resurgo {

void rethrow_as_is(const Error& error) {
  const std::string message = error.what();
  switch (error.code()) {
    case ErrorCode::kInvalidArgument: throw InvalidArgumentError(message);
    case ErrorCode::kNotFound: throw NotFoundError(message);
    case ErrorCode::kCorrupt: throw CorruptionError(message);
    case ErrorCode::kMismatch: throw MismatchError(message);
    case ErrorCode::kStorage: throw StorageError(message);
    case ErrorCode::kConfig: throw ConfigError(message);
    case ErrorCode::kFormat: throw FormatError(message);
    case ErrorCode::kState: throw StateError(message);
    case ErrorCode::kInternal: break;
  }
  throw Error(ErrorCode::kInternal, message);
}

}  // namespace resurgo
