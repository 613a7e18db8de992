// Kernel UAPI constants and structs newer than the system headers (Debian 12
// ships linux-libc-dev 6.1). Each is declared only where the headers lack it,
// with the same value and layout as the kernel's; whether the running kernel
// supports it is found out at run time.
#pragma once

#include <linux/fs.h>
#include <linux/userfaultfd.h>
#include <sys/ioctl.h>

#include <cstdint>

// include/uapi/linux/userfaultfd.h, Linux 5.11.
#ifndef UFFD_USER_MODE_ONLY
#define UFFD_USER_MODE_ONLY 1
#endif

// include/uapi/linux/userfaultfd.h, Linux 6.4.
#ifndef UFFD_FEATURE_WP_UNPOPULATED
#define UFFD_FEATURE_WP_UNPOPULATED (1 << 13)
#endif

// include/uapi/linux/userfaultfd.h, Linux 6.7.
#ifndef UFFD_FEATURE_WP_ASYNC
#define UFFD_FEATURE_WP_ASYNC (1 << 15)
#endif

// include/uapi/linux/fs.h, Linux 6.7: the PAGEMAP_SCAN ioctl of
// /proc/<pid>/pagemap.
#ifndef PAGEMAP_SCAN
struct page_region {
  std::uint64_t start;
  std::uint64_t end;
  std::uint64_t categories;
};

struct pm_scan_arg {
  std::uint64_t size;
  std::uint64_t flags;
  std::uint64_t start;
  std::uint64_t end;
  std::uint64_t walk_end;
  std::uint64_t vec;
  std::uint64_t vec_len;
  std::uint64_t max_pages;
  std::uint64_t category_inverted;
  std::uint64_t category_mask;
  std::uint64_t category_anyof_mask;
  std::uint64_t return_mask;
};

#define PAGEMAP_SCAN _IOWR('f', 16, struct pm_scan_arg)

#define PAGE_IS_WPALLOWED (1 << 0)
#define PAGE_IS_WRITTEN (1 << 1)

#define PM_SCAN_WP_MATCHING (1 << 0)
#define PM_SCAN_CHECK_WPASYNC (1 << 1)
#endif
