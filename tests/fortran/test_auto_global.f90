! Module resurgo_auto's blocks of global arrays (resurgo_auto_dataset's
! global_shape= and offset=) in an MPI job: a checkpoint taken on P ranks
! restarts on Q ranks. Run under mpirun (tests/fortran/CMakeLists.txt):
!
!   test_auto_global checkpoint   in fresh directories, on 2 ranks: runs every
!                                 step, a checkpoint at step 3 (on L4)
!   test_auto_global overlap      on 3 ranks, the last rank's block a column
!                                 early: every rank's restore is refused with
!                                 RSG_EMISMATCH naming the overlap
!   test_auto_global restart      on 3 ranks: restores the version of 2 ranks
!                                 by replay and ends with every bit of the
!                                 uninterrupted run's global field
!
! The global field G(nx, ny) is cut along its last Fortran axis (its first
! row-major one): rank r holds columns first+1 .. first+cols. Each step adds
! 1 to every element (a loop that reads and writes the field) and queries
! the field's global sum, integer-valued and so exact in any order.
program test_auto_global
  use, intrinsic :: iso_fortran_env, only: real64, int32, int64
  use mpi
  use resurgo
  use resurgo_auto
  use test_checks, only: check, check_ok
  implicit none

  integer, parameter :: nx = 6, ny = 12, steps = 6, checkpoint_step = 3
  real(real64), allocatable, target :: u(:, :)
  integer(int32), allocatable, target :: cell(:, :)
  type(resurgo_store) :: store
  type(resurgo_auto_runtime) :: rt
  type(rsg_auto_options), target :: options
  integer :: ierr, me, ranks, first, cols, u_id, cell_id
  character(len=16) :: mode

  call MPI_Init(ierr)
  call MPI_Comm_rank(MPI_COMM_WORLD, me, ierr)
  call MPI_Comm_size(MPI_COMM_WORLD, ranks, ierr)
  call get_command_argument(1, mode)
  first = me * (ny / ranks) + min(me, mod(ny, ranks))
  cols = ny / ranks
  if (me < mod(ny, ranks)) cols = cols + 1
  allocate(u(nx, cols), cell(nx, cols))

  call resurgo_open_mpi('fortran-auto-global', MPI_COMM_WORLD, store, ierr)
  call check_ok(ierr, 'resurgo_open_mpi')
  call resurgo_auto_options_init(options)
  options%agreement_loops = 2  ! every step: a run of 13 loops meets rank 0's request
  call resurgo_auto_attach(store, rt, ierr, options)
  call check_ok(ierr, 'resurgo_auto_attach')

  select case (trim(mode))
  case ('checkpoint')
    call refuse_bad_declarations()
    call declare(first)
    call run_steps()
    call expect_field()
    call resurgo_wait(store, ierr, level=RSG_L4)
    call check_ok(ierr, 'resurgo_wait L4')
  case ('overlap')
    if (me == ranks - 1) then
      call declare(first - 1)
    else
      call declare(first)
    end if
    call expect_refused_restore()
  case ('restart')
    call declare(first)
    call run_steps()
    call expect_restored()
  case default
    call check(.false., 'usage: test_auto_global checkpoint|overlap|restart')
  end select

  call resurgo_auto_detach(rt, ierr)
  if (trim(mode) /= 'overlap') call check_ok(ierr, 'resurgo_auto_detach')
  call resurgo_close(store, ierr)
  if (trim(mode) /= 'overlap') call check_ok(ierr, 'resurgo_close')
  call MPI_Finalize(ierr)

