! A TeaLeaf-like heat conduction mini-app in Fortran, checkpointed by the
! automatic runtime (module resurgo_auto, docs/auto_fortran.md). Each time
! step solves the implicit heat equation (I - dt div K grad) u = u0 by Jacobi
! iterations until the queried change falls below a tolerance: the number of
! iterations, hence the loop sequence, depends on values the loops compute.
!
!   jacobi_heat MODE NX NY STEPS CHECKPOINT_STEP KILL_STEP OUTPUT
!
! Every mode calls initphase_done() after the initialisation (a restarted
! run executes it again, and kappa, which only it writes, is never saved).
! MODE initphase: nothing more: the runtime finds where the checkpoint
!      starts (asked for after the first loop of step CHECKPOINT_STEP) and a
!      restarted run replays to it;
!      fastfw: fastfw() at the top of each step, with the step and the time as
!      payload (checkpoint asked for right before it in step CHECKPOINT_STEP);
!      datlist: the same with datlist() of u, the only dataset a step needs.
! CHECKPOINT_STEP -1: none. KILL_STEP: at the top of that step (or the first
! later one where the checkpoint is taken) the run waits until it is durable
! at L2 and kills itself with SIGKILL; -1: never. OUTPUT receives u (halo
! included) and the final total heat, raw float64, at the end of the run.
! The store is "jacobi_heat" (RESURGO_LOCAL_PATH and the other RESURGO_*
! variables configure it); a run that finds a checkpoint in it restores.
!
! Prints RESULT {"steps", "iterations" (executed, not replayed),
! "restored_from", "skipped_loops", "fast_forward"}.
program jacobi_heat
  use, intrinsic :: iso_c_binding, only: c_int, c_double, c_loc, c_sizeof
  use, intrinsic :: iso_fortran_env, only: real64, int64, output_unit, error_unit
  use resurgo
  use resurgo_auto
  implicit none

  interface
    function c_raise(signal) bind(C, name="raise") result(rc)
      import :: c_int
      integer(c_int), value :: signal
      integer(c_int) :: rc
    end function c_raise
  end interface

  integer(c_int), parameter :: sigkill = 9
  integer, parameter :: max_iterations = 40
  real(real64), parameter :: tolerance = 1.0e-6_real64, dt = 0.4_real64

  ! The fastfw/datlist payload: where the run is.
  type, bind(C) :: position
    integer(c_int) :: step
    real(c_double) :: time
  end type position

  character(len=16) :: mode
  character(len=4096) :: output
  integer :: nx, ny, steps, checkpoint_step, kill_step, iterations
  ! The datasets; TARGET: the runtime keeps their addresses. kappa is the
  ! conductivity (written by the initialisation only), u the temperature,
  ! u0 the temperature at the start of the step, un the previous iterate.
  real(real64), allocatable, target :: kappa(:, :), u(:, :), u0(:, :), un(:, :)
  integer :: kappa_id, u_id, u0_id, un_id
  type(position), target :: at
  type(resurgo_store) :: store
  type(resurgo_auto_runtime) :: rt
  type(rsg_auto_options) :: options
  type(rsg_auto_restore_report) :: restore
  real(real64) :: heat

  call read_arguments()
  allocate(kappa(0:nx + 1, 0:ny + 1), u(0:nx + 1, 0:ny + 1), u0(0:nx + 1, 0:ny + 1), un(0:nx + 1, 0:ny + 1))

  ! No ierr arguments: a failure prints its cause and stops the program.
  call resurgo_open('jacobi_heat', store)
  call resurgo_auto_options_init(options)
  options%diagnostics = 1  ! a line per checkpoint and restore, on standard error
  call resurgo_auto_attach(store, rt, options=options)
  call resurgo_auto_dataset(rt, 'kappa', kappa, kappa_id, halo=1)
  call resurgo_auto_dataset(rt, 'u', u, u_id, halo=1)
  call resurgo_auto_dataset(rt, 'u0', u0, u0_id, halo=1)
  call resurgo_auto_dataset(rt, 'un', un, un_id, halo=1)

  call initialise()
  call resurgo_auto_initphase_done(rt)

  iterations = 0
  at = position(1, 0)
  do while (at%step <= steps)
    call step_begins()
    call time_step()
    at = position(at%step + 1, at%time + dt)
  end do
  heat = total_heat()

  call resurgo_auto_last_restore(rt, restore)
  call resurgo_auto_detach(rt)
  call resurgo_close(store)
  call write_output()
  write(output_unit, '(a, i0, a, i0, a, i0, a, i0, a, i0, a)') 'RESULT {"steps": ', steps, &
    ', "iterations": ', iterations, ', "restored_from": ', restore%version, &
    ', "skipped_loops": ', restore%skipped_loops, ', "fast_forward": ', restore%fast_forward, '}'

