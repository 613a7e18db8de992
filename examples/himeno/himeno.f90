! The Himeno benchmark (3-D Jacobi for the Poisson equation, the Appicpr
! slides' case) with Appicpr's incremental checkpoints.
!
!   himeno NX NY NZ SWEEPS S N PATH [OUTPUT [STOP_AFTER]]
!
! Each sweep computes the new pressure into wrk2 and the residual gosa, then
! copies wrk2 into p slice by slice (k), S slices at a time. In every N-th
! sweep a checkpoint is taken after each range of S slices is updated (the
! slides: "checkpoint is taken when a whole slice is updated"), so that the
! checkpoints of a sweep after its first hold only the slices just updated.
! A checkpoint is one appic_open / register / write / close cycle of the
! store PATH; started again, the program reads the newest version back and
! resumes at the slice where it was taken. N = 0 takes no checkpoint.
!
! OUTPUT ("-" or absent: none) receives p and then gosa, raw real32, when the
! run ends. STOP_AFTER stops the program (without output) after that many
! slice ranges updated by this run, as a failure would; -1 or absent: none.
program himeno
  use, intrinsic :: iso_fortran_env, only: real32, real64, int32, int64, output_unit, error_unit
  use resurgo
  implicit none

  real(real32), parameter :: omega = 0.8_real32
  integer :: imax, jmax, kmax, sweeps, slices_per_range, every, stop_after
  integer :: interior, ranges_run, checkpoints, restarted_from, ierr, unit
  logical :: stopped
  real(real64) :: started, run_seconds, checkpoint_seconds
  character(len=4096) :: path, output
  ! Coefficients: computed again by a restarted run, never checkpointed.
  real(real32), allocatable :: a(:, :, :, :), b(:, :, :, :), c(:, :, :, :)
  real(real32), allocatable :: bnd(:, :, :), wrk1(:, :, :)
  ! The checkpointed state. TARGET: the store keeps their addresses.
  real(real32), allocatable, target :: p(:, :, :), wrk2(:, :, :)
  ! position(1): sweeps completed; position(2): slices of the next sweep
  ! already copied into p (0: its wrk2 and gosa are not computed yet).
  integer(int32), target :: position(2)
  real(real32), target :: gosa

  call read_arguments()
  interior = kmax - 2
  call init_arrays()
  position = 0
  gosa = 0
  restarted_from = -1
  call restore()

  ranges_run = 0
  checkpoints = 0
  checkpoint_seconds = 0
  stopped = .false.
  started = seconds_now()
  sweep_loop: do while (position(1) < sweeps)
    if (position(2) == 0) call jacobi()
    call update_pressure()
    if (stopped) exit sweep_loop
  end do sweep_loop
  run_seconds = seconds_now() - started
  call appic_finalize()

  if (.not. stopped) then
    write(output_unit, '(a, es16.9)') 'gosa ', gosa
    if (trim(output) /= '-') then
      open(newunit=unit, file=trim(output), access='stream', form='unformatted', &
           status='replace', action='write')
      write(unit) p, gosa
      close(unit)
    end if
  end if
  write(output_unit, '(a, i0, a, i0, a, i0, a, i0, a, i0, a, i0, a, es15.8, a, es15.8, a)') &
    'RESULT {"sweeps": ', position(1), ', "slice": ', position(2), ', "ranges_run": ', ranges_run, &
    ', "checkpoints": ', checkpoints, ', "restarted_from": ', restarted_from, &
    ', "stopped": ', merge(1, 0, stopped), ', "run_seconds": ', run_seconds, &
    ', "checkpoint_seconds": ', checkpoint_seconds, '}'

contains

  ! Himeno's kernel: the new pressure of every interior point into wrk2,
  ! the sum of squared residuals into gosa.
  subroutine jacobi()
    integer :: i, j, k
    real(real32) :: s0, ss
    gosa = 0
    do k = 2, kmax - 1
      do j = 2, jmax - 1
        do i = 2, imax - 1
          s0 = a(i, j, k, 1) * p(i + 1, j, k) + a(i, j, k, 2) * p(i, j + 1, k) &
             + a(i, j, k, 3) * p(i, j, k + 1) &
             + b(i, j, k, 1) * (p(i + 1, j + 1, k) - p(i + 1, j - 1, k) &
                                - p(i - 1, j + 1, k) + p(i - 1, j - 1, k)) &
             + b(i, j, k, 2) * (p(i, j + 1, k + 1) - p(i, j - 1, k + 1) &
                                - p(i, j + 1, k - 1) + p(i, j - 1, k - 1)) &
             + b(i, j, k, 3) * (p(i + 1, j, k + 1) - p(i - 1, j, k + 1) &
                                - p(i + 1, j, k - 1) + p(i - 1, j, k - 1)) &
             + c(i, j, k, 1) * p(i - 1, j, k) + c(i, j, k, 2) * p(i, j - 1, k) &
             + c(i, j, k, 3) * p(i, j, k - 1) + wrk1(i, j, k)
          ss = (s0 * a(i, j, k, 4) - p(i, j, k)) * bnd(i, j, k)
          gosa = gosa + ss * ss
          wrk2(i, j, k) = p(i, j, k) + omega * ss
        end do
      end do
    end do
  end subroutine jacobi

  ! Copies wrk2 into p, S slices at a time from position(2) on, with a
  ! checkpoint after each range in every N-th sweep.
  subroutine update_pressure()
    integer :: k0, k1
    logical :: checkpointing
    checkpointing = every > 0 .and. mod(position(1) + 1, max(every, 1)) == 0
    do
      k0 = 2 + position(2)
      k1 = min(k0 + slices_per_range - 1, kmax - 1)
      p(2:imax - 1, 2:jmax - 1, k0:k1) = wrk2(2:imax - 1, 2:jmax - 1, k0:k1)
      if (k1 == kmax - 1) then
        position = [position(1) + 1, 0]
      else
        position(2) = k1 - 1
      end if
      if (checkpointing) call checkpoint()
      ranges_run = ranges_run + 1
      stopped = ranges_run == stop_after
      if (stopped .or. position(2) == 0) return
    end do
  end subroutine update_pressure

  ! The slides' cycle: like a Fortran OPEN / WRITE / CLOSE of the state.
  subroutine checkpoint()
    real(real64) :: cycle_started
    cycle_started = seconds_now()
    call appic_open(trim(path))
    call register_state()
    call appic_write(p)
    call appic_write(wrk2)
    call appic_write(position)
    call appic_write(gosa)
    call appic_close()
    checkpoints = checkpoints + 1
    checkpoint_seconds = checkpoint_seconds + (seconds_now() - cycle_started)
  end subroutine checkpoint

  ! Wall-clock seconds from an arbitrary origin.
  real(real64) function seconds_now()
    integer(int64) :: count, rate
    call system_clock(count, rate)
    seconds_now = real(count, real64) / real(rate, real64)
  end function seconds_now

  ! Registering again in a later cycle is a no-op.
  subroutine register_state()
    call appic_register(p, sizeof(p))
    call appic_register(wrk2, sizeof(wrk2))
    call appic_register(position, sizeof(position))
    call appic_register(gosa, sizeof(gosa))
  end subroutine register_state

  ! Reads the newest checkpoint back, if there is one.
  subroutine restore()
    call appic_open(trim(path))
    call register_state()
    call appic_read(p, ierr)
    if (ierr == RSG_OK) then
      call appic_version(restarted_from)
      write(output_unit, '(a, i0, a, i0, a, i0)') 'restarted from version ', restarted_from, &
        ': sweep ', position(1) + 1, ', slice ', position(2) + 2
    else if (ierr /= RSG_ENOTFOUND) then
      write(error_unit, '(a, i0, a, a)') 'himeno: reading the checkpoint failed (', ierr, '): ', &
        resurgo_last_error()
      error stop 1
    end if
    call appic_close()
  end subroutine restore

  ! Himeno's initmt.
  subroutine init_arrays()
    integer :: k
    allocate(a(imax, jmax, kmax, 4), b(imax, jmax, kmax, 3), c(imax, jmax, kmax, 3), &
             bnd(imax, jmax, kmax), wrk1(imax, jmax, kmax), p(imax, jmax, kmax), &
             wrk2(imax, jmax, kmax))
    a(:, :, :, 1:3) = 1
    a(:, :, :, 4) = 1 / 6.0_real32
    b = 0
    c = 1
    bnd = 1
    wrk1 = 0
    wrk2 = 0
    do k = 1, kmax
      p(:, :, k) = real((k - 1) * (k - 1), real32) / real((kmax - 1) * (kmax - 1), real32)
    end do
  end subroutine init_arrays

  subroutine read_arguments()
    if (command_argument_count() < 7) then
      write(error_unit, '(a)') 'usage: himeno NX NY NZ SWEEPS S N PATH [OUTPUT [STOP_AFTER]]'
      error stop 2
    end if
    imax = int_arg(1)
    jmax = int_arg(2)
    kmax = int_arg(3)
    sweeps = int_arg(4)
    slices_per_range = int_arg(5)
    every = int_arg(6)
    call get_command_argument(7, path)
    output = '-'
    if (command_argument_count() >= 8) call get_command_argument(8, output)
    stop_after = -1
    if (command_argument_count() >= 9) stop_after = int_arg(9)
    if (min(imax, jmax, kmax) < 3 .or. sweeps < 0 .or. slices_per_range < 1 .or. every < 0) then
      write(error_unit, '(a)') 'himeno: NX, NY, NZ >= 3, SWEEPS >= 0, S >= 1 and N >= 0 ' // &
                               'are required'
      error stop 2
    end if
  end subroutine read_arguments

  integer function int_arg(n)
    integer, intent(in) :: n
    character(len=32) :: text
    integer :: ios
    call get_command_argument(n, text)
    read(text, *, iostat=ios) int_arg
    if (ios /= 0) then
      write(error_unit, '(a, i0, a, a)') 'himeno: argument ', n, ' is not an integer: ', trim(text)
      error stop 2
    end if
  end function int_arg

end program himeno
