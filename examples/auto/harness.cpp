// The mini-apps' common driver (harness.h): command line, store and runtime,
// checkpoint and kill points, RESULT line and dump.
#include "harness.h"

#include <unistd.h>

#include <algorithm>
#include <array>
#include <charconv>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <string_view>
#include <utility>

#include "checkpoint_route.h"

namespace mini {
namespace {

using resurgo::autockpt::Runtime;

constexpr std::array<std::pair<std::string_view, Mode>, 6> kModes{{{"none", Mode::kNone},
                                                                   {"noinfo", Mode::kNoInfo},
                                                                   {"initphase", Mode::kInitPhase},
                                                                   {"fastfw", Mode::kFastForward},
                                                                   {"datlist", Mode::kDatlist},
                                                                   {"trigger", Mode::kTrigger}}};

// What fastfw() and datlist() save for the application: where it was. No
// padding, so the checkpoint holds no indeterminate bytes.
struct Payload {
  double time = 0;
  std::int64_t step = 0;
};

[[noreturn]] void usage(const std::string& app, const std::string& why) {
  std::fprintf(stderr,
               "%s: %s\nusage: %s [--store NAME] [--dir DIR] [--size N] [--steps S]\n"
               "       [--mode none|noinfo|initphase|fastfw|datlist|trigger] [--checkpoint-step K]\n"
               "       [--checkpoint-every E]\n"
               "       [--kill-step K] [--term-step K] [--in-memory] [--synchronous] [--diagnostics D]\n"
               "       [--dump FILE]\n",
               app.c_str(), why.c_str(), app.c_str());
  std::exit(2);
}

int parse_int(const std::string& app, const std::string& option, std::string_view text, int min) {
  int value = 0;
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (error != std::errc() || end != text.data() + text.size() || value < min) {
    usage(app, option + " takes an integer >= " + std::to_string(min) + ", not '" + std::string(text) + "'");
  }
  return value;
}

Mode parse_mode(const std::string& app, std::string_view text) {
  for (const auto& [name, mode] : kModes) {
    if (name == text) return mode;
  }
  usage(app, "unknown --mode '" + std::string(text) + "'");
}

std::string_view mode_name(Mode mode) {
  for (const auto& [name, value] : kModes) {
    if (value == mode) return name;
  }
  return "?";
}

resurgo::Config store_config(const RunOptions& options) {
  resurgo::Config config;
  config.local.path = options.dir;
  config.local.every = 1;
  config.local.keep = 2;
  config.persistent.every = 0;
  route_checkpoints(config, options.in_memory, options.synchronous);
  return config;
}

std::unique_ptr<Field> make_field(const std::string& name, int nx, int ny, int halo) {
  auto field = std::make_unique<Field>();
  field->name = name;
  field->nx = nx;
  field->ny = ny;
  field->halo = halo;
  field->values.assign(static_cast<std::size_t>(ny + 2 * halo) * static_cast<std::size_t>(nx + 2 * halo), 0.0);
  return field;
}

std::uint64_t bytes_of(const Field& field) { return field.values.size() * sizeof(double); }

// Whether a checkpoint is requested in `step`: step K, then every E steps.
bool checkpoint_requested(int step, const RunOptions& options) {
  if (options.checkpoint_step < 0 || step < options.checkpoint_step) return false;
  const int since = step - options.checkpoint_step;
  return since == 0 || (options.checkpoint_every > 0 && since % options.checkpoint_every == 0);
}

// A checkpoint asked for while replaying would only repeat the one restored.
void request_checkpoint(Runtime& runtime) {
  if (!runtime.restoring()) runtime.trigger();
}

// Whether the run dies at the top of `step` for the kill or term point
// `point` (-1: none): from step `point` on, once the checkpoint requested is
// taken (its region may span steps), or at once when none was requested.
bool due_to_die(int step, int point, const Runtime* runtime, const RunOptions& options) {
  if (point < 0 || step < point) return false;
  return runtime == nullptr || options.checkpoint_step < 0 || runtime->last_checkpoint().has_value();
}

// The checkpoint must be durable where the restarted run will look for it
// (L2; L1 in memory, whence SIGTERM flushes it to L2) before the process
// dies by `signal`.
[[noreturn]] void die_when_durable(resurgo::Store* store, const RunOptions& options, int signal) {
  if (store != nullptr) store->wait(resurgo::kAllVersions, options.in_memory ? resurgo::kL1 : resurgo::kL2);
  std::fflush(nullptr);
  std::raise(signal);
  for (;;) ::pause();  // SIGTERM may be handled first (the in-memory flush); its default action follows
}

double median(std::vector<double> values) {
  if (values.empty()) return 0;
  std::sort(values.begin(), values.end());
  const std::size_t middle = values.size() / 2;
  return values.size() % 2 == 1 ? values[middle] : (values[middle - 1] + values[middle]) / 2;
}

// FNV-1a, 64 bits.
std::uint64_t fnv1a(std::uint64_t hash, const void* data, std::size_t bytes) {
  const auto* p = static_cast<const unsigned char*>(data);
  for (std::size_t i = 0; i < bytes; ++i) {
    hash ^= p[i];
    hash *= 1099511628211ULL;
  }
  return hash;
}

std::string hex64(std::uint64_t value) {
  char text[17];
  std::snprintf(text, sizeof text, "%016llx", static_cast<unsigned long long>(value));
  return text;
}

nlohmann::ordered_json to_json(const resurgo::autockpt::CheckpointReport& c) {
  return {{"version", c.version},
          {"loop_index", c.loop_index},
          {"location", c.location},
          {"saved", c.saved},
          {"halos", c.halos},
          {"dataset_bytes", c.dataset_bytes},
          {"query_log_bytes", c.query_log_bytes},
          {"payload_bytes", c.payload_bytes},
          {"staged_bytes", c.staged_bytes},
          {"region_loops", c.region_loops},
          {"timed_out", c.timed_out},
          {"blocking_seconds", c.blocking_seconds}};
}

nlohmann::ordered_json to_json(const resurgo::autockpt::RestoreReport& r) {
  return {{"version", r.version},
          {"loop_index", r.loop_index},
          {"skipped_loops", r.skipped_loops},
          {"replayed_queries", r.replayed_queries},
          {"fast_forward", r.fast_forward},
          {"read_seconds", r.read_seconds},
          {"replay_seconds", r.replay_seconds}};
}

}  // namespace

RunOptions parse(const std::string& app, int argc, char** argv) {
  RunOptions o;
  o.app = app;
  for (int i = 1; i < argc; ++i) {
    const std::string option = argv[i];
    if (option == "--in-memory") {
      o.in_memory = true;
      continue;
    }
    if (option == "--synchronous") {
      o.synchronous = true;
      continue;
    }
    if (i + 1 >= argc) usage(app, "missing value after " + option);
    const std::string_view value = argv[++i];
    if (option == "--store") o.store = value;
    else if (option == "--dir") o.dir = value;
    else if (option == "--size") o.size = parse_int(app, option, value, 0);
    else if (option == "--steps") o.steps = parse_int(app, option, value, 0);
    else if (option == "--mode") o.mode = parse_mode(app, value);
    else if (option == "--checkpoint-step") o.checkpoint_step = parse_int(app, option, value, -1);
    else if (option == "--checkpoint-every") o.checkpoint_every = parse_int(app, option, value, 0);
    else if (option == "--kill-step") o.kill_step = parse_int(app, option, value, -1);
    else if (option == "--term-step") o.term_step = parse_int(app, option, value, -1);
    else if (option == "--diagnostics") o.diagnostics = parse_int(app, option, value, 0);
    else if (option == "--dump") o.dump = value;
    else usage(app, "unknown option " + option);
  }
  if (o.in_memory && o.synchronous) usage(app, "--in-memory keeps checkpoints in memory: --synchronous has no meaning");
  return o;
}

Driver::Driver(RunOptions options) : options_(std::move(options)) {
  if (options_.mode == Mode::kNone) return;  // the baseline: no store either
  store_ = std::make_unique<resurgo::Store>(options_.store, store_config(options_));
  resurgo::autockpt::Options runtime_options;
  runtime_options.diagnostics = options_.diagnostics;
  runtime_ = std::make_unique<Runtime>(*store_, runtime_options);
}

Driver::~Driver() = default;

Field& Driver::field(const std::string& name, int nx, int ny, int halo) {
  std::unique_ptr<Field> field = make_field(name, nx, ny, halo);
  if (runtime_) {
    const resurgo::ElementType type{"float64", {ny + 2 * halo, nx + 2 * halo}};
    field->id = runtime_->dataset(name, field->values.data(), bytes_of(*field), type, halo);
  }
  fields_.push_back(std::move(field));
  return *fields_.back();
}

Axis Driver::axis(const std::string& name, int count, int halo) {
  std::unique_ptr<Field> field = make_field(name, count, 1, 0);
  if (runtime_) {
    const resurgo::ElementType type{"float64", {count}};
    field->id = runtime_->dataset(name, field->values.data(), bytes_of(*field), type);
  }
  fields_.push_back(std::move(field));
  return {fields_.back()->values, fields_.back()->id, halo};
}

Geometry Driver::geometry(int nx, int ny, int halo) {
  const int cells_x = nx + 2 * halo, cells_y = ny + 2 * halo;
  return {axis("cellx", cells_x, halo), axis("celldx", cells_x, halo),
          axis("vertexx", cells_x + 1, halo), axis("vertexdx", cells_x + 1, halo),
          axis("celly", cells_y, halo), axis("celldy", cells_y, halo),
          axis("vertexy", cells_y + 1, halo), axis("vertexdy", cells_y + 1, halo)};
}

bool Driver::loop(std::string_view name, std::initializer_list<resurgo::autockpt::Arg> args) {
  return runtime_ ? runtime_->loop(name, args) : true;
}

double Driver::query(double value) { return runtime_ ? runtime_->query(value) : value; }

void Driver::initphase_done() {
  if (runtime_ && options_.mode >= Mode::kInitPhase) runtime_->initphase_done();
}

bool Driver::step_begins(int& step, double& time, std::span<Field* const> minimal) {
  if (due_to_die(step, options_.kill_step, runtime_.get(), options_)) die_when_durable(store_.get(), options_, SIGKILL);
  if (due_to_die(step, options_.term_step, runtime_.get(), options_)) die_when_durable(store_.get(), options_, SIGTERM);
  bool restored = false;
  if (runtime_) {
    if (options_.mode == Mode::kTrigger && checkpoint_requested(step, options_)) request_checkpoint(*runtime_);
    Payload payload{time, step};
    if (options_.mode == Mode::kFastForward || options_.mode == Mode::kTrigger) {
      restored = runtime_->fastfw(&payload, sizeof payload);
    } else if (options_.mode == Mode::kDatlist) {
      std::vector<int> ids;
      for (const Field* field : minimal) ids.push_back(field->id);
      restored = runtime_->datlist(ids, &payload, sizeof payload);
    }
    if (restored) {
      step = static_cast<int>(payload.step);
      time = payload.time;
    }
  }
  replaying_step_ = runtime_ && runtime_->restoring();
  return restored;
}

void Driver::first_loop_done(int step) {
  if (runtime_ && options_.mode != Mode::kTrigger && checkpoint_requested(step, options_)) {
    request_checkpoint(*runtime_);
  }
}

void Driver::step_ends(double seconds) {
  if (!replaying_step_) step_seconds_.push_back(seconds);
  const auto checkpoint = runtime_ ? runtime_->last_checkpoint() : std::nullopt;
  if (checkpoint && (checkpoints_.empty() || checkpoints_.back()["version"] != checkpoint->version)) {
    checkpoints_.push_back(to_json(*checkpoint));
  }
}

void Driver::finish(std::uint64_t hand_minimal_bytes) {
  std::uint64_t checksum = 14695981039346656037ULL;
  std::uint64_t all_bytes = 0;
  for (const auto& field : fields_) {
    checksum = fnv1a(checksum, field->values.data(), bytes_of(*field));
    all_bytes += bytes_of(*field);
  }
  nlohmann::ordered_json result = {{"app", options_.app},
                                   {"mode", mode_name(options_.mode)},
                                   {"steps", options_.steps},
                                   {"size", options_.size},
                                   {"checksum", hex64(checksum)},
                                   {"iteration_seconds", median(step_seconds_)},
                                   {"all_dataset_bytes", all_bytes},
                                   {"hand_minimal_bytes", hand_minimal_bytes}};
  if (runtime_) {
    if (const auto checkpoint = runtime_->last_checkpoint()) result["checkpoint"] = to_json(*checkpoint);
    if (!checkpoints_.empty()) result["checkpoints"] = checkpoints_;
    if (const auto restore = runtime_->last_restore()) result["restore"] = to_json(*restore);
    runtime_.reset();
    store_->close();  // a background error of the checkpoint fails the run here
  }
  std::printf("RESULT %s\n", result.dump().c_str());
  std::fflush(stdout);
  if (options_.dump.empty()) return;
  std::ofstream out(options_.dump, std::ios::binary | std::ios::trunc);
  for (const auto& field : fields_) {
    out.write(reinterpret_cast<const char*>(field->values.data()), static_cast<std::streamsize>(bytes_of(*field)));
  }
  if (!out.flush()) throw std::runtime_error("cannot write the --dump file " + options_.dump);
}

}  // namespace mini
