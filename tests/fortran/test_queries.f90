! The Fortran calls that ask the store what it did and holds, and those
! beside resurgo_protect: the bind(C) types against resurgo.h's structs
! (sizes and last fields, from struct_layout.c); resurgo_protect_managed and
! resurgo_protect_device through the host backend (RESURGO_DEVICE_BACKEND=host:
! host memory stands for device and managed memory, so no GPU is needed);
! resurgo_stats after checkpoints, resurgo_device_stats, resurgo_set_capture_streams, resurgo_versions,
! resurgo_persist, resurgo_describe, and resurgo_last_restart before and
! after a restart. L4 takes every 2nd checkpoint (RESURGO_PERSISTENT_EVERY=2),
! so version 1 is on L2 alone until persisted.
program test_queries
  use, intrinsic :: iso_c_binding
  use, intrinsic :: iso_fortran_env, only: real64, int32
  use resurgo
  use test_checks, only: check, check_ok
  implicit none

  interface
    subroutine struct_layout(sizes, last_field_offsets) bind(C, name="resurgo_test_struct_layout")
      import :: c_size_t
      integer(c_size_t), intent(out) :: sizes(5), last_field_offsets(5)
    end subroutine struct_layout
  end interface

  integer, parameter :: l0_capacity = 1048576  ! RESURGO_DEVICE_CAPACITY=1MiB
  type(resurgo_store) :: store
  real(real64), target :: u(100)
  integer(int32), target :: managed(16)
  real(real64), target :: field(64, 32)  ! the device region
  integer(c_size_t) :: managed_bytes, field_bytes, state_bytes
  type(rsg_version_stats) :: stats
  type(rsg_device_caches) :: caches
  type(c_ptr) :: capture_streams(1)
  type(rsg_restart_report) :: report
  type(rsg_version_info), allocatable :: versions(:)
  type(rsg_region_description), allocatable :: regions(:)
  integer :: ierr, version, restored

  call check_layout()

  managed_bytes = c_sizeof(managed)
  field_bytes = c_sizeof(field)
  state_bytes = c_sizeof(u) + managed_bytes + field_bytes
  call resurgo_open('fortran-queries', store, ierr)
  call check_ok(ierr, 'open')
  call resurgo_protect(store, 0, u, 'u', ierr)
  call check_ok(ierr, 'protect')
  call resurgo_protect_managed(store, 1, c_loc(managed), managed_bytes, 'managed', ierr)
  call check_ok(ierr, 'protect_managed')
  call resurgo_protect_device(store, 2, c_loc(field), field_bytes, 'field', ierr)
  call check_ok(ierr, 'protect_device')
  call resurgo_protect_managed(store, 3, c_loc(managed), 0_c_size_t, 'empty', ierr)
  call check(ierr == RSG_EINVAL, 'protect_managed refuses zero bytes')
  call check(index(resurgo_last_error(), "'empty'") > 0, 'naming the region: ' // resurgo_last_error())

  call resurgo_last_restart(store, report, ierr)
  call check_ok(ierr, 'last_restart before any restart')
  call check(report%version == -1 .and. report%level == -1, 'no restart yet: version and level -1')

  do version = 1, 2
    call fill(version)
    call resurgo_checkpoint(store, version, ierr)
    call check_ok(ierr, 'checkpoint')
  end do
  call resurgo_wait(store, ierr)
  call check_ok(ierr, 'wait at L2')
  call resurgo_wait(store, ierr, version=2, level=RSG_L4)
  call check_ok(ierr, 'wait for version 2 at L4')

  call resurgo_stats(store, 1, stats, ierr)
  call check_ok(ierr, 'stats of version 1')
  call check(stats%version == 1, 'stats: the version')
  call check(resurgo_string(stats%capture) == 'copy', 'stats: capture is copy, not ' // &
             resurgo_string(stats%capture))
  call check(stats%bytes == state_bytes, 'stats: the protected bytes')
  call check(stats%seconds_to_level(RSG_L2) >= 0, 'stats: durable at L2')
  call check(stats%stored_bytes(RSG_L2) > 0, 'stats: stored bytes at L2')
  call check(stats%seconds_to_level(RSG_L4) == -1 .and. stats%stored_bytes(RSG_L4) == -1, &
             'stats: version 1 does not go to L4')
  call check(stats%failed == 0 .and. stats%base_version == -1, 'stats: a full version without error')
  call check(stats%device_bytes == field_bytes + managed_bytes, 'stats: the device and managed bytes')
  call check(resurgo_string(stats%device_path) == 'l0', 'stats: the device region went into L0, not ' // &
             resurgo_string(stats%device_path))
  call resurgo_stats(store, 2, stats, ierr)
  call check_ok(ierr, 'stats of version 2')
  call check(stats%seconds_to_level(RSG_L4) >= stats%seconds_to_level(RSG_L2), 'stats: version 2 reached L4')
  call resurgo_stats(store, 3, stats, ierr)
  call check(ierr == RSG_ENOTFOUND, 'stats of a version never taken: RSG_ENOTFOUND')
  call check(index(resurgo_last_error(), 'version 3') > 0, 'naming it: ' // resurgo_last_error())

  call resurgo_device_stats(store, caches, ierr)
  call check_ok(ierr, 'device_stats')
  call check(caches%has_cache == 1 .and. caches%cache_capacity == l0_capacity, 'device_stats: the L0 cache')
  call check(caches%cache_versions >= 1, 'device_stats: L0 holds a version')
  call check(caches%cache_device == 0 .and. caches%cache_prefetched == 0, &
             'device_stats: the cache on device 0, nothing prefetched')
  call check(caches%has_staging == 1 .and. resurgo_string(caches%pin) == 'lazy', &
             'device_stats: the staging buffer, pinning lazily')
  call check(caches%checkpoints == 2, 'device_stats: two checkpoints staged')

  ! Capture streams (docs/gpu.md): none named is the whole context; with the
  ! host backend there is no context to name streams of, and nothing waits.
  capture_streams(1) = c_null_ptr
  call resurgo_set_capture_streams(store, capture_streams, ierr)
  call check_ok(ierr, 'set_capture_streams of one stream')
  call resurgo_set_capture_streams(store, capture_streams(1:0), ierr)
  call check_ok(ierr, 'set_capture_streams of none')

  call resurgo_versions(store, versions, ierr)
  call check_ok(ierr, 'versions')
  call check(size(versions) == 2, 'versions: two')
  call check(versions(1)%version == 1 .and. versions(2)%version == 2, 'versions: ascending')
  call check(all(versions%pending == 0), 'versions: none pending')
  call check(all(versions%levels(RSG_L2) == 1), 'versions: both on L2')
  call check(versions(1)%levels(RSG_L4) == 0 .and. versions(2)%levels(RSG_L4) == 1, 'versions: only 2 on L4')

  call resurgo_persist(store, 1, RSG_L4, ierr)
  call check_ok(ierr, 'persist of version 1 to L4')
  call resurgo_versions(store, versions)
  call check(versions(1)%levels(RSG_L4) == 1, 'persist: version 1 is on L4')
  call resurgo_persist(store, 7, RSG_L4, ierr)
  call check(ierr == RSG_ENOTFOUND, 'persist of a missing version: RSG_ENOTFOUND')
  call check(index(resurgo_last_error(), 'version 7') > 0, 'naming it: ' // resurgo_last_error())

  call resurgo_describe(store, 2, regions, ierr)
  call check_ok(ierr, 'describe')
  call check(size(regions) == 3, 'describe: three regions')
  call check(resurgo_string(regions(1)%label) == 'u' .and. regions(1)%kind == RSG_KIND_HOST .and. &
             regions(1)%bytes == c_sizeof(u), 'describe: u, host')
  call check(resurgo_string(regions(2)%label) == 'managed' .and. regions(2)%kind == RSG_KIND_MANAGED .and. &
             regions(2)%bytes == managed_bytes, 'describe: managed')
  call check(resurgo_string(regions(3)%label) == 'field' .and. regions(3)%kind == RSG_KIND_DEVICE .and. &
             regions(3)%bytes == field_bytes, 'describe: field, device')
  call resurgo_describe(store, 9, regions, ierr)
  call check(ierr == RSG_ENOTFOUND .and. size(regions) == 0, 'describe of a missing version: RSG_ENOTFOUND')
  call check(index(resurgo_last_error(), 'version 9') > 0, 'naming it: ' // resurgo_last_error())

  call fill(-1)
  call resurgo_restart(store, 1, restored=restored, ierr=ierr)
  call check_ok(ierr, 'restart of version 1')
  call check(all(u == 1) .and. all(managed == 1) .and. all(field == 1), 'version 1 restored')
  call resurgo_last_restart(store, report, ierr)
  call check_ok(ierr, 'last_restart')
  call check(report%version == 1, 'last_restart: the version')
  call check(report%level == RSG_L2, 'last_restart: read from L2, the fastest directory level')
  call check(report%bytes == state_bytes .and. report%skipped == 0, 'last_restart: every byte, nothing skipped')

  call resurgo_close(store, ierr)
  call check_ok(ierr, 'close')

contains

  subroutine fill(generation)
    integer, intent(in) :: generation
    u = generation
    managed = generation
    field = generation
  end subroutine fill

  ! Each bind(C) type has the size of its C struct and its last field at the
  ! same offset; the calls below read the fields in between.
  subroutine check_layout()
    type(rsg_version_stats), target :: version_stats
    type(rsg_device_caches), target :: device_caches
    type(rsg_restart_report), target :: restart_report
    type(rsg_region_description), target :: region_description
    type(rsg_version_info), target :: version_info
    integer(c_size_t) :: sizes(5), last_field_offsets(5)
    call struct_layout(sizes, last_field_offsets)
    call check(sizes(1) == c_sizeof(version_stats) .and. last_field_offsets(1) == &
               offset(c_loc(version_stats), c_loc(version_stats%device_wait_seconds)), 'rsg_version_stats layout')
    call check(sizes(2) == c_sizeof(device_caches) .and. last_field_offsets(2) == &
               offset(c_loc(device_caches), c_loc(device_caches%decision)), 'rsg_device_caches layout')
    call check(sizes(3) == c_sizeof(restart_report) .and. last_field_offsets(3) == &
               offset(c_loc(restart_report), c_loc(restart_report%skipped)), 'rsg_restart_report layout')
    call check(sizes(4) == c_sizeof(region_description) .and. last_field_offsets(4) == &
               offset(c_loc(region_description), c_loc(region_description%shape)), 'rsg_region_description layout')
    call check(sizes(5) == c_sizeof(version_info) .and. last_field_offsets(5) == &
               offset(c_loc(version_info), c_loc(version_info%levels)), 'rsg_version_info layout')
  end subroutine check_layout

  integer(c_size_t) function offset(base, field_address)
    type(c_ptr), intent(in) :: base, field_address
    offset = int(transfer(field_address, 0_c_intptr_t) - transfer(base, 0_c_intptr_t), c_size_t)
  end function offset

end program test_queries
