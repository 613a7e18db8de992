! Test of module resurgo_auto (the automatic-checkpointing runtime from
! Fortran): the bind(C) types against resurgo/auto.h (auto_struct_layout.c),
! bad input (ierr and resurgo_last_error naming the cause), and a small heat
! solver run three ways, each twice on its own store: a first run takes one
! checkpoint (replay with initphase_done; fastfw; datlist), a second attaches
! to the same store, restores, and must end with the first run's bytes and
! queried values. Then a replay that queries another size is RSG_EMISMATCH.
! RESURGO_LOCAL_PATH points into a fresh directory (set by CTest).

! The report callback: counts the diagnostic lines and keeps the last one.
module test_auto_reports
  use, intrinsic :: iso_c_binding, only: c_ptr
  use resurgo_auto, only: resurgo_auto_line
  implicit none
  private
  public :: on_report, report_lines, last_report

  integer :: report_lines = 0
  character(len=:), allocatable :: last_report

contains

  subroutine on_report(line, context) bind(C)
    type(c_ptr), value :: line, context
    report_lines = report_lines + 1
    last_report = resurgo_auto_line(line)
  end subroutine on_report

end module test_auto_reports

program test_auto
  use, intrinsic :: iso_c_binding
  use, intrinsic :: iso_fortran_env, only: real32, real64, int32, int64
  use resurgo
  use resurgo_auto
  use test_auto_reports, only: on_report, report_lines, last_report
  use test_checks, only: check, check_ok
  implicit none

  interface
    subroutine struct_layout(sizes, last_field_offsets) bind(C, name="resurgo_test_auto_struct_layout")
      import :: c_size_t
      integer(c_size_t), intent(out) :: sizes(4), last_field_offsets(4)
    end subroutine struct_layout
  end interface

  ! How the solver names its checkpoint location.
  integer, parameter :: replay = 1, fast_forward = 2, listed = 3
  integer, parameter :: nx = 16, ny = 12, steps = 8, checkpoint_step = 3

  ! The fastfw/datlist payload.
  type, bind(C) :: position
    integer(c_int) :: step
    real(c_double) :: time
  end type position

  real(real64) :: first_u(0:nx + 1, 0:ny + 1), second_u(0:nx + 1, 0:ny + 1)
  real(real64) :: first_norms(steps), second_norms(steps)
  integer :: mode, resumed_at

  call check_layout()
  call check_bad_input()
  call check_foreign_store()

  do mode = replay, listed
    call solve(mode, .true., first_u, first_norms, resumed_at)
    call check(resumed_at == 1, 'a first run starts at step 1')
    call solve(mode, .false., second_u, second_norms, resumed_at)
    call check(all(transfer(second_u, 0_int64, size(second_u)) == transfer(first_u, 0_int64, size(first_u))), &
               'the restored run ends with the bytes of the first one')
    call check(all(transfer(second_norms(resumed_at:), 0_int64, steps - resumed_at + 1) == &
                   transfer(first_norms(resumed_at:), 0_int64, steps - resumed_at + 1)), 'and sees the same norms')
  end do
  call check_replay_mismatch()

  write(*, '(a)') 'test_auto: all checks passed'