contains

  ! kappa: a conductive block in a poor conductor; u: a hot spot. The halo
  ! rings are set here too and kappa's never changes.
  subroutine initialise()
    integer :: i, j
    logical :: run
    call resurgo_auto_loop(rt, 'generate', [resurgo_auto_arg(kappa_id, RSG_AUTO_WRITE), &
                           resurgo_auto_arg(u_id, RSG_AUTO_WRITE), resurgo_auto_arg(u0_id, RSG_AUTO_WRITE), &
                           resurgo_auto_arg(un_id, RSG_AUTO_WRITE)], run)
    if (.not. run) return
    do j = 0, ny + 1
      do i = 0, nx + 1
        kappa(i, j) = merge(1.0_real64, 0.05_real64, i > nx / 4 .and. i < 3 * nx / 4 .and. j > ny / 3)
        u(i, j) = merge(10.0_real64, 0.1_real64, (i - nx / 3)**2 + (j - ny / 2)**2 <= (nx / 8)**2)
      end do
    end do
    u0 = u
    un = u
  end subroutine initialise

  ! The top of a step: the kill point, the checkpoint request and the named
  ! location of the fastfw and datlist modes (which, in a restarted run,
  ! restore `at` and the datasets).
  subroutine step_begins()
    logical :: restored, restoring
    type(rsg_auto_checkpoint_report) :: taken
    if (kill_step >= 0 .and. at%step >= kill_step) then
      call resurgo_auto_last_checkpoint(rt, taken)
      if (taken%version >= 0 .or. checkpoint_step < 0) call die_when_durable()
    end if
    call resurgo_auto_restoring(rt, restoring)
    if (at%step == checkpoint_step .and. .not. restoring .and. trim(mode) /= 'initphase') then
      call resurgo_auto_trigger(rt)
    end if
    if (trim(mode) == 'fastfw') then
      call resurgo_auto_fastfw(rt, restored, payload=c_loc(at), bytes=c_sizeof(at))
    else if (trim(mode) == 'datlist') then
      call resurgo_auto_datlist(rt, [u_id], restored, payload=c_loc(at), bytes=c_sizeof(at))
    end if
  end subroutine step_begins

  ! One backward-Euler step by Jacobi iterations; every loop declares what
  ! it reads and writes, and the control flow reads only queried values.
  subroutine time_step()
    integer :: iteration
    real(real64) :: change
    logical :: run, restoring
    call resurgo_auto_loop(rt, 'save_u0', [resurgo_auto_arg(u_id, RSG_AUTO_READ, RSG_AUTO_INTERIOR), &
                           resurgo_auto_arg(u0_id, RSG_AUTO_WRITE, RSG_AUTO_INTERIOR)], run)
    if (run) u0(1:nx, 1:ny) = u(1:nx, 1:ny)
    call resurgo_auto_restoring(rt, restoring)
    if (at%step == checkpoint_step .and. .not. restoring .and. trim(mode) == 'initphase') then
      call resurgo_auto_trigger(rt)  ! the runtime chooses where the checkpoint starts
    end if
    do iteration = 1, max_iterations
      call resurgo_auto_loop(rt, 'halo_u', [resurgo_auto_arg(u_id, RSG_AUTO_READ, RSG_AUTO_INTERIOR), &
                             resurgo_auto_arg(u_id, RSG_AUTO_WRITE, RSG_AUTO_HALO)], run)
      if (run) call reflect(u)
      call resurgo_auto_loop(rt, 'copy_un', [resurgo_auto_arg(u_id, RSG_AUTO_READ), &
                             resurgo_auto_arg(un_id, RSG_AUTO_WRITE)], run)
      if (run) un = u
      call resurgo_auto_loop(rt, 'jacobi', [resurgo_auto_arg(un_id, RSG_AUTO_READ), &
                             resurgo_auto_arg(u0_id, RSG_AUTO_READ, RSG_AUTO_INTERIOR), &
                             resurgo_auto_arg(kappa_id, RSG_AUTO_READ), &
                             resurgo_auto_arg(u_id, RSG_AUTO_WRITE, RSG_AUTO_INTERIOR)], run)
      if (run) call jacobi()
      call resurgo_auto_loop(rt, 'change', [resurgo_auto_arg(u_id, RSG_AUTO_READ, RSG_AUTO_INTERIOR), &
                             resurgo_auto_arg(un_id, RSG_AUTO_READ, RSG_AUTO_INTERIOR)], run)
      change = 0
      if (run) then
        change = maxval(abs(u(1:nx, 1:ny) - un(1:nx, 1:ny)))
        iterations = iterations + 1
      end if
      call resurgo_auto_query(rt, change)  ! a replaying run gets the logged value
      if (change < tolerance) exit
    end do
  end subroutine time_step

  ! Zero flux at the borders: the ring mirrors the edge.
  subroutine reflect(field)
    real(real64), intent(inout) :: field(0:, 0:)
    field(0, 1:ny) = field(1, 1:ny)
    field(nx + 1, 1:ny) = field(nx, 1:ny)
    field(:, 0) = field(:, 1)
    field(:, ny + 1) = field(:, ny)
  end subroutine reflect

  ! u = (u0 + dt sum_faces k_f un_f) / (1 + dt sum_faces k_f), k_f the mean
  ! conductivity of the two cells of a face.
  subroutine jacobi()
    integer :: i, j
    real(real64) :: ke, kw, kn, ks
    do j = 1, ny
      do i = 1, nx
        ke = 0.5_real64 * (kappa(i, j) + kappa(i + 1, j))
        kw = 0.5_real64 * (kappa(i, j) + kappa(i - 1, j))
        kn = 0.5_real64 * (kappa(i, j) + kappa(i, j + 1))
        ks = 0.5_real64 * (kappa(i, j) + kappa(i, j - 1))
        u(i, j) = (u0(i, j) + dt * (ke * un(i + 1, j) + kw * un(i - 1, j) + kn * un(i, j + 1) &
                                    + ks * un(i, j - 1))) / (1 + dt * (ke + kw + kn + ks))
      end do
    end do
  end subroutine jacobi

  ! The field summary: a reduction, so a query.
  real(real64) function total_heat() result(sum_u)
    logical :: run
    call resurgo_auto_loop(rt, 'field_summary', [resurgo_auto_arg(u_id, RSG_AUTO_READ, RSG_AUTO_INTERIOR)], run)
    sum_u = 0
    if (run) sum_u = sum(u(1:nx, 1:ny))
    call resurgo_auto_query(rt, sum_u)
  end function total_heat

  ! The checkpoint must be on L2, where the restarted run looks, before the
  ! process dies as a crash would.
  subroutine die_when_durable()
    integer(c_int) :: rc
    call resurgo_wait(store, level=RSG_L2)
    flush(output_unit)
    flush(error_unit)
    rc = c_raise(sigkill)
    error stop 'jacobi_heat: raise(SIGKILL) returned'
  end subroutine die_when_durable

  subroutine write_output()
    integer :: unit
    open(newunit=unit, file=trim(output), access='stream', form='unformatted', status='replace', &
         action='write')
    write(unit) u, heat
    close(unit)
  end subroutine write_output

  subroutine read_arguments()
    if (command_argument_count() /= 7) then
      write(error_unit, '(a)') 'usage: jacobi_heat initphase|fastfw|datlist NX NY STEPS CHECKPOINT_STEP ' // &
                               'KILL_STEP OUTPUT'
      error stop 2
    end if
    call get_command_argument(1, mode)
    if (trim(mode) /= 'initphase' .and. trim(mode) /= 'fastfw' .and. trim(mode) /= 'datlist') then
      write(error_unit, '(a, a)') 'jacobi_heat: unknown mode ', trim(mode)
      error stop 2
    end if
    nx = int_argument(2)
    ny = int_argument(3)
    steps = int_argument(4)
    checkpoint_step = int_argument(5)
    kill_step = int_argument(6)
    call get_command_argument(7, output)
  end subroutine read_arguments

  integer function int_argument(n)
    integer, intent(in) :: n
    character(len=32) :: text
    integer :: ios
    call get_command_argument(n, text)
    read(text, *, iostat=ios) int_argument
    if (ios /= 0) then
      write(error_unit, '(a, i0, a, a)') 'jacobi_heat: argument ', n, ' is not an integer: ', trim(text)
      error stop 2
    end if
  end function int_argument

end program jacobi_heat
