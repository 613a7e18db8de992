! Test of Appicpr's calls in the Fortran module: the slides' example
! (appic_register(array, sizeof(array))), two cycles, the read-back of a
! restarted program, the errors (ierr set, resurgo_last_error naming the
! cause), and a cycle that does not write every array. Exits non-zero on the first failed check. Runs in a fresh
! working directory (set by CTest); the store is run-appic/test.dat.
program test_appic
  use, intrinsic :: iso_c_binding, only: c_sizeof
  use, intrinsic :: iso_fortran_env, only: real32, int32
  use resurgo
  use test_checks, only: check, check_ok
  implicit none

  integer, parameter :: asize = 256  ! 256 KiB of real32: 64 pages
  character(len=*), parameter :: path = 'run-appic/test.dat'
  real(real32), allocatable, target :: array(:, :), expected(:, :)
  integer(int32), target :: ids(10)
  real(real32), target :: other(4, 4)
  integer :: ierr, version, i

  allocate(array(asize, asize), expected(asize, asize))
  array = reshape([(real(i, real32), i = 1, asize * asize)], [asize, asize])
  ids = [(i, i = 1, 10)]

  ! Nothing on disk yet: the version is -1 and a read says so.
  call appic_open(path, ierr)
  call check_ok(ierr, 'open')
  call appic_version(version, ierr)
  call check(ierr == RSG_OK .and. version == -1, 'version of a new path is -1')
  call appic_register(array, sizeof(array), ierr)
  call check_ok(ierr, 'register with sizeof')
  call appic_register(ids, int(c_sizeof(ids)), ierr)
  call check_ok(ierr, 'register with a default integer size')
  call appic_read(array, ierr)
  call check(ierr == RSG_ENOTFOUND, 'read with no checkpoint gives RSG_ENOTFOUND')
  call appic_close(ierr)
  call check_ok(ierr, 'close of a read cycle')

  ! The slides' cycle, twice; the second changes one column.
  call write_cycle()
  array(:, 3) = -1.0_real32
  call write_cycle()
  expected = array
  call appic_finalize(ierr)
  call check_ok(ierr, 'finalize')

  ! As a restarted program: same registrations, then read.
  array = 0
  ids = 0
  call appic_open(path)
  call appic_register(array, sizeof(array))
  call appic_register(ids, sizeof(ids))
  call appic_read(array, ierr)
  call check_ok(ierr, 'read')
  call appic_read(ids, ierr)
  call check_ok(ierr, 'second read of the cycle')
  call appic_version(version)
  call check(version == 2, 'the newest version, 2, was read')
  call appic_close()
  call check(all(array == expected), 'the array is read back as written')
  call check(all(ids == [(i, i = 1, 10)]), 'the ids are read back as written')

  ! Errors.
  call appic_open(path)
  call appic_register(array, sizeof(array))
  call appic_register(ids, sizeof(ids))
  call appic_write(other, ierr)
  call check(ierr == RSG_EINVAL, 'write of an unregistered array gives RSG_EINVAL')
  call check(index(resurgo_last_error(), 'not registered') > 0, &
             'and says so: ' // resurgo_last_error())
  call appic_write(array(1, :), ierr)
  call check(ierr == RSG_EINVAL, 'write of a strided section gives RSG_EINVAL')
  call check(index(resurgo_last_error(), 'not contiguous') > 0, &
             'and says so: ' // resurgo_last_error())
  call appic_register(ids, 8, ierr)
  call check(ierr == RSG_EINVAL, 'register with another size gives RSG_EINVAL')
  call appic_write(array)
  call appic_close(ierr)
  call check_ok(ierr, 'close with an array not written (ids)')

  ! That close took version 3, with the ids in it.
  ids = 0
  call appic_finalize()
  call appic_open(path)
  call appic_register(array, sizeof(array))
  call appic_register(ids, sizeof(ids))
  call appic_read(ids, ierr)
  call check_ok(ierr, 'read after a cycle that did not write the ids')
  call appic_version(version)
  call check(version == 3, 'the cycle that did not write the ids took version 3')
  call check(all(ids == [(i, i = 1, 10)]), 'the ids not written are in version 3')
  call appic_close()
  ! No appic_finalize: the end of the program closes the store (atexit).
  write(*, '(a)') 'test_appic: all checks passed'

contains

  subroutine write_cycle()
    call appic_open(path)
    call appic_register(array, sizeof(array))
    call appic_register(ids, sizeof(ids))
    call appic_write(array)
    call appic_write(ids)
    call appic_close(ierr)
    call check_ok(ierr, 'close of a write cycle')
  end subroutine write_cycle

end program test_appic
