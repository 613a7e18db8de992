/* The C side of test_auto's check that module resurgo_auto's bind(C) types
 * match resurgo/auto.h: each struct's size and the offset of its last
 * field, in the order rsg_auto_arg, rsg_auto_options,
 * rsg_auto_checkpoint_report, rsg_auto_restore_report. */
#include <stddef.h>

#include "resurgo/auto.h"

void resurgo_test_auto_struct_layout(size_t sizes[4], size_t last_field_offsets[4]);

void resurgo_test_auto_struct_layout(size_t sizes[4], size_t last_field_offsets[4]) {
  sizes[0] = sizeof(rsg_auto_arg);
  last_field_offsets[0] = offsetof(rsg_auto_arg, range);
  sizes[1] = sizeof(rsg_auto_options);
  last_field_offsets[1] = offsetof(rsg_auto_options, report_context);
  sizes[2] = sizeof(rsg_auto_checkpoint_report);
  last_field_offsets[2] = offsetof(rsg_auto_checkpoint_report, blocking_seconds);
  sizes[3] = sizeof(rsg_auto_restore_report);
  last_field_offsets[3] = offsetof(rsg_auto_restore_report, ranks);
}
