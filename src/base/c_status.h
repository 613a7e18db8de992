// How the C APIs (c_api.cpp, appic/appic.cpp) report: a call returns RSG_OK
// or a negative RSG_E* code, and rsg_last_error() returns the message of the
// calling thread's last failure (a successful call clears it).
#pragma once

#include <exception>
#include <new>
#include <string>

#include "resurgo/errors.hpp"
#include "resurgo/resurgo.h"

namespace resurgo::c_api {

// The message rsg_last_error() returns on this thread.
inline thread_local std::string last_error;

// Runs `body`, mapping an exception to its RSG_E* code and message.
template <class Body>
int guarded(Body&& body) {
  try {
    body();
    last_error.clear();
    return RSG_OK;
  } catch (const Error& error) {
    last_error = error.what();
    return static_cast<int>(error.code());
  } catch (const std::bad_alloc&) {
    last_error = "out of memory";
    return RSG_EINTERNAL;
  } catch (const std::exception& error) {
    last_error = std::string("internal error: ") + error.what();
    return RSG_EINTERNAL;
  }
}

// Refuses a call before it reaches the library (a NULL argument).
inline int invalid(const char* message) {
  last_error = message;
  return RSG_EINVAL;
}

}  // namespace resurgo::c_api