contains

  ! G(i, j) after s steps: different for every element, exact.
  pure real(real64) function expected(i, j, s)
    integer, intent(in) :: i, j, s
    expected = real(100 * j + i + s, real64)
  end function expected

  ! u and cell as this rank's columns [offset, offset + cols) of the
  ! global nx x ny arrays, in Fortran's axis order.
  subroutine declare(offset)
    integer, intent(in) :: offset
    u = -1
    cell = -1
    call resurgo_auto_dataset(rt, 'u', u, u_id, ierr, global_shape=[nx, ny], offset=[0, offset])
    call check_ok(ierr, 'resurgo_auto_dataset u')
    call resurgo_auto_dataset(rt, 'cell', cell, cell_id, ierr, global_shape=[nx, ny], offset=[0, offset])
    call check_ok(ierr, 'resurgo_auto_dataset cell')
  end subroutine declare

  ! The wrapper's refusals, each naming the dataset, none declaring
  ! anything: a global shape of the wrong rank, an offset without
  ! global_shape, a halo with a global block.
  subroutine refuse_bad_declarations()
    real(real64), target :: spare(2, 2)
    integer :: id
    call resurgo_auto_dataset(rt, 'spare', spare, id, ierr, global_shape=[4], offset=[0])
    call check(ierr == RSG_EINVAL .and. id == -1, 'a global shape of the wrong rank was accepted')
    call check(index(resurgo_last_error(), "dataset 'spare': global_shape and offset need one entry per axis") &
               > 0, 'unexpected message: ' // resurgo_last_error())
    call resurgo_auto_dataset(rt, 'spare', spare, id, ierr, offset=[0, 0])
    call check(ierr == RSG_EINVAL, 'an offset without global_shape was accepted')
    call check(index(resurgo_last_error(), "needs both global_shape and offset") > 0, &
               'unexpected message: ' // resurgo_last_error())
    call resurgo_auto_dataset(rt, 'spare', spare, id, ierr, halo=1, global_shape=[4, 4], offset=[0, 0])
    call check(ierr == RSG_EINVAL .and. id == -1, 'a halo with a global block was accepted')
    call check(index(resurgo_last_error(), "dataset 'spare' as a block of a global array: a dataset with a halo " // &
                     "cannot be one") > 0, 'unexpected message: ' // resurgo_last_error())
  end subroutine refuse_bad_declarations

  ! The initialisation loop, then `steps` steps; rank 0 alone asks for the
  ! checkpoint (the agreement tells the others). While replaying, the loops
  ! do not run and the queries return the logged sums.
  subroutine run_steps()
    logical :: run, restoring
    integer :: step, i, j
    real(real64) :: mine, total
    call resurgo_auto_loop(rt, 'init', [resurgo_auto_arg(u_id, RSG_AUTO_WRITE), &
                                        resurgo_auto_arg(cell_id, RSG_AUTO_WRITE)], run)
    if (run) then
      do j = 1, cols
        do i = 1, nx
          u(i, j) = expected(i, first + j, 0)
          cell(i, j) = 100 * (first + j) + i
        end do
      end do
    end if
    call resurgo_auto_initphase_done(rt)
    do step = 1, steps
      call resurgo_auto_restoring(rt, restoring)
      if (me == 0 .and. step == checkpoint_step .and. .not. restoring) call resurgo_auto_trigger(rt)
      call resurgo_auto_loop(rt, 'add_one', [resurgo_auto_arg(u_id, RSG_AUTO_READ_WRITE), &
                                             resurgo_auto_arg(cell_id, RSG_AUTO_READ)], run)
      if (run) u = u + 1
      total = 0
      call resurgo_auto_loop(rt, 'sum', [resurgo_auto_arg(u_id, RSG_AUTO_READ)], run)
      if (run) then
        mine = sum(u)
        call MPI_Allreduce(mine, total, 1, MPI_DOUBLE_PRECISION, MPI_SUM, MPI_COMM_WORLD, ierr)
      end if
      call resurgo_auto_query(rt, total)
      call check(total == real(nx * ny, real64) * (100 * (ny + 1) / 2.0_real64 + (nx + 1) / 2.0_real64 + step), &
                 'the queried sum is not the global field''s')
    end do
  end subroutine run_steps

  ! The restart: a version of 2 ranks restored by replay, then the field
  ! as the uninterrupted run ends it.
  subroutine expect_restored()
    type(rsg_auto_restore_report) :: report
    call resurgo_auto_last_restore(rt, report, ierr)
    call check_ok(ierr, 'resurgo_auto_last_restore')
    call check(report%version >= 0, 'the restart restored nothing')
    call check(report%ranks == 2 .and. report%ranks /= ranks, 'the version restored was not written by 2 ranks')
    call check(report%skipped_loops > 0, 'the restart replayed no loop')
    call expect_field()
  end subroutine expect_restored

  ! Every element of this rank's block bit for bit; after a restart the
  ! cell numbers can only come from the checkpoint (the init loop did not run).
  subroutine expect_field()
    integer :: i, j
    do j = 1, cols
      do i = 1, nx
        call check(transfer(u(i, j), 0_int64) == transfer(expected(i, first + j, steps), 0_int64), &
                   'an element of the restarted field differs from the uninterrupted run')
        call check(cell(i, j) == 100 * (first + j) + i, 'a cell number was not restored')
      end do
    end do
  end subroutine expect_field

  ! The overlapping blocks: replaying towards the checkpoint, the call that
  ! reaches it fails on every rank with RSG_EMISMATCH naming the overlap,
  ! before anything is read or written.
  subroutine expect_refused_restore()
    logical :: run
    integer :: step
    real(real64) :: total
    call resurgo_auto_loop(rt, 'init', [resurgo_auto_arg(u_id, RSG_AUTO_WRITE), &
                                        resurgo_auto_arg(cell_id, RSG_AUTO_WRITE)], run, ierr)
    if (ierr == RSG_OK) call resurgo_auto_initphase_done(rt, ierr)
    total = 0
    do step = 1, steps
      if (ierr /= RSG_OK) exit
      call resurgo_auto_loop(rt, 'add_one', [resurgo_auto_arg(u_id, RSG_AUTO_READ_WRITE), &
                                             resurgo_auto_arg(cell_id, RSG_AUTO_READ)], run, ierr)
      if (ierr == RSG_OK) call resurgo_auto_loop(rt, 'sum', [resurgo_auto_arg(u_id, RSG_AUTO_READ)], run, ierr)
      if (ierr == RSG_OK) call resurgo_auto_query(rt, total, ierr)
    end do
    call check(ierr == RSG_EMISMATCH, 'overlapping blocks were not refused at the restore')
    call check(index(resurgo_last_error(), "restore of version") > 0 .and. &
               index(resurgo_last_error(), "the ranks' blocks do not tile the global arrays") > 0 .and. &
               index(resurgo_last_error(), "overlap") > 0, 'unexpected message: ' // resurgo_last_error())
    call check(all(u == -1), 'a refused restore wrote into the field')
  end subroutine expect_refused_restore

end program test_auto_global
