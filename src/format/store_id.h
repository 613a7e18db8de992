// A store's identity (docs/reliability.md, "Security"): 16 random bytes
// chosen when the store's first directory is made, kept in each of its
// directories (the file `.store-id`) and written into the header of every
// version and every job manifest. A version whose identity is not the
// store's was not written by this store, however well formed: restore
// refuses it unless the configuration accepts foreign versions. It tells
// stores apart; it is no secret and authenticates nothing.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>

namespace resurgo::format {

struct StoreId {
  std::array<std::uint8_t, 16> bytes{};

  // All zeros: the identity of a file written before stores had one.
  bool unknown() const;
  std::string hex() const;  // 32 lowercase hex digits
  bool operator==(const StoreId&) const = default;

  // 16 random bytes (base/random.h).
  static StoreId random();
  // The identity written as hex(); none for any other text.
  static std::optional<StoreId> parse(const std::string& text);
};

}  // namespace resurgo::format
