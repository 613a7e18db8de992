// Whether this test binary runs with AddressSanitizer or ThreadSanitizer:
// their allocators (GCC 12's libsanitizer) are not fork-safe, so a process
// forked while other threads allocate can deadlock in the child
// (tests/fault/campaign_main.h, docs/reliability.md section 5).
//
// Asked of the linked runtime, not of the compiler's macros: the ASan build
// compiles the GoogleTest files themselves without instrumentation
// (tests/CMakeLists.txt) but links them with the runtime.
#pragma once

extern "C" {
void __asan_init() __attribute__((weak));
void __tsan_init() __attribute__((weak));
}

namespace resurgo {

inline const bool kAddressSanitized = &__asan_init != nullptr;
inline const bool kThreadSanitized = &__tsan_init != nullptr;
inline const bool kSanitized = kAddressSanitized || kThreadSanitized;

}  // namespace resurgo
