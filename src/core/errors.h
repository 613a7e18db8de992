// How a message about a call on a store reads. The C API (rsg_last_error),
// the Python exceptions and the Fortran wrapper (resurgo_last_error) pass
// the C++ message on unchanged, so composing it here, once, gives the same
// failure the same text in every language:
//   <call> on store '<name>': <what failed>; <what to do>
#pragma once

#include <string>
#include <string_view>

#include "resurgo/errors.hpp"

namespace resurgo {

// "<call> on store '<store>': <what>", the store's name escaped
// (base/printable.h).
std::string store_call_message(std::string_view call, std::string_view store, std::string_view what);

// Rethrows `error`, its type kept, as a failure of `call` on `store`. A
// message already in that form is kept; one that names the call or the
// store its own way ("checkpoint: ...", "restart of store 'x': ...",
// "store 'x': ...") loses that beginning for the common one.
[[noreturn]] void rethrow_for_call(std::string_view call, std::string_view store, const Error& error);

// Runs `body`; an Error it throws comes out as a failure of `call` on
// `store` (rethrow_for_call). The Store's public calls go through it.
template <class Body>
decltype(auto) for_call(std::string_view call, std::string_view store, Body&& body) {
  try {
    return body();
  } catch (const Error& error) {
    rethrow_for_call(call, store, error);
  }
}

}  // namespace resurgo
