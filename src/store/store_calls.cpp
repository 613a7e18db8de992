// The public calls of Store: each forwards to Store::Impl (store.cpp), and
// every failure reads "<call> on store '<name>': ..." (core/errors.h), the
// text the C, Python and Fortran bindings pass on unchanged.
#include "core/errors.h"
#include "store/store_impl.h"

namespace resurgo {
namespace {

std::unique_ptr<Store::Impl> open_store(const std::string& name, const Config& config, std::shared_ptr<Comm> comm,
                                        std::shared_ptr<Env> env) {
  return for_call("open", name,
                  [&] { return std::make_unique<Store::Impl>(name, config, std::move(comm), std::move(env)); });
}

// In a child forked while the store was open, the Impl's members own
// threads that exist only in the parent (joining them would wait for ever),
// mutexes those threads may have held at the fork, and files and locks the
// parent still uses: none of it can be destroyed safely, so it is leaked,
// on purpose. Its memory is the child's copy and goes with the child.
void leak_if_inherited(std::unique_ptr<Store::Impl>& impl) {
  if (impl && impl->inherited()) static_cast<void>(impl.release());
}

}  // namespace

Store::Store(const std::string& name, const Config& config, std::shared_ptr<Env> env)
    : impl_(open_store(name, config, nullptr, std::move(env))) {}
Store::Store(const std::string& name, const Config& config, std::shared_ptr<Comm> comm, std::shared_ptr<Env> env)
    : impl_(comm ? open_store(name, config, std::move(comm), std::move(env))
                 : throw InvalidArgumentError(store_call_message("open", name, "the communicator is null"))) {}

Store::~Store() { leak_if_inherited(impl_); }
Store::Store(Store&&) noexcept = default;
Store& Store::operator=(Store&& other) noexcept {
  if (this != &other) {
    leak_if_inherited(impl_);
    impl_ = std::move(other.impl_);
  }
  return *this;
}

Comm& comm_of(Store& store) { return *store.impl_->comm; }

const std::string& Store::name() const { return impl_->name; }
const Config& Store::config() const { return impl_->config; }
int Store::rank() const { return impl_->comm->rank(); }
void Store::close() { for_call("close", name(), [&] { impl_->close(); }); }
void Store::protect(int id, void* data, std::size_t bytes, const std::string& label, const ElementType& type,
                    const GlobalBlock& block) {
  impl_->protect(Region{id, label, static_cast<std::byte*>(data), bytes, type, block});
}
void Store::protect_device(int id, void* device_data, std::size_t bytes, const std::string& label,
                           const ElementType& type) {
  impl_->protect(Region{id, label, static_cast<std::byte*>(device_data), bytes, type, {}, MemoryKind::kDevice});
}
void Store::protect_managed(int id, void* data, std::size_t bytes, const std::string& label, const ElementType& type) {
  impl_->protect(Region{id, label, static_cast<std::byte*>(data), bytes, type, {}, MemoryKind::kManaged});
}
void Store::unprotect(int id) { for_call("unprotect", name(), [&] { impl_->unprotect(id); }); }
void Store::reserve(std::uint64_t bytes) { for_call("reserve", name(), [&] { impl_->reserve(bytes); }); }
void Store::set_metadata(const void* data, std::size_t bytes) {
  for_call("set_metadata", name(), [&] { impl_->set_metadata(data, bytes); });
}
const std::vector<std::byte>& Store::metadata() const { return impl_->metadata; }
void Store::checkpoint(int version) { for_call("checkpoint", name(), [&] { impl_->checkpoint(version); }); }
void Store::wait(int version, int level) { for_call("wait", name(), [&] { impl_->wait(version, level); }); }
std::optional<int> Store::latest() { return for_call("latest", name(), [&] { return impl_->latest(); }); }
int Store::restart(int version, RestartScope scope) {
  return for_call("restart", name(), [&] { return impl_->restart(version, scope); });
}
VersionDescription Store::describe(int version) {
  return for_call("describe", name(), [&] { return impl_->describe(version); });
}
void Store::persist(int version, int level) { for_call("persist", name(), [&] { impl_->persist(version, level); }); }
std::vector<VersionInfo> Store::versions() { return for_call("versions", name(), [&] { return impl_->versions(); }); }
std::vector<VersionStats> Store::stats() { return for_call("stats", name(), [&] { return impl_->stats(); }); }
RestartReport Store::last_restart() const { return impl_->last_restart; }
void Store::set_capture_streams(std::vector<void*> streams) {
  for_call("set_capture_streams", name(), [&] { impl_->set_capture_streams(std::move(streams)); });
}

DeviceStats Store::device_stats() const {
  return for_call("device_stats", name(), [&] { return impl_->device_stats(); });
}
void Store::prefetch(const std::vector<int>& versions) {
  for_call("prefetch", name(), [&] { impl_->prefetch(versions); });
}
void Store::discard(int version) { for_call("discard", name(), [&] { impl_->discard(version); }); }
bool Store::need_checkpoint() { return for_call("need_checkpoint", name(), [&] { return impl_->need_checkpoint(); }); }
std::optional<double> Store::checkpoint_interval() const {
  return for_call("checkpoint_interval", name(), [&] { return impl_->checkpoint_interval(); });
}

}  // namespace resurgo
