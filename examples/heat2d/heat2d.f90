! heat2d in Fortran: the loop of heat2d.cpp with the Fortran module.
!
!   heat2d_f90 NX NY STEPS EVERY STORE [OUTPUT [STOP_AFTER]]
!
! OUTPUT "-" (or absent) writes no file; STOP_AFTER is the number of steps
! to compute in this run before exiting (-1 or absent: all). Run again, it
! restarts from the newest intact version. The output is raw float64, u(i, j)
! with i fastest: the same bytes as heat2d.cpp writes.
program heat2d
  use, intrinsic :: iso_fortran_env, only: real64, int64, output_unit, error_unit
  use resurgo
  implicit none

  real(real64), parameter :: alpha = 0.2_real64  ! explicit Euler is stable up to 0.25
  integer :: nx, ny, steps, every, stop_after, computed, checkpoints, restarted_from
  integer :: i, j, r, unit
  character(len=256) :: store_name, output
  ! TARGET: the store keeps the addresses of both until it is closed.
  real(real64), allocatable, target :: u(:, :)
  integer(int64), target :: step_no
  type(resurgo_store) :: store
  integer(int64) :: t0, t1, rate
  real(real64) :: wall, restart_seconds

  if (command_argument_count() < 5) then
    write(error_unit, '(a)') 'usage: heat2d_f90 NX NY STEPS EVERY STORE [OUTPUT [STOP_AFTER]]'
    error stop 2
  end if
  nx = int_arg(1)
  ny = int_arg(2)
  steps = int_arg(3)
  every = int_arg(4)
  call get_command_argument(5, store_name)
  output = '-'
  if (command_argument_count() >= 6) call get_command_argument(6, output)
  stop_after = -1
  if (command_argument_count() >= 7) stop_after = int_arg(7)

  ! Hot disc of radius min(nx, ny)/8 at the centre (0-based indices as in C++).
  allocate(u(0:nx - 1, 0:ny - 1))
  r = min(nx, ny) / 8
  do j = 0, ny - 1
    do i = 0, nx - 1
      u(i, j) = merge(1.0_real64, 0.0_real64, &
                      (i - nx / 2)**2 + (j - ny / 2)**2 <= r * r)
    end do
  end do
  step_no = 0

  ! No ierr arguments: any failure prints the cause and stops the program.
  call resurgo_open(trim(store_name), store)
  call resurgo_protect(store, 0, u, 'field')
  call resurgo_protect(store, 1, step_no, 'step')
  restarted_from = -1
  restart_seconds = 0
  call resurgo_latest(store, j)
  if (j >= 0) then
    call system_clock(t0, rate)
    call resurgo_restart(store, restored=restarted_from)  ! the newest intact version
    call system_clock(t1)
    restart_seconds = real(t1 - t0, real64) / real(rate, real64)
    if (step_no /= restarted_from) error stop 'restored step does not match the version'
  end if

  computed = 0
  checkpoints = 0
  call system_clock(t0, rate)
  do while (step_no < steps .and. computed /= stop_after)
    ! In place: the right-hand side is evaluated before the assignment, and
    ! the field never moves. Parentheses fix the summation order of heat2d.cpp.
    u(1:nx - 2, 1:ny - 2) = u(1:nx - 2, 1:ny - 2) + alpha * &
      ((((u(0:nx - 3, 1:ny - 2) + u(2:nx - 1, 1:ny - 2)) + u(1:nx - 2, 0:ny - 3)) &
        + u(1:nx - 2, 2:ny - 1)) - 4.0_real64 * u(1:nx - 2, 1:ny - 2))
    step_no = step_no + 1
    computed = computed + 1
    if (mod(step_no, int(every, int64)) == 0) then
      call resurgo_checkpoint(store, int(step_no))  ! the version is the step
      checkpoints = checkpoints + 1
      write(output_unit, '(a, i0)') 'checkpoint ', step_no
      flush(output_unit)
    end if
  end do
  call resurgo_wait(store)
  call system_clock(t1)
  wall = real(t1 - t0, real64) / real(rate, real64)
  call resurgo_close(store)

  if (trim(output) /= '-' .and. step_no == steps) then
    open(newunit=unit, file=trim(output), access='stream', form='unformatted', &
         status='replace', action='write')
    write(unit) u
    close(unit)
  end if
  write(output_unit, '(a, i0, a, i0, a, i0, a, i0, a, a, a, a, a)') &
    'RESULT {"steps": ', step_no, ', "steps_run": ', computed, ', "checkpoints": ', &
    checkpoints, ', "restarted_from": ', restarted_from, ', "wall_seconds": ', json(wall), &
    ', "restart_seconds": ', json(restart_seconds), '}'

contains

  ! A number as JSON wants it (f0.6 would drop the leading zero of 0.5).
  function json(x) result(text)
    real(real64), intent(in) :: x
    character(len=:), allocatable :: text
    character(len=32) :: buf
    write(buf, '(f32.6)') x
    text = trim(adjustl(buf))
  end function json

  integer function int_arg(n)
    integer, intent(in) :: n
    character(len=32) :: text
    integer :: ios
    call get_command_argument(n, text)
    read(text, *, iostat=ios) int_arg
    if (ios /= 0) then
      write(error_unit, '(a, i0, a, a)') 'heat2d_f90: argument ', n, ' is not an integer: ', &
        trim(text)
      error stop 2
    end if
  end function int_arg

end program heat2d
