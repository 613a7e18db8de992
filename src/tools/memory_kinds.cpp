// The names of the memory kinds, and what the CUDA driver says a pointer is.
#include <array>
#include <utility>

#include "gpu/device_access.h"
#include "resurgo/errors.hpp"
#include "resurgo/tools.hpp"

namespace resurgo::tools {

namespace {

constexpr std::array<std::pair<MemoryKind, const char*>, 3> kKindNames{{
    {MemoryKind::kHost, "host"},
    {MemoryKind::kDevice, "device"},
    {MemoryKind::kManaged, "managed"},
}};

}  // namespace

const char* memory_kind_name(MemoryKind kind) {
  for (const auto& [known, name] : kKindNames) {
    if (known == kind) return name;
  }
  return "unknown";
}

MemoryKind memory_kind_named(const std::string& name) {
  for (const auto& [kind, known] : kKindNames) {
    if (name == known) return kind;
  }
  throw InvalidArgumentError("unknown memory kind '" + name + "': use 'host', 'device' or 'managed'");
}

std::optional<MemoryKind> cuda_memory_kind(const void* pointer) {
  const std::optional<gpu::PointerInfo> info = gpu::describe_if_cuda_is_loaded(pointer);
  if (!info) return std::nullopt;
  return info->kind;
}

}  // namespace resurgo::tools
