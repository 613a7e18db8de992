#include "core/errors.h"

#include "base/printable.h"

namespace resurgo {

namespace {

// `message` without the beginning that names `call` or `store` otherwise
// than the common form does.
std::string_view without_own_prefix(std::string_view message, std::string_view call, std::string_view store) {
  const std::string quoted = "store '" + printable(store) + "': ";
  const std::string prefixes[] = {std::string(call) + ": ", std::string(call) + " of " + quoted, quoted};
  for (const std::string& prefix : prefixes) {
    if (message.starts_with(prefix)) return message.substr(prefix.size());
  }
  return message;
}

}  // namespace

std::string store_call_message(std::string_view call, std::string_view store, std::string_view what) {
  return std::string(call) + " on store '" + printable(store) + "': " + std::string(what);
}

void rethrow_for_call(std::string_view call, std::string_view store, const Error& error) {
  const std::string_view message = error.what();
  const std::string common = store_call_message(call, store, "");
  if (message.starts_with(common)) rethrow_as_is(error);
  rethrow_as_is(Error(error.code(), common + std::string(without_own_prefix(message, call, store))));
}

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
