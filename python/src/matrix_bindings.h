// The bindings of resurgo::ConvergentMatrix (resurgo/matrix.hpp) in
// resurgo._core; compiled only when the library was built with MPI. The typed
// Python layer is python/resurgo/matrix.py.
#pragma once

#include <nanobind/nanobind.h>

namespace resurgo {
class Store;
}

// The C++ store behind a resurgo._core.Store object: the store's binding
// class lives in bindings.cpp, which hands this conversion over.
using StoreOfObject = resurgo::Store& (*)(nanobind::handle store);

// Adds ConvergentMatrixFloat32, ConvergentMatrixFloat64 and the serial
// readers of global-layout files to `m`.
void bind_matrix(nanobind::module_& m, StoreOfObject store_of);
