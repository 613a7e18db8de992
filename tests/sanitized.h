// Whether this test binary is built with AddressSanitizer or
// ThreadSanitizer: their allocators (GCC 12's libsanitizer) are not
// fork-safe, so a process forked while other threads allocate can deadlock
// in the child (tests/fault/campaign_main.h, docs/reliability.md section 5).
#pragma once

namespace resurgo {

#if defined(__SANITIZE_THREAD__) || defined(__SANITIZE_ADDRESS__)
inline constexpr bool kSanitized = true;
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer) || __has_feature(address_sanitizer)
inline constexpr bool kSanitized = true;
#else
inline constexpr bool kSanitized = false;
#endif
#else
inline constexpr bool kSanitized = false;
#endif

}  // namespace resurgo
