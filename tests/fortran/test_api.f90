! Test of the Fortran module: every wrapper, every array kind and rank, the
! error paths (ierr, resurgo_last_error). Exits non-zero on the first
! failed check. RESURGO_LOCAL_PATH / RESURGO_PERSISTENT_PATH point into a
! fresh directory (set by CTest).
program test_api
  use, intrinsic :: iso_c_binding, only: c_loc, c_size_t, c_associated
  use, intrinsic :: iso_fortran_env, only: real32, real64, int32, int64, error_unit
  use resurgo
  implicit none

  type(resurgo_store) :: store
  real(real64), allocatable, target :: d1(:), d2(:, :)
  real(real32), allocatable, target :: s1(:), s2(:, :)
  integer(int32), allocatable, target :: i1(:), i2(:, :)
  integer(int64), allocatable, target :: l1(:), l2(:, :)
  integer(int64), target :: counter
  integer(int32), target :: flag
  real(real64), target :: big(8, 8)
  character(len=:), allocatable :: meta
  integer :: ierr, version, restored

  allocate(d1(100), d2(7, 9), s1(33), s2(5, 4), i1(17), i2(3, 11), l1(12), l2(6, 2))
  call fill(1)
  counter = 41
  flag = 7

  ! Opening with a bad name is an error with a message, not a stop.
  call resurgo_open('no/slashes', store, ierr)
  call check(ierr == RSG_EINVAL, 'open with a bad name gives RSG_EINVAL')
  call check(len(resurgo_last_error()) > 0, 'last_error names the cause')

  call resurgo_open('fortran-api', store, ierr)
  call check(ierr == RSG_OK, 'open: ' // resurgo_last_error())
  call check(c_associated(store%handle), 'open sets the handle')

  call resurgo_latest(store, version, ierr)
  call check(ierr == RSG_OK .and. version == -1, 'latest of an empty store is -1')

  call resurgo_protect(store, 1, d1, 'd1', ierr); call check(ierr == RSG_OK, 'protect d1')
  call resurgo_protect(store, 2, d2, 'd2', ierr); call check(ierr == RSG_OK, 'protect d2')
  call resurgo_protect(store, 3, s1, 's1', ierr); call check(ierr == RSG_OK, 'protect s1')
  call resurgo_protect(store, 4, s2, 's2', ierr); call check(ierr == RSG_OK, 'protect s2')
  call resurgo_protect(store, 5, i1, 'i1', ierr); call check(ierr == RSG_OK, 'protect i1')
  call resurgo_protect(store, 6, i2, 'i2', ierr); call check(ierr == RSG_OK, 'protect i2')
  call resurgo_protect(store, 7, l1, 'l1', ierr); call check(ierr == RSG_OK, 'protect l1')
  call resurgo_protect(store, 8, l2, 'l2', ierr); call check(ierr == RSG_OK, 'protect l2')
  call resurgo_protect(store, 9, counter, 'counter', ierr)
  call check(ierr == RSG_OK, 'protect an int64 scalar')
  call resurgo_protect(store, 10, flag, 'flag', ierr)
  call check(ierr == RSG_OK, 'protect an int32 scalar')
  call resurgo_protect_bytes(store, 11, c_loc(big), int(storage_size(big) / 8 * size(big), &
                             c_size_t), 'big', ierr)
  call check(ierr == RSG_OK, 'protect_bytes')
  big = 2.5_real64

  ! A strided section would be copied for the call: refused, nothing protected.
  call resurgo_protect(store, 12, d2(1, :), 'row', ierr)
  call check(ierr == RSG_EINVAL, 'a non-contiguous section is refused')

  call resurgo_set_metadata(store, 'step=10', ierr)
  call check(ierr == RSG_OK, 'set_metadata')
  call resurgo_checkpoint(store, 10, ierr)
  call check(ierr == RSG_OK, 'checkpoint 10: ' // resurgo_last_error())
  call resurgo_wait(store, ierr)
  call check(ierr == RSG_OK, 'wait all: ' // resurgo_last_error())
  call resurgo_latest(store, version, ierr)
  call check(ierr == RSG_OK .and. version == 10, 'latest is 10')

  ! A second version with other contents, waited for at L4 explicitly.
  call fill(2)
  counter = 99
  call resurgo_set_metadata(store, 'step=20', ierr)
  call resurgo_checkpoint(store, 20, ierr)
  call check(ierr == RSG_OK, 'checkpoint 20')
  call resurgo_wait(store, ierr, version=20, level=RSG_L4)
  call check(ierr == RSG_OK, 'wait 20 at L4: ' // resurgo_last_error())

  ! Versions must grow.
  call resurgo_checkpoint(store, 15, ierr)
  call check(ierr /= RSG_OK, 'a smaller version is refused')
  call check(len(resurgo_last_error()) > 0, 'with a message')

  ! Restore version 10 (the positional argument is the version to restore)
  ! over scribbled memory.
  call fill(3)
  counter = -1
  flag = -1
  big = 0
  call resurgo_restart(store, 10, restored=restored, ierr=ierr)
  call check(ierr == RSG_OK .and. restored == 10, 'restart 10: ' // resurgo_last_error())
  call verify(1)
  call check(counter == 41 .and. flag == 7, 'scalars restored')
  call check(all(big == 2.5_real64), 'protect_bytes region restored')
  call resurgo_get_metadata(store, meta, ierr)
  call check(ierr == RSG_OK .and. meta == 'step=10', 'metadata of version 10')

  restored = 777
  call resurgo_restart(store, 12345, restored=restored, ierr=ierr)
  call check(ierr == RSG_ENOTFOUND, 'restart of a missing version is RSG_ENOTFOUND')
  call check(restored == -1, 'restored is -1 when nothing was restored')

  call resurgo_unprotect(store, 12, ierr)
  call check(ierr == RSG_ENOTFOUND .or. ierr == RSG_EINVAL, 'unprotect of an unknown id fails')
  call resurgo_unprotect(store, 11, ierr)
  call check(ierr == RSG_OK, 'unprotect')
  call resurgo_close(store, ierr)
  call check(ierr == RSG_OK, 'close: ' // resurgo_last_error())
  call check(.not. c_associated(store%handle), 'close clears the handle')

  ! A new store of the same name finds the newest version and restores it
  ! (no version: RSG_LATEST) into freshly protected memory.
  call fill(3)
  counter = 0
  call resurgo_open('fortran-api', store)  ! no ierr: stops on failure
  call resurgo_protect(store, 1, d1, 'd1')
  call resurgo_protect(store, 2, d2, 'd2')
  call resurgo_protect(store, 3, s1, 's1')
  call resurgo_protect(store, 4, s2, 's2')
  call resurgo_protect(store, 5, i1, 'i1')
  call resurgo_protect(store, 6, i2, 'i2')
  call resurgo_protect(store, 7, l1, 'l1')
  call resurgo_protect(store, 8, l2, 'l2')
  call resurgo_protect(store, 9, counter, 'counter')
  call resurgo_protect(store, 10, flag, 'flag')
  call resurgo_protect_bytes(store, 11, c_loc(big), int(storage_size(big) / 8 * size(big), &
                             c_size_t), 'big')
  big = 0
  call resurgo_latest(store, version)
  call check(version == 20, 'reopened store: latest is 20')
  call resurgo_restart(store, restored=restored)
  call check(restored == 20, 'restart latest gives 20')
  call verify(2)
  call fill(3)
  call resurgo_restart(store)  ! neither version nor result: the newest again
  call verify(2)
  call check(counter == 99, 'counter of version 20')
  call check(all(big == 2.5_real64), 'big of version 20')
  call resurgo_get_metadata(store, meta)
  call check(meta == 'step=20', 'metadata of version 20')

  ! Restoring into a region of another size is a mismatch.
  call resurgo_unprotect(store, 1)
  deallocate(d1)
  allocate(d1(50))
  call resurgo_protect(store, 1, d1, 'd1')
  call resurgo_restart(store, 20, ierr=ierr)
  call check(ierr == RSG_EMISMATCH, 'restart into a smaller region is RSG_EMISMATCH')
  call resurgo_close(store)

  write(*, '(a)') 'test_api: all checks passed'

contains

  ! Distinct contents per generation g.
  subroutine fill(g)
    integer, intent(in) :: g
    integer :: n
    d1 = [(real(n * g, real64) / 3, n = 1, size(d1))]
    d2 = reshape([(real(n + g, real64) * 0.5_real64, n = 1, size(d2))], shape(d2))
    s1 = [(real(n - g, real32) / 7, n = 1, size(s1))]
    s2 = reshape([(real(n * g, real32), n = 1, size(s2))], shape(s2))
    i1 = [(n * g, n = 1, size(i1))]
    i2 = reshape([(n - g, n = 1, size(i2))], shape(i2))
    l1 = [(int(n, int64) * 10000000000_int64 * g, n = 1, size(l1))]
    l2 = reshape([(-int(n, int64) * g, n = 1, size(l2))], shape(l2))
  end subroutine fill

  subroutine verify(g)
    integer, intent(in) :: g
    integer :: n
    call check(all(d1 == [(real(n * g, real64) / 3, n = 1, size(d1))]), 'd1 restored')
    call check(all(d2 == reshape([(real(n + g, real64) * 0.5_real64, n = 1, size(d2))], &
                                 shape(d2))), 'd2 restored')
    call check(all(s1 == [(real(n - g, real32) / 7, n = 1, size(s1))]), 's1 restored')
    call check(all(s2 == reshape([(real(n * g, real32), n = 1, size(s2))], shape(s2))), &
               's2 restored')
    call check(all(i1 == [(n * g, n = 1, size(i1))]), 'i1 restored')
    call check(all(i2 == reshape([(n - g, n = 1, size(i2))], shape(i2))), 'i2 restored')
    call check(all(l1 == [(int(n, int64) * 10000000000_int64 * g, n = 1, size(l1))]), &
               'l1 restored')
    call check(all(l2 == reshape([(-int(n, int64) * g, n = 1, size(l2))], shape(l2))), &
               'l2 restored')
  end subroutine verify

  subroutine check(ok, what)
    logical, intent(in) :: ok
    character(len=*), intent(in) :: what
    if (.not. ok) then
      write(error_unit, '(a, a)') 'test_api: FAILED: ', what
      error stop 1
    end if
  end subroutine check

end program test_api
