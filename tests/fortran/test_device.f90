! resurgo_protect_device from Fortran, through the host backend
! (RESURGO_DEVICE_BACKEND=host: host memory stands for device memory, so the
! path into the L0 device cache and back runs without a GPU): three versions
! checkpointed, the second restored into the device region.
program test_device
  use, intrinsic :: iso_c_binding, only: c_loc, c_size_t
  use, intrinsic :: iso_fortran_env, only: real64
  use resurgo
  use test_checks, only: check, check_ok
  implicit none

  type(resurgo_store) :: store
  real(real64), target :: field(64, 32)
  integer :: ierr, restored, version
  integer(c_size_t) :: bytes

  bytes = int(storage_size(field) / 8 * size(field), c_size_t)
  call resurgo_open('fortran-device', store, ierr)
  call check_ok(ierr, 'open')
  call resurgo_protect_device(store, 1, c_loc(field), bytes, 'field', ierr)
  call check_ok(ierr, 'protect_device')

  do version = 1, 3
    field = generation(version)
    call resurgo_checkpoint(store, version, ierr)
    call check_ok(ierr, 'checkpoint')
  end do
  call resurgo_wait(store, ierr)
  call check_ok(ierr, 'wait')

  field = -1
  call resurgo_restart(store, 2, restored=restored, ierr=ierr)
  call check_ok(ierr, 'restart of version 2')
  call check(restored == 2, 'version 2 restored')
  call check(all(field == generation(2)), 'the device region holds version 2')
  call resurgo_close(store, ierr)
  call check_ok(ierr, 'close')

contains

  function generation(g) result(values)
    integer, intent(in) :: g
    real(real64) :: values(64, 32)
    integer :: n
    values = reshape([(real(g * 100000 + n, real64), n = 1, size(values))], shape(values))
  end function generation

end program test_device
