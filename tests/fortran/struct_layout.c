/* The C side of test_queries' check that the Fortran module's bind(C) types
 * match resurgo.h: each struct's size and the offset of its last field, in
 * the order rsg_version_stats, rsg_device_caches, rsg_restart_report,
 * rsg_region_description, rsg_version_info. */
#include <stddef.h>

#include "resurgo/resurgo.h"

void resurgo_test_struct_layout(size_t sizes[5], size_t last_field_offsets[5]);

void resurgo_test_struct_layout(size_t sizes[5], size_t last_field_offsets[5]) {
  sizes[0] = sizeof(rsg_version_stats);
  last_field_offsets[0] = offsetof(rsg_version_stats, device_wait_seconds);
  sizes[1] = sizeof(rsg_device_caches);
  last_field_offsets[1] = offsetof(rsg_device_caches, decision);
  sizes[2] = sizeof(rsg_restart_report);
  last_field_offsets[2] = offsetof(rsg_restart_report, skipped);
  sizes[3] = sizeof(rsg_region_description);
  last_field_offsets[3] = offsetof(rsg_region_description, shape);
  sizes[4] = sizeof(rsg_version_info);
  last_field_offsets[4] = offsetof(rsg_version_info, levels);
}