contains

  subroutine check_layout()
    type(rsg_auto_arg), target :: arg
    type(rsg_auto_options), target :: options
    type(rsg_auto_checkpoint_report), target :: checkpoint
    type(rsg_auto_restore_report), target :: restore
    integer(c_size_t) :: sizes(4), last_field_offsets(4)
    call struct_layout(sizes, last_field_offsets)
    call check(sizes(1) == c_sizeof(arg) .and. last_field_offsets(1) == offset(c_loc(arg), c_loc(arg%range)), &
               'rsg_auto_arg layout')
    call check(sizes(2) == c_sizeof(options) .and. last_field_offsets(2) == &
               offset(c_loc(options), c_loc(options%report_context)), 'rsg_auto_options layout')
    call check(sizes(3) == c_sizeof(checkpoint) .and. last_field_offsets(3) == &
               offset(c_loc(checkpoint), c_loc(checkpoint%blocking_seconds)), 'rsg_auto_checkpoint_report layout')
    call check(sizes(4) == c_sizeof(restore) .and. last_field_offsets(4) == &
               offset(c_loc(restore), c_loc(restore%ranks)), 'rsg_auto_restore_report layout')
  end subroutine check_layout

  integer(c_size_t) function offset(base, field_address)
    type(c_ptr), intent(in) :: base, field_address
    offset = int(transfer(field_address, 0_c_intptr_t) - transfer(base, 0_c_intptr_t), c_size_t)
  end function offset

  ! Each refusal gives its code and a message naming the cause; the runtime
  ! stays usable after each.
  subroutine check_bad_input()
    type(resurgo_store) :: store
    type(resurgo_auto_runtime) :: rt
    real(real64), target :: field(6, 5), scalar
    integer(int32), target :: flags(4)
    integer :: ierr, field_id, flags_id, id
    logical :: run, restored

    call resurgo_auto_attach(store, rt, ierr)
    call check(ierr == RSG_EINVAL, 'attach to a store not open is RSG_EINVAL')
    call check(len(resurgo_last_error()) > 0, 'with a message')

    call resurgo_open('auto-errors', store, ierr)
    call check_ok(ierr, 'open auto-errors')
    call resurgo_auto_attach(store, rt, ierr)
    call check_ok(ierr, 'attach with the default options')
    call resurgo_auto_dataset(rt, 'field', field, field_id, ierr, halo=1)
    call check_ok(ierr, 'dataset field')
    call resurgo_auto_dataset(rt, 'flags', flags, flags_id, ierr)
    call check_ok(ierr, 'dataset flags')
    call check(field_id /= flags_id, 'two datasets have two ids')

    call resurgo_auto_dataset(rt, 'row', field(1, :), id, ierr)
    call check(ierr == RSG_EINVAL .and. id == -1, 'a strided section is refused')
    call check(index(resurgo_last_error(), "dataset 'row' is not contiguous") > 0, &
               'naming the dataset: ' // resurgo_last_error())
    call resurgo_auto_dataset(rt, 'field', flags, id, ierr)
    call check(ierr == RSG_EINVAL .and. index(resurgo_last_error(), 'field') > 0, &
               'a name declared twice is refused: ' // resurgo_last_error())
    call resurgo_auto_dataset(rt, 'scalar', scalar, id, ierr, halo=1)
    call check(ierr == RSG_EINVAL .and. index(resurgo_last_error(), 'halo') > 0, &
               'a halo without a shape is refused: ' // resurgo_last_error())
    call resurgo_auto_dataset(rt, 'thin', flags, id, ierr, halo=2)
    call check(ierr == RSG_EINVAL .and. index(resurgo_last_error(), 'halo') > 0, &
               'a halo deeper than the array is refused: ' // resurgo_last_error())

    call resurgo_auto_loop(rt, 'ghost', [resurgo_auto_arg(99, RSG_AUTO_READ)], run, ierr)
    call check(ierr == RSG_EINVAL .and. index(resurgo_last_error(), 'ghost') > 0, &
               'a loop naming a dataset never declared is refused, naming the loop: ' // resurgo_last_error())
    call resurgo_auto_loop(rt, 'odd', [resurgo_auto_arg(field_id, 7_c_int)], run, ierr)
    call check(ierr == RSG_EINVAL .and. index(resurgo_last_error(), 'unknown access 7') > 0, &
               'an unknown access is refused: ' // resurgo_last_error())
    call resurgo_auto_loop(rt, 'odd', [resurgo_auto_arg(field_id, RSG_AUTO_READ, 5_c_int)], run, ierr)
    call check(ierr == RSG_EINVAL .and. index(resurgo_last_error(), 'unknown range 5') > 0, &
               'an unknown range is refused: ' // resurgo_last_error())
    call resurgo_auto_loop(rt, 'ring', [resurgo_auto_arg(flags_id, RSG_AUTO_WRITE, RSG_AUTO_HALO)], run, ierr)
    call check(ierr == RSG_EINVAL .and. index(resurgo_last_error(), "'flags'") > 0, &
               'the halo of a dataset without one is refused: ' // resurgo_last_error())
    call resurgo_auto_query(rt, field(2, :), ierr)
    call check(ierr == RSG_EINVAL .and. index(resurgo_last_error(), 'not contiguous') > 0, &
               'a strided query is refused: ' // resurgo_last_error())
    call resurgo_auto_fastfw(rt, restored, ierr, payload=c_loc(scalar))
    call check(ierr == RSG_EINVAL .and. index(resurgo_last_error(), 'payload and bytes') > 0, &
               'a payload without its size is refused: ' // resurgo_last_error())
    call resurgo_auto_datlist(rt, [field_id, 42], restored, ierr)
    call check(ierr == RSG_EINVAL .and. index(resurgo_last_error(), '42') > 0, &
               'datlist of a dataset never declared is refused: ' // resurgo_last_error())

    call resurgo_auto_loop(rt, 'fill', [resurgo_auto_arg(field_id, RSG_AUTO_WRITE)], run, ierr)
    call check_ok(ierr, 'a good loop after the refusals')
    call check(run, 'executes')
    call check(resurgo_last_error() == '', 'and clears the message')

    call resurgo_auto_detach(rt, ierr)
    call check_ok(ierr, 'detach')
    call check(.not. c_associated(rt%handle), 'detach clears the handle')
    call resurgo_auto_trigger(rt, ierr)
    call check(ierr == RSG_EINVAL .and. len(resurgo_last_error()) > 0, 'a detached runtime is refused')
    call resurgo_close(store)
  end subroutine check_bad_input

  ! A store holding versions the runtime did not write is not its own.
  subroutine check_foreign_store()
    type(resurgo_store) :: store
    type(resurgo_auto_runtime) :: rt
    real(real64), target :: value(3)
    integer :: ierr
    value = 1
    call resurgo_open('auto-foreign', store)
    call resurgo_protect(store, 0, value, 'value')
    call resurgo_checkpoint(store, 1)
    call resurgo_wait(store)
    call resurgo_close(store)
    call resurgo_open('auto-foreign', store)
    call resurgo_auto_attach(store, rt, ierr)
    call check(ierr == RSG_ESTATE .and. len(resurgo_last_error()) > 0, &
               'attach to a store of hand-made versions is RSG_ESTATE: ' // resurgo_last_error())
    call resurgo_close(store)
  end subroutine check_foreign_store

  ! The datasets: u and w with a halo ring of 1, the conductivity k (written
  ! by the initialisation only) and a history of the steps (declared as
  ! bytes). `first` runs take a checkpoint in step checkpoint_step; the
  ! others must restore it. final_u and norms receive the results;
  ! resumed_at the first step this run executed.
  subroutine solve(mode, first, final_u, norms, resumed_at)
    integer, intent(in) :: mode
    logical, intent(in) :: first
    real(real64), intent(out) :: final_u(0:nx + 1, 0:ny + 1), norms(steps)
    integer, intent(out) :: resumed_at
    character(len=*), parameter :: names(3) = [character(len=12) :: 'auto-replay', 'auto-fastfw', 'auto-datlist']
    type(resurgo_store) :: store
    type(resurgo_auto_runtime) :: rt
    type(rsg_auto_options) :: options
    real(real64), allocatable, target :: u(:, :), w(:, :)
    real(real32), allocatable, target :: k(:, :)
    integer(int64), target :: history(steps)
    type(position), target :: at
    integer :: ierr, u_id, w_id, k_id, history_id, step, lines_before
    integer(int64) :: loops
    logical :: restoring

    call resurgo_open(trim(names(mode)), store)
    call resurgo_auto_options_init(options, ierr)
    call check_ok(ierr, 'options_init')
    call check(options%region_timeout_loops == 20000 .and. options%interval_loops == 0, 'the default options')
    options%diagnostics = 1
    options%report = c_funloc(on_report)
    lines_before = report_lines
    call resurgo_auto_attach(store, rt, ierr, options)
    call check_ok(ierr, 'attach ' // trim(names(mode)))
    call resurgo_auto_restoring(rt, restoring, ierr)
    call check_ok(ierr, 'restoring')
    call check(restoring .neqv. first, 'a second run attaches in restore mode')

    ! Scribbled: what the runtime does not restore shows.
    allocate(u(0:nx + 1, 0:ny + 1), w(0:nx + 1, 0:ny + 1), k(nx, ny))
    u = -1
    w = -1
    k = -1
    history = -1
    call resurgo_auto_dataset(rt, 'u', u, u_id, halo=1)
    call resurgo_auto_dataset(rt, 'w', w, w_id, halo=1)
    call resurgo_auto_dataset(rt, 'k', k, k_id)
    call resurgo_auto_dataset_bytes(rt, 'history', c_loc(history), c_sizeof(history), history_id)
    call initialise(rt, u, w, k, history, [u_id, w_id, k_id, history_id])
    call resurgo_auto_loop_index(rt, loops)
    call check(loops == 1, 'one loop declared by the initialisation')
    call resurgo_auto_initphase_done(rt)

    norms = -1
    resumed_at = 1
    at = position(1, 0)
    do while (at%step <= steps)
      step = at%step
      if (first .and. step == checkpoint_step .and. mode /= replay) call resurgo_auto_trigger(rt)
      if (named_location(rt, mode, [u_id, history_id], at)) resumed_at = at%step
      call time_step(rt, mode, first .and. at%step == checkpoint_step, u, w, k, history, &
                     [u_id, w_id, k_id, history_id], norms(at%step))
      at = position(at%step + 1, at%time + 0.1_c_double)
    end do
    call check_reports(rt, mode, first, lines_before)
    if (first) call check_described(store, rt)
    final_u = u
    call resurgo_auto_detach(rt)
    call resurgo_close(store)
  end subroutine solve

  ! fastfw or datlist at the top of a step (none in mode replay); true when
  ! it restored `at` from the checkpoint.
  logical function named_location(rt, mode, minimal, at) result(restored)
    type(resurgo_auto_runtime), intent(in) :: rt
    integer, intent(in) :: mode, minimal(:)
    type(position), intent(inout), target :: at
    restored = .false.
    if (mode == fast_forward) then
      call resurgo_auto_fastfw(rt, restored, payload=c_loc(at), bytes=c_sizeof(at))
    else if (mode == listed) then
      call resurgo_auto_datlist(rt, minimal, restored, payload=c_loc(at), bytes=c_sizeof(at))
    end if
  end function named_location

  ! ids: u, w, k, history.
  subroutine initialise(rt, u, w, k, history, ids)
    type(resurgo_auto_runtime), intent(in) :: rt
    real(real64), intent(inout) :: u(0:, 0:), w(0:, 0:)
    real(real32), intent(inout) :: k(:, :)
    integer(int64), intent(inout) :: history(:)
    integer, intent(in) :: ids(4)
    integer :: i, j
    logical :: run
    call resurgo_auto_loop(rt, 'init', [resurgo_auto_arg(ids(1), RSG_AUTO_WRITE), &
                           resurgo_auto_arg(ids(2), RSG_AUTO_WRITE), resurgo_auto_arg(ids(3), RSG_AUTO_WRITE), &
                           resurgo_auto_arg(ids(4), RSG_AUTO_WRITE)], run)
    call check(run, 'the initialisation executes in every run')
    do j = 0, ny + 1
      do i = 0, nx + 1
        u(i, j) = merge(1.0_real64, 0.0_real64, (i - nx / 2)**2 + (j - ny / 3)**2 <= 9)
      end do
    end do
    w = 0
    do j = 1, ny
      do i = 1, nx
        k(i, j) = 0.1_real32 + 0.01_real32 * real(mod(i * j, 7), real32)
      end do
    end do
    history = 0
  end subroutine initialise

  ! One step of four loops. `trigger` asks for a checkpoint after the first
  ! loop, so that the runtime finds the location itself (mode replay).
  subroutine time_step(rt, mode, trigger, u, w, k, history, ids, norm)
    type(resurgo_auto_runtime), intent(in) :: rt
    integer, intent(in) :: mode
    logical, intent(in) :: trigger
    real(real64), intent(inout) :: u(0:, 0:), w(0:, 0:)
    real(real32), intent(in) :: k(:, :)
    integer(int64), intent(inout) :: history(:)
    integer, intent(in) :: ids(4)
    real(real64), intent(out) :: norm
    integer(int64) :: counters(2)
    logical :: run
    call resurgo_auto_loop(rt, 'halo', [resurgo_auto_arg(ids(1), RSG_AUTO_READ, RSG_AUTO_INTERIOR), &
                           resurgo_auto_arg(ids(1), RSG_AUTO_WRITE, RSG_AUTO_HALO)], run)
    if (run) then  ! insulated borders: the ring mirrors the edge
      u(0, :) = u(1, :)
      u(nx + 1, :) = u(nx, :)
      u(:, 0) = u(:, 1)
      u(:, ny + 1) = u(:, ny)
    end if
    if (trigger .and. mode == replay) call resurgo_auto_trigger(rt)
    call resurgo_auto_loop(rt, 'stencil', [resurgo_auto_arg(ids(1), RSG_AUTO_READ), &
                           resurgo_auto_arg(ids(3), RSG_AUTO_READ), &
                           resurgo_auto_arg(ids(2), RSG_AUTO_WRITE, RSG_AUTO_INTERIOR)], run)
    if (run) w(1:nx, 1:ny) = u(1:nx, 1:ny) + k * (u(0:nx - 1, 1:ny) + u(2:nx + 1, 1:ny) + u(1:nx, 0:ny - 1) &
                                                 + u(1:nx, 2:ny + 1) - 4 * u(1:nx, 1:ny))
    norm = -1  ! while replaying the query gives the logged value
    call resurgo_auto_loop(rt, 'norm', [resurgo_auto_arg(ids(1), RSG_AUTO_READ, RSG_AUTO_INTERIOR), &
                           resurgo_auto_arg(ids(2), RSG_AUTO_READ, RSG_AUTO_INTERIOR)], run)
    if (run) norm = sqrt(sum((w(1:nx, 1:ny) - u(1:nx, 1:ny))**2))
    call resurgo_auto_query(rt, norm)
    call check(norm >= 0, 'the query gives the norm')
    call resurgo_auto_loop(rt, 'update', [resurgo_auto_arg(ids(2), RSG_AUTO_READ, RSG_AUTO_INTERIOR), &
                           resurgo_auto_arg(ids(1), RSG_AUTO_WRITE, RSG_AUTO_INTERIOR), &
                           resurgo_auto_arg(ids(4), RSG_AUTO_READ_WRITE)], run)
    counters = -1
    if (run) then
      u(1:nx, 1:ny) = w(1:nx, 1:ny)
      history = eoshift(history, 1, transfer(norm, 0_int64))
      counters = [count(u(1:nx, 1:ny) > 0.5_real64, kind=int64), history(size(history))]
    end if
    call resurgo_auto_query(rt, counters)  ! an int64 array, any rank
    call check(counters(2) == transfer(norm, 0_int64), 'the array query gives the values')
  end subroutine time_step

  ! After the run: the checkpoint a first run took, the restore a second one
  ! made, and the diagnostic lines of both.
  subroutine check_reports(rt, mode, first, lines_before)
    type(resurgo_auto_runtime), intent(in) :: rt
    integer, intent(in) :: mode, lines_before
    logical, intent(in) :: first
    character(len=*), parameter :: locations(3) = [character(len=8) :: '', 'fastfw', 'datlist']
    type(rsg_auto_checkpoint_report) :: checkpoint
    type(rsg_auto_restore_report) :: restore
    type(position) :: payload
    integer(int64) :: held
    integer :: ierr
    call resurgo_auto_last_checkpoint(rt, checkpoint, ierr)
    call check_ok(ierr, 'last_checkpoint')
    call resurgo_auto_last_restore(rt, restore, ierr)
    call check_ok(ierr, 'last_restore')
    call resurgo_auto_bookkeeping_bytes(rt, held, ierr)
    call check_ok(ierr, 'bookkeeping_bytes')
    call check(report_lines > lines_before, 'the report callback receives the diagnostic lines')
    call check(index(last_report, 'version') > 0, 'as text: ' // last_report)
    if (first) then
      call check(checkpoint%version >= 0 .and. checkpoint%saved_datasets >= 1 .and. &
                 checkpoint%dataset_bytes > 0 .and. checkpoint%loop_index > 1, 'the first run took a checkpoint')
      if (mode /= replay) then
        call check(resurgo_string(checkpoint%location) == trim(locations(mode)) .and. &
                   checkpoint%payload_bytes == c_sizeof(payload), &
                   'at the named location, with its payload: ' // resurgo_string(checkpoint%location))
      else
        call check(len(resurgo_string(checkpoint%location)) > 0 .and. held > 0, &
                   'at a loop the runtime chose, with a query log')
      end if
      call check(restore%version == -1, 'and restored nothing')
    else
      call check(restore%version >= 0, 'the second run restored')
      call check((restore%fast_forward == 1) .eqv. (mode /= replay), 'by fast-forward at a named location')
      if (mode == replay) call check(restore%loop_index > 1 .and. restore%skipped_loops > 0 .and. &
                                     restore%replayed_queries > 0, 'by replaying loops and queries')
    end if
  end subroutine check_reports

  ! The checkpoint's region table holds u with the dtype and the row-major
  ! shape (Fortran's axis order reversed) of the array, and the dataset
  ! declared as bytes without either.
  subroutine check_described(store, rt)
    type(resurgo_store), intent(in) :: store
    type(resurgo_auto_runtime), intent(in) :: rt
    type(rsg_auto_checkpoint_report) :: checkpoint
    type(rsg_region_description), allocatable :: regions(:)
    integer :: i
    logical :: u_found
    call resurgo_auto_last_checkpoint(rt, checkpoint)
    call resurgo_wait(store)
    call resurgo_describe(store, checkpoint%version, regions)
    u_found = .false.
    do i = 1, size(regions)
      if (resurgo_string(regions(i)%label) == 'u') then
        u_found = .true.
        call check(resurgo_string(regions(i)%dtype) == 'float64' .and. regions(i)%ndims == 2 .and. &
                   all(regions(i)%shape(:2) == [ny + 2, nx + 2]), 'u is float64 of shape (ny + 2, nx + 2)')
      else if (resurgo_string(regions(i)%label) == 'history') then
        call check(resurgo_string(regions(i)%dtype) == '' .and. regions(i)%ndims == 0 .and. &
                   regions(i)%bytes == steps * 8, 'history is bytes, without dtype or shape')
      end if
    end do
    call check(u_found, 'the checkpoint holds u')
  end subroutine check_described

  ! A replay asked for a query of another size than the logged one.
  subroutine check_replay_mismatch()
    type(resurgo_store) :: store
    type(resurgo_auto_runtime) :: rt
    real(real64), allocatable, target :: u(:, :), w(:, :)
    real(real32), allocatable, target :: k(:, :)
    integer(int64), target :: history(steps)
    integer(int32) :: small
    integer :: ierr, ids(4)
    logical :: run
    allocate(u(0:nx + 1, 0:ny + 1), w(0:nx + 1, 0:ny + 1), k(nx, ny))
    call resurgo_open('auto-replay', store)
    call resurgo_auto_attach(store, rt)
    call resurgo_auto_dataset(rt, 'u', u, ids(1), halo=1)
    call resurgo_auto_dataset(rt, 'w', w, ids(2), halo=1)
    call resurgo_auto_dataset(rt, 'k', k, ids(3))
    call resurgo_auto_dataset_bytes(rt, 'history', c_loc(history), c_sizeof(history), ids(4))
    call initialise(rt, u, w, k, history, ids)
    call resurgo_auto_initphase_done(rt)
    call resurgo_auto_loop(rt, 'halo', [resurgo_auto_arg(ids(1), RSG_AUTO_READ, RSG_AUTO_INTERIOR), &
                           resurgo_auto_arg(ids(1), RSG_AUTO_WRITE, RSG_AUTO_HALO)], run)
    call check(.not. run, 'a restored run replays its first loop')
    small = 0
    call resurgo_auto_query(rt, small, ierr)
    call check(ierr == RSG_EMISMATCH .and. index(resurgo_last_error(), 'diverged') > 0, &
               'a query the checkpointed run did not ask is RSG_EMISMATCH: ' // resurgo_last_error())
    call resurgo_auto_detach(rt)
    call resurgo_close(store)
  end subroutine check_replay_mismatch

end program test_auto
