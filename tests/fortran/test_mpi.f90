! An MPI store from Fortran, run twice under mpirun (tests/fortran/CMakeLists.txt):
!
!   test_mpi checkpoint   in fresh directories: versions 1 and 2, durable at L4
!   test_mpi restart      restores the newest (2), then version 1, and checks
!                         every value of every rank
!
! The global field G(nxl * ranks, ny) is split along its first axis: rank r
! holds rows r*nxl+1 .. (r+1)*nxl of every column, so its block is strided in
! G, the case where the order of the axes matters. mpi_layout.cmake then
! checks that the manifest describes the blocks reversed (row-major).
program test_mpi
  use, intrinsic :: iso_fortran_env, only: real64, int64
  use mpi
  use resurgo
  use test_checks
  implicit none

  integer, parameter :: nxl = 3, ny = 4  ! one rank's block
  real(real64), allocatable, target :: u(:, :)
  integer(int64), target :: step
  type(resurgo_store) :: store
  integer :: ierr, me, ranks
  character(len=16) :: mode

  call MPI_Init(ierr)
  call MPI_Comm_rank(MPI_COMM_WORLD, me, ierr)
  call MPI_Comm_size(MPI_COMM_WORLD, ranks, ierr)
  call get_command_argument(1, mode)
  allocate(u(nxl, ny))

  call resurgo_open_mpi('fortran-mpi', MPI_COMM_WORLD, store, ierr)
  call check_ok(ierr, 'resurgo_open_mpi')
  call resurgo_protect_global(store, 0, u, 'field', [nxl * ranks, ny], [me * nxl, 0], ierr)
  call check_ok(ierr, 'resurgo_protect_global')
  call resurgo_protect(store, 1, step, 'step', ierr)
  call check_ok(ierr, 'resurgo_protect step')

  select case (trim(mode))
  case ('checkpoint')
    call refuse_bad_blocks()
    call write_versions()
  case ('restart')
    call restore_versions()
  case default
    call check(.false., 'usage: test_mpi checkpoint|restart')
  end select

  call resurgo_close(store, ierr)
  call check_ok(ierr, 'resurgo_close')
  call MPI_Finalize(ierr)

contains

  ! G(i, j) in version v: different for every element and version, exact.
  pure real(real64) function expected(i, j, v)
    integer, intent(in) :: i, j, v
    expected = real(1000 * v + 10 * i + j, real64)
  end function expected

  subroutine fill(v)
    integer, intent(in) :: v
    integer :: i, j
    do j = 1, ny
      do i = 1, nxl
        u(i, j) = expected(me * nxl + i, j, v)
      end do
    end do
    step = v
  end subroutine fill

  subroutine expect_version(v)
    integer, intent(in) :: v
    integer :: i, j
    do j = 1, ny
      do i = 1, nxl
        call check(u(i, j) == expected(me * nxl + i, j, v), 'an element of the restored field differs')
      end do
    end do
    call check(step == v, 'the restored step is not the version')
  end subroutine expect_version

  ! The wrapper's own refusal (one entry per axis) and the library's (a
  ! block outside the global array), each with a message naming the array.
  subroutine refuse_bad_blocks()
    real(real64), target :: spare(2, 2)
    call resurgo_protect_global(store, 8, spare, 'spare', [4], [0], ierr)
    call check(ierr == RSG_EINVAL, 'a global shape of the wrong rank was accepted')
    call check(index(resurgo_last_error(), "array 'spare' has 2 axes") > 0, &
               'unexpected message: ' // resurgo_last_error())
    call resurgo_protect_global(store, 8, spare, 'spare', [4, 4], [3, 0], ierr)
    call check(ierr == RSG_EINVAL, 'a block outside its global array was accepted')
    call check(index(resurgo_last_error(), "'spare'") > 0, 'unexpected message: ' // resurgo_last_error())
  end subroutine refuse_bad_blocks

  subroutine write_versions()
    integer :: v
    call resurgo_latest(store, v, ierr)
    call check_ok(ierr, 'resurgo_latest')
    call check(v == -1, 'a fresh directory holds a version')
    do v = 1, 2
      call fill(v)
      call resurgo_checkpoint(store, v, ierr)
      call check_ok(ierr, 'resurgo_checkpoint')
    end do
    call resurgo_wait(store, ierr, level=RSG_L4)
    call check_ok(ierr, 'resurgo_wait L4')
    call resurgo_latest(store, v, ierr)
    call check_ok(ierr, 'resurgo_latest')
    call check(v == 2, 'latest is not version 2 after two checkpoints')
  end subroutine write_versions

  subroutine restore_versions()
    integer :: v
    call resurgo_latest(store, v, ierr)
    call check_ok(ierr, 'resurgo_latest')
    call check(v == 2, 'the checkpoint run left no version 2')
    u = -1
    step = -1
    call resurgo_restart(store, restored=v, ierr=ierr)
    call check_ok(ierr, 'resurgo_restart')
    call check(v == 2, 'restart did not read the newest version')
    call expect_version(2)
    call resurgo_restart(store, 1, restored=v, ierr=ierr)
    call check_ok(ierr, 'resurgo_restart 1')
    call check(v == 1, 'restart of version 1 read another one')
    call expect_version(1)
  end subroutine restore_versions

end program test_mpi
