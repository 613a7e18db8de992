// The C API of automatic checkpointing (resurgo/auto.h): a thin shell over
// resurgo::autockpt::Runtime, reporting as the store's C API does
// (base/c_status.h).
#include <cstdio>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "base/c_status.h"
#include "base/c_store.h"
#include "resurgo/auto.h"
#include "resurgo/auto.hpp"

namespace autockpt = resurgo::autockpt;

struct rsg_auto {
  explicit rsg_auto(resurgo::Store& store, autockpt::Options options) : runtime(store, std::move(options)) {}
  autockpt::Runtime runtime;
  std::vector<autockpt::Arg> args;  // rsg_auto_loop's conversion, reused: a loop call allocates nothing
};

using resurgo::c_api::guarded;
using resurgo::c_api::invalid;
using resurgo::c_api::last_error;

namespace {

autockpt::Options options_from(const rsg_auto_options& c) {
  autockpt::Options options;
  options.interval_loops = c.interval_loops;
  options.interval_seconds = c.interval_seconds;
  options.region_timeout_loops = c.region_timeout_loops;
  options.agreement_loops = c.agreement_loops;
  options.diagnostics = c.diagnostics;
  options.check_access = c.check_access != 0;
  options.flush_on_termination = c.flush_on_termination != 0;
  if (c.report != nullptr) {
    options.report = [report = c.report, context = c.report_context](const std::string& line) {
      report(line.c_str(), context);
    };
  }
  return options;
}

// args[index] of loop `name` as the runtime's Arg; InvalidArgumentError for
// an access or a range that is none of the constants.
autockpt::Arg to_arg(const char* name, std::size_t index, const rsg_auto_arg& c) {
  const auto refuse = [&](const std::string& what) {
    throw resurgo::InvalidArgumentError(std::string("rsg_auto_loop: loop '") + name + "', argument " +
                                        std::to_string(index) + ": " + what);
  };
  if (c.access < RSG_AUTO_READ || c.access > RSG_AUTO_INCREMENT) {
    refuse("unknown access " + std::to_string(c.access) +
           " (RSG_AUTO_READ, RSG_AUTO_WRITE, RSG_AUTO_READ_WRITE or RSG_AUTO_INCREMENT)");
  }
  if (c.range < RSG_AUTO_ALL || c.range > RSG_AUTO_HALO) {
    refuse("unknown range " + std::to_string(c.range) + " (RSG_AUTO_ALL, RSG_AUTO_INTERIOR or RSG_AUTO_HALO)");
  }
  return {c.dataset, static_cast<autockpt::Access>(c.access), static_cast<autockpt::Range>(c.range)};
}

// The C constants are the C++ enumerators' values, so that to_arg is a cast.
static_assert(RSG_AUTO_READ == static_cast<int>(autockpt::Access::kRead));
static_assert(RSG_AUTO_WRITE == static_cast<int>(autockpt::Access::kWrite));
static_assert(RSG_AUTO_READ_WRITE == static_cast<int>(autockpt::Access::kReadWrite));
static_assert(RSG_AUTO_INCREMENT == static_cast<int>(autockpt::Access::kIncrement));
static_assert(RSG_AUTO_ALL == static_cast<int>(autockpt::Range::kAll));
static_assert(RSG_AUTO_INTERIOR == static_cast<int>(autockpt::Range::kInterior));
static_assert(RSG_AUTO_HALO == static_cast<int>(autockpt::Range::kHalo));

}  // namespace

