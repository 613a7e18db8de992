// Runs `fn` without the GIL, for calls that wait on I/O or on other ranks.
// The guard takes the GIL back on return and while an exception unwinds,
// before nanobind translates it.
#pragma once

#include <nanobind/nanobind.h>

template <class Fn>
auto without_gil(Fn&& fn) -> decltype(fn()) {
  nanobind::gil_scoped_release release;
  return fn();
}
