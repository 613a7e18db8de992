! Test of the Fortran module: every wrapper, every kind of resurgo_protect
! at ranks 0 to 3 through checkpoint and restart, and the error paths (ierr
! set, resurgo_last_error naming the cause). Exits non-zero on the first
! failed check. RESURGO_LOCAL_PATH / RESURGO_PERSISTENT_PATH point into a
! fresh directory (set by CTest).
program test_api
  use, intrinsic :: iso_c_binding, only: c_loc, c_size_t, c_associated
  use, intrinsic :: iso_fortran_env, only: real32, real64, int32, int64
  use resurgo
  use test_checks, only: check, check_ok
  implicit none

  type(resurgo_store) :: store
  ! One array per kind and rank (ids 1 to 18, in this order), of unlike
  ! shapes so that a region restored into the wrong array would show.
  real(real32), allocatable, target :: r4_1(:), r4_2(:, :), r4_3(:, :, :)
  real(real64), allocatable, target :: r8_1(:), r8_2(:, :), r8_3(:, :, :)
  integer(int32), allocatable, target :: i4_1(:), i4_2(:, :), i4_3(:, :, :)
  integer(int64), allocatable, target :: i8_1(:), i8_2(:, :), i8_3(:, :, :)
  complex(real32), allocatable, target :: c4_1(:), c4_2(:, :), c4_3(:, :, :)
  complex(real64), allocatable, target :: c8_1(:), c8_2(:, :), c8_3(:, :, :)
  real(real64), allocatable, target :: empty(:)
  integer(int64), target :: counter  ! scalars: rank 0
  real(real64), target :: time
  real(real64), target :: big(8, 8)  ! through resurgo_protect_bytes
  character(len=:), allocatable :: meta
  integer :: ierr, version, restored
  logical :: need

  allocate(r4_1(33), r4_2(5, 4), r4_3(2, 3, 4), r8_1(100), r8_2(7, 9), r8_3(3, 4, 5), &
           i4_1(17), i4_2(3, 11), i4_3(4, 2, 3), i8_1(12), i8_2(6, 2), i8_3(2, 2, 7), &
           c4_1(9), c4_2(2, 5), c4_3(3, 1, 4), c8_1(11), c8_2(4, 3), c8_3(1, 5, 2), empty(0))
  call fill(1)

  ! Opening with a bad name is an error with a message, not a stop.
  call resurgo_open('no/slashes', store, ierr)
  call check(ierr == RSG_EINVAL, 'open with a bad name gives RSG_EINVAL')
  call check(len(resurgo_last_error()) > 0, 'last_error names the cause')

  call resurgo_open('fortran-api', store, ierr)
  call check(ierr == RSG_OK, 'open: ' // resurgo_last_error())
  call check(c_associated(store%handle), 'open sets the handle')

  call resurgo_latest(store, version, ierr)
  call check(ierr == RSG_OK .and. version == -1, 'latest of an empty store is -1')

  call protect_all()
  big = 2.5_real64

  ! A strided section would be copied for the call: refused by the wrapper
  ! itself, with its own message, and nothing protected.
  call resurgo_protect(store, 30, r8_2(1, :), 'row', ierr)
  call check(ierr == RSG_EINVAL, 'a non-contiguous rank-1 section is refused')
  call check(index(resurgo_last_error(), "'row' is not contiguous") > 0, &
             'the refusal names the array: ' // resurgo_last_error())
  call resurgo_protect(store, 30, r4_3(1, :, :), 'plane', ierr)
  call check(ierr == RSG_EINVAL, 'a non-contiguous rank-2 section is refused')
  call check(index(resurgo_last_error(), "'plane'") > 0, 'and named')
  ! A contiguous section is the user's own memory: accepted, and a call
  ! that reaches the C API replaces the wrapper's message.
  call resurgo_protect(store, 30, r8_3(:, :, 2), 'slab', ierr)
  call check(ierr == RSG_OK, 'a contiguous section is accepted: ' // resurgo_last_error())
  call check(resurgo_last_error() == '', 'a successful call clears the message')
  call resurgo_unprotect(store, 30)

  call resurgo_protect(store, 31, empty, 'empty', ierr)
  call check(ierr == RSG_EINVAL, 'an empty array is refused')
  call check(len(resurgo_last_error()) > 0, 'with a message')

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
  big = 0
  call resurgo_restart(store, 10, restored=restored, ierr=ierr)
  call check(ierr == RSG_OK .and. restored == 10, 'restart 10: ' // resurgo_last_error())
  call verify(1)
  call check(all(big == 2.5_real64), 'protect_bytes region restored')
  call resurgo_get_metadata(store, meta, ierr)
  call check(ierr == RSG_OK .and. meta == 'step=10', 'metadata of version 10')

  ! Adjoint staging: prefetch in restore order, consume, discard.
  call resurgo_prefetch(store, [20, 10], ierr)
  call check(ierr == RSG_OK, 'prefetch: ' // resurgo_last_error())
  call resurgo_restart(store, 10, restored=restored, ierr=ierr)
  call check(ierr == RSG_OK .and. restored == 10, 'restart 10 after prefetch: ' // resurgo_last_error())
  call resurgo_discard(store, 10, ierr)
  call check(ierr == RSG_OK, 'discard 10: ' // resurgo_last_error())
  call resurgo_discard(store, 10, ierr)
  call check(ierr == RSG_ESTATE, 'a second discard of 10 is RSG_ESTATE')
  call resurgo_restart(store, 10, restored=restored, ierr=ierr)
  call check(ierr == RSG_ENOTFOUND, 'restart of a discarded version is RSG_ENOTFOUND')
  call check(index(resurgo_last_error(), 'discarded') > 0, 'and says so: ' // resurgo_last_error())

  ! No [interval] policy configured: the question is an error.
  call resurgo_need_checkpoint(store, need, ierr)
  call check(ierr == RSG_ESTATE, 'need_checkpoint without a policy is RSG_ESTATE')
  call check(index(resurgo_last_error(), 'interval.policy') > 0, 'and names the key')

  restored = 777
  call resurgo_restart(store, 12345, restored=restored, ierr=ierr)
  call check(ierr == RSG_ENOTFOUND, 'restart of a missing version is RSG_ENOTFOUND')
  call check(index(resurgo_last_error(), '12345') > 0, 'the message names the version: ' // &
             resurgo_last_error())
  call check(restored == -1, 'restored is -1 when nothing was restored')

  call resurgo_unprotect(store, 30, ierr)
  call check(ierr == RSG_ENOTFOUND .or. ierr == RSG_EINVAL, 'unprotect of an unknown id fails')
  call check(len(resurgo_last_error()) > 0, 'with a message')
  call resurgo_unprotect(store, 21, ierr)
  call check(ierr == RSG_OK, 'unprotect')
  call resurgo_close(store, ierr)
  call check(ierr == RSG_OK, 'close: ' // resurgo_last_error())
  call check(.not. c_associated(store%handle), 'close clears the handle')

  ! Calls on a closed store fail with a message.
  call resurgo_checkpoint(store, 30, ierr)
  call check(ierr == RSG_EINVAL .and. len(resurgo_last_error()) > 0, &
             'checkpoint on a closed store fails with a message')

  ! A new store of the same name finds the newest version and restores it
  ! (no version: RSG_LATEST) into freshly protected memory.
  call fill(3)
  call resurgo_open('fortran-api', store)  ! no ierr: stops on failure
  call protect_all()
  big = 0
  call resurgo_latest(store, version)
  call check(version == 20, 'reopened store: latest is 20')
  call resurgo_restart(store, restored=restored)
  call check(restored == 20, 'restart latest gives 20')
  call verify(2)
  call check(all(big == 2.5_real64), 'big of version 20')
  call resurgo_get_metadata(store, meta)
  call check(meta == 'step=20', 'metadata of version 20')
  call fill(3)
  call resurgo_restart(store)  ! neither version nor result: the newest again
  call verify(2)

  ! Restoring into a region of another size is a mismatch.
  call resurgo_unprotect(store, 4)
  deallocate(r8_1)
  allocate(r8_1(50))
  call resurgo_protect(store, 4, r8_1, 'r8_1')
  call resurgo_restart(store, 20, ierr=ierr)
  call check(ierr == RSG_EMISMATCH, 'restart into a smaller region is RSG_EMISMATCH')
  call check(index(resurgo_last_error(), 'r8_1') > 0, 'the message names the region: ' // &
             resurgo_last_error())
  call resurgo_close(store)

  write(*, '(a)') 'test_api: all checks passed'

contains

  ! Ids 1 to 18: the arrays in declaration order; 19, 20: the scalars;
  ! 21: big as bytes.
  subroutine protect_all()
    integer :: ierr
    call resurgo_protect(store, 1, r4_1, 'r4_1', ierr); call check_ok(ierr, 'protect r4_1')
    call resurgo_protect(store, 2, r4_2, 'r4_2', ierr); call check_ok(ierr, 'protect r4_2')
    call resurgo_protect(store, 3, r4_3, 'r4_3', ierr); call check_ok(ierr, 'protect r4_3')
    call resurgo_protect(store, 4, r8_1, 'r8_1', ierr); call check_ok(ierr, 'protect r8_1')
    call resurgo_protect(store, 5, r8_2, 'r8_2', ierr); call check_ok(ierr, 'protect r8_2')
    call resurgo_protect(store, 6, r8_3, 'r8_3', ierr); call check_ok(ierr, 'protect r8_3')
    call resurgo_protect(store, 7, i4_1, 'i4_1', ierr); call check_ok(ierr, 'protect i4_1')
    call resurgo_protect(store, 8, i4_2, 'i4_2', ierr); call check_ok(ierr, 'protect i4_2')
    call resurgo_protect(store, 9, i4_3, 'i4_3', ierr); call check_ok(ierr, 'protect i4_3')
    call resurgo_protect(store, 10, i8_1, 'i8_1', ierr); call check_ok(ierr, 'protect i8_1')
    call resurgo_protect(store, 11, i8_2, 'i8_2', ierr); call check_ok(ierr, 'protect i8_2')
    call resurgo_protect(store, 12, i8_3, 'i8_3', ierr); call check_ok(ierr, 'protect i8_3')
    call resurgo_protect(store, 13, c4_1, 'c4_1', ierr); call check_ok(ierr, 'protect c4_1')
    call resurgo_protect(store, 14, c4_2, 'c4_2', ierr); call check_ok(ierr, 'protect c4_2')
    call resurgo_protect(store, 15, c4_3, 'c4_3', ierr); call check_ok(ierr, 'protect c4_3')
    call resurgo_protect(store, 16, c8_1, 'c8_1', ierr); call check_ok(ierr, 'protect c8_1')
    call resurgo_protect(store, 17, c8_2, 'c8_2', ierr); call check_ok(ierr, 'protect c8_2')
    call resurgo_protect(store, 18, c8_3, 'c8_3', ierr); call check_ok(ierr, 'protect c8_3')
    call resurgo_protect(store, 19, counter, 'counter', ierr)
    call check_ok(ierr, 'protect an int64 scalar')
    call resurgo_protect(store, 20, time, 'time', ierr)
    call check_ok(ierr, 'protect a real64 scalar')
    call resurgo_protect_bytes(store, 21, c_loc(big), &
                               int(storage_size(big) / 8 * size(big), c_size_t), 'big', ierr)
    call check_ok(ierr, 'protect_bytes')
  end subroutine protect_all

  ! Generation g of every region's contents: n + 1000 g (+ 0.5 for the
  ! reals), exact in every kind; element n of each array in storage order.
  function values(count, g) result(v)
    integer, intent(in) :: count, g
    real(real64) :: v(count)
    integer :: n
    v = [(n + 1000 * g + 0.5_real64, n = 1, count)]
  end function values

  subroutine fill(g)
    integer, intent(in) :: g
    r4_1 = real(values(size(r4_1), g), real32)
    r4_2 = reshape(real(values(size(r4_2), g), real32), shape(r4_2))
    r4_3 = reshape(real(values(size(r4_3), g), real32), shape(r4_3))
    r8_1 = values(size(r8_1), g)
    r8_2 = reshape(values(size(r8_2), g), shape(r8_2))
    r8_3 = reshape(values(size(r8_3), g), shape(r8_3))
    i4_1 = int(values(size(i4_1), g), int32)
    i4_2 = reshape(int(values(size(i4_2), g), int32), shape(i4_2))
    i4_3 = reshape(int(values(size(i4_3), g), int32), shape(i4_3))
    ! Beyond 32 bits, so that a truncated copy would show.
    i8_1 = int(values(size(i8_1), g), int64) * 10000000000_int64
    i8_2 = reshape(int(values(size(i8_2), g), int64) * 10000000000_int64, shape(i8_2))
    i8_3 = reshape(int(values(size(i8_3), g), int64) * 10000000000_int64, shape(i8_3))
    c4_1 = cmplx(values(size(c4_1), g), -g, real32)
    c4_2 = reshape(cmplx(values(size(c4_2), g), -g, real32), shape(c4_2))
    c4_3 = reshape(cmplx(values(size(c4_3), g), -g, real32), shape(c4_3))
    c8_1 = cmplx(values(size(c8_1), g), -g, real64)
    c8_2 = reshape(cmplx(values(size(c8_2), g), -g, real64), shape(c8_2))
    c8_3 = reshape(cmplx(values(size(c8_3), g), -g, real64), shape(c8_3))
    counter = 41 * g
    time = 0.25_real64 * g
  end subroutine fill

  subroutine verify(g)
    integer, intent(in) :: g
    call check(all(r4_1 == real(values(size(r4_1), g), real32)), 'r4_1 restored')
    call check(all(r4_2 == reshape(real(values(size(r4_2), g), real32), shape(r4_2))), &
               'r4_2 restored')
    call check(all(r4_3 == reshape(real(values(size(r4_3), g), real32), shape(r4_3))), &
               'r4_3 restored')
    call check(all(r8_1 == values(size(r8_1), g)), 'r8_1 restored')
    call check(all(r8_2 == reshape(values(size(r8_2), g), shape(r8_2))), 'r8_2 restored')
    call check(all(r8_3 == reshape(values(size(r8_3), g), shape(r8_3))), 'r8_3 restored')
    call check(all(i4_1 == int(values(size(i4_1), g), int32)), 'i4_1 restored')
    call check(all(i4_2 == reshape(int(values(size(i4_2), g), int32), shape(i4_2))), &
               'i4_2 restored')
    call check(all(i4_3 == reshape(int(values(size(i4_3), g), int32), shape(i4_3))), &
               'i4_3 restored')
    call check(all(i8_1 == int(values(size(i8_1), g), int64) * 10000000000_int64), &
               'i8_1 restored')
    call check(all(i8_2 == reshape(int(values(size(i8_2), g), int64) * 10000000000_int64, &
                                   shape(i8_2))), 'i8_2 restored')
    call check(all(i8_3 == reshape(int(values(size(i8_3), g), int64) * 10000000000_int64, &
                                   shape(i8_3))), 'i8_3 restored')
    call check(all(c4_1 == cmplx(values(size(c4_1), g), -g, real32)), 'c4_1 restored')
    call check(all(c4_2 == reshape(cmplx(values(size(c4_2), g), -g, real32), shape(c4_2))), &
               'c4_2 restored')
    call check(all(c4_3 == reshape(cmplx(values(size(c4_3), g), -g, real32), shape(c4_3))), &
               'c4_3 restored')
    call check(all(c8_1 == cmplx(values(size(c8_1), g), -g, real64)), 'c8_1 restored')
    call check(all(c8_2 == reshape(cmplx(values(size(c8_2), g), -g, real64), shape(c8_2))), &
               'c8_2 restored')
    call check(all(c8_3 == reshape(cmplx(values(size(c8_3), g), -g, real64), shape(c8_3))), &
               'c8_3 restored')
    call check(counter == 41 * g, 'int64 scalar restored')
    call check(time == 0.25_real64 * g, 'real64 scalar restored')
  end subroutine verify

end program test_api
