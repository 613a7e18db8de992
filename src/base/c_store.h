// The C API's store handle (resurgo.h's opaque rsg_store), shared by the C
// APIs of the layers above the Store (auto/c_api.cpp).
//
// A handle outlives rsg_close: the store is freed, but the handle stays
// allocated, marked closed, so that a call through it afterwards (a stale
// copy of the pointer, a second rsg_close) is refused with RSG_ESTATE
// instead of reading freed memory. Checking a freed pointer cannot be done
// safely, and a registry of live pointers would take a new store at a reused
// address for the closed one; a closed handle costs its few bytes until the
// process ends (reachable from a list, so leak checkers stay quiet).
#pragma once

#include <atomic>
#include <cstdint>
#include <string>
#include <utility>

#include "base/c_status.h"
#include "resurgo/resurgo.h"
#include "resurgo/resurgo.hpp"

struct rsg_store {
  // Written at open and at close: another value is a pointer that was never
  // a handle, or memory overwritten.
  enum State : std::uint32_t { kOpen = 0x4f475352, kClosed = 0x43475352 };  // "RSGO", "RSGC"

  explicit rsg_store(resurgo::Store opened) : store(std::move(opened)), name(store.name()) {}

  resurgo::Store store;  // moved out (freed) by rsg_close
  std::string name;      // for the messages of calls after rsg_close
  std::atomic<std::uint32_t> state{kOpen};
  rsg_store* next_closed = nullptr;
};

namespace resurgo::c_api {

// RSG_OK when `s` is the handle of an open store; else `call`'s refusal, with
// its message: RSG_EINVAL for NULL or a pointer that is no handle,
// RSG_ESTATE for a handle rsg_close closed.
inline int refuse_unusable(const rsg_store* s, const char* call) {
  if (s == nullptr) return invalid((std::string(call) + ": store is NULL").c_str());
  const std::uint32_t state = s->state.load();
  if (state == rsg_store::kOpen) return RSG_OK;
  if (state == rsg_store::kClosed) {
    last_error = std::string(call) + " on store '" + s->name +
                 "': the store was closed by rsg_close, and its handle cannot be used again; open the store again "
                 "with rsg_open";
    return RSG_ESTATE;
  }
  last_error = std::string(call) +
               ": the handle is not a store handle (not set by rsg_open, or its memory was overwritten)";
  return RSG_EINVAL;
}

}  // namespace resurgo::c_api
