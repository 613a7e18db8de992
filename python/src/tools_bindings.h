// The functions of resurgo/tools.hpp (and remove_version) in resurgo._core:
// what the command-line tool, resurgo.export and the Python tests read
// and write without opening a store. Their records come from
// record_bindings.h.
#pragma once

#include <nanobind/nanobind.h>

void bind_tools(nanobind::module_& m);
