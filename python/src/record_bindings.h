// The records of the public headers as resurgo._core classes (records.h):
// statistics and reports (resurgo.hpp, device_stats.hpp, auto.hpp), and what
// the tools read (tools.hpp, manifest.hpp). The Python package re-exports
// them under the same names (resurgo.VersionStats, ...).
#pragma once

#include <nanobind/nanobind.h>

void bind_records(nanobind::module_& m);