extern "C" {

int rsg_auto_options_init(rsg_auto_options* options) {
  if (options == nullptr) return invalid("rsg_auto_options_init: options is NULL");
  const autockpt::Options defaults;
  *options = rsg_auto_options{};
  options->interval_loops = defaults.interval_loops;
  options->interval_seconds = defaults.interval_seconds;
  options->region_timeout_loops = defaults.region_timeout_loops;
  options->agreement_loops = defaults.agreement_loops;
  options->diagnostics = defaults.diagnostics;
  options->check_access = defaults.check_access ? 1 : 0;
  options->flush_on_termination = defaults.flush_on_termination ? 1 : 0;
  last_error.clear();
  return RSG_OK;
}

int rsg_auto_attach(rsg_store* store, const rsg_auto_options* options, rsg_auto** out) {
  if (store == nullptr || out == nullptr) return invalid("rsg_auto_attach: store and out must not be NULL");
  if (const int refused = resurgo::c_api::refuse_unusable(store, "rsg_auto_attach")) return refused;
  *out = nullptr;
  return guarded([&] {
    *out = new rsg_auto(store->store, options == nullptr ? autockpt::Options{} : options_from(*options));
  });
}

int rsg_auto_detach(rsg_auto* a) {
  if (a == nullptr) return invalid("rsg_auto_detach: runtime is NULL");
  delete a;
  last_error.clear();
  return RSG_OK;
}

int rsg_auto_dataset(rsg_auto* a, const char* name, void* data, size_t bytes, const char* dtype, int ndim,
                     const long long* shape, int halo, int* id) {
  if (a == nullptr || name == nullptr || data == nullptr || id == nullptr) {
    return invalid("rsg_auto_dataset: runtime, name, data and id must not be NULL");
  }
  if (ndim < 0 || (ndim > 0 && shape == nullptr)) {
    last_error = std::string("rsg_auto_dataset: dataset '") + name + "' has ndim " + std::to_string(ndim) +
                 " but " + (ndim < 0 ? "ndim must be >= 0" : "shape is NULL");
    return RSG_EINVAL;
  }
  return guarded([&] {
    resurgo::ElementType type;
    type.dtype = dtype == nullptr ? "" : dtype;
    type.shape.assign(shape, shape + ndim);
    *id = a->runtime.dataset(name, data, bytes, type, halo);
  });
}

int rsg_auto_dataset_global(rsg_auto* a, const char* name, void* data, size_t bytes, const char* dtype, int ndim,
                            const long long* global_shape, const long long* offset, const long long* shape, int* id) {
  if (a == nullptr || name == nullptr || data == nullptr || id == nullptr) {
    return invalid("rsg_auto_dataset_global: runtime, name, data and id must not be NULL");
  }
  if (ndim <= 0 || global_shape == nullptr || offset == nullptr || shape == nullptr) {
    last_error = std::string("rsg_auto_dataset_global: dataset '") + name + "' has ndim " + std::to_string(ndim) +
                 "; a block needs ndim >= 1 and global_shape, offset and shape not NULL";
    return RSG_EINVAL;
  }
  return guarded([&] {
    resurgo::ElementType type;
    type.dtype = dtype == nullptr ? "" : dtype;
    type.shape.assign(shape, shape + ndim);
    const resurgo::GlobalBlock block{{global_shape, global_shape + ndim}, {offset, offset + ndim}};
    *id = a->runtime.dataset(name, data, bytes, type, block);
  });
}

int rsg_auto_loop(rsg_auto* a, const char* name, const rsg_auto_arg* args, size_t count, int* execute) {
  if (a == nullptr || name == nullptr || execute == nullptr) {
    return invalid("rsg_auto_loop: runtime, name and execute must not be NULL");
  }
  if (args == nullptr && count > 0) return invalid("rsg_auto_loop: args is NULL but count is not 0");
  return guarded([&] {
    a->args.clear();
    for (std::size_t i = 0; i < count; ++i) a->args.push_back(to_arg(name, i, args[i]));
    *execute = a->runtime.loop(name, a->args) ? 1 : 0;
  });
}

int rsg_auto_query(rsg_auto* a, void* data, size_t bytes) {
  if (a == nullptr) return invalid("rsg_auto_query: runtime is NULL");
  if (data == nullptr && bytes > 0) return invalid("rsg_auto_query: data is NULL but bytes is not 0");
  return guarded([&] { a->runtime.query(data, bytes); });
}

int rsg_auto_initphase_done(rsg_auto* a) {
  if (a == nullptr) return invalid("rsg_auto_initphase_done: runtime is NULL");
  return guarded([&] { a->runtime.initphase_done(); });
}

int rsg_auto_fastfw(rsg_auto* a, void* payload, size_t bytes, int* restored) {
  if (a == nullptr || restored == nullptr) return invalid("rsg_auto_fastfw: runtime and restored must not be NULL");
  if (payload == nullptr && bytes > 0) return invalid("rsg_auto_fastfw: payload is NULL but bytes is not 0");
  return guarded([&] { *restored = a->runtime.fastfw(payload, bytes) ? 1 : 0; });
}

int rsg_auto_datlist(rsg_auto* a, const int* datasets, size_t count, void* payload, size_t bytes, int* restored) {
  if (a == nullptr || restored == nullptr) return invalid("rsg_auto_datlist: runtime and restored must not be NULL");
  if (datasets == nullptr && count > 0) return invalid("rsg_auto_datlist: datasets is NULL but count is not 0");
  if (payload == nullptr && bytes > 0) return invalid("rsg_auto_datlist: payload is NULL but bytes is not 0");
  return guarded([&] {
    *restored = a->runtime.datlist(std::span<const int>(datasets, count), payload, bytes) ? 1 : 0;
  });
}

int rsg_auto_trigger(rsg_auto* a) {
  if (a == nullptr) return invalid("rsg_auto_trigger: runtime is NULL");
  return guarded([&] { a->runtime.trigger(); });
}

int rsg_auto_restoring(rsg_auto* a, int* restoring) {
  if (a == nullptr || restoring == nullptr) {
    return invalid("rsg_auto_restoring: runtime and restoring must not be NULL");
  }
  return guarded([&] { *restoring = a->runtime.restoring() ? 1 : 0; });
}

int rsg_auto_loop_index(rsg_auto* a, unsigned long long* index) {
  if (a == nullptr || index == nullptr) return invalid("rsg_auto_loop_index: runtime and index must not be NULL");
  return guarded([&] { *index = a->runtime.loop_index(); });
}

int rsg_auto_bookkeeping_bytes(rsg_auto* a, unsigned long long* bytes) {
  if (a == nullptr || bytes == nullptr) {
    return invalid("rsg_auto_bookkeeping_bytes: runtime and bytes must not be NULL");
  }
  return guarded([&] { *bytes = a->runtime.bookkeeping_bytes(); });
}

int rsg_auto_last_checkpoint(rsg_auto* a, rsg_auto_checkpoint_report* out) {
  if (a == nullptr || out == nullptr) return invalid("rsg_auto_last_checkpoint: runtime and out must not be NULL");
  return guarded([&] {
    rsg_auto_checkpoint_report c{};
    c.version = -1;
    if (const std::optional<autockpt::CheckpointReport> r = a->runtime.last_checkpoint()) {
      c.version = r->version;
      c.loop_index = r->loop_index;
      std::snprintf(c.location, sizeof c.location, "%s", r->location.c_str());
      c.saved_datasets = r->saved.size();
      c.halo_datasets = r->halos.size();
      c.dataset_bytes = r->dataset_bytes;
      c.query_log_bytes = r->query_log_bytes;
      c.payload_bytes = r->payload_bytes;
      c.staged_bytes = r->staged_bytes;
      c.region_loops = r->region_loops;
      c.timed_out = r->timed_out ? 1 : 0;
      c.blocking_seconds = r->blocking_seconds;
    }
    *out = c;
  });
}

int rsg_auto_last_restore(rsg_auto* a, rsg_auto_restore_report* out) {
  if (a == nullptr || out == nullptr) return invalid("rsg_auto_last_restore: runtime and out must not be NULL");
  return guarded([&] {
    rsg_auto_restore_report c{};
    c.version = -1;
    if (const std::optional<autockpt::RestoreReport> r = a->runtime.last_restore()) {
      c.version = r->version;
      c.loop_index = r->loop_index;
      c.skipped_loops = r->skipped_loops;
      c.replayed_queries = r->replayed_queries;
      c.fast_forward = r->fast_forward ? 1 : 0;
      c.read_seconds = r->read_seconds;
      c.replay_seconds = r->replay_seconds;
      c.ranks = r->ranks;
    }
    *out = c;
  });
}

}  // extern "C"
