! Resurgo Fortran module for automatic checkpointing: the C API
! resurgo/auto.h (rsg_auto_*) through iso_c_binding, for OPS-style codes that
! declare their datasets and, before each parallel loop, what the loop
! accesses (docs/auto.md, docs/auto_fortran.md). The store comes from module
! `resurgo` (resurgo_open); errors follow its rules: every wrapper takes an
! optional `ierr` (RSG_OK or a negative RSG_E* code, the cause in
! resurgo_last_error()), and without it a failure prints the message and
! stops the program.
!
!   call resurgo_open('heat', store)
!   call resurgo_auto_attach(store, rt)                  ! restore mode if the store holds one
!   call resurgo_auto_dataset(rt, 'u', u, u_id, halo=1)  ! u(0:nx+1, 0:ny+1), TARGET
!   ...initialisation loops...
!   call resurgo_auto_initphase_done(rt)
!   do step = 1, steps
!     call resurgo_auto_loop(rt, 'stencil', [resurgo_auto_arg(u_id, RSG_AUTO_READ), &
!                            resurgo_auto_arg(w_id, RSG_AUTO_WRITE, RSG_AUTO_INTERIOR)], run)
!     if (run) call stencil(u, w)                         ! .false. while replaying
!     call resurgo_auto_query(rt, residual)                ! every value the control flow reads
!   end do
!   call resurgo_auto_detach(rt)                          ! before resurgo_close(store)
!
! Datasets are the application's own arrays, kept by address: contiguous,
! declared TARGET (or allocatable, target), whole arrays. Their dtype and
! shape are taken from the array; the shape is given to the library
! row-major (Fortran's axis order reversed), so a halo of depth h is the
! ring of h elements on every side of every axis, whatever the order.
! In an MPI job, resurgo_auto_dataset(..., global_shape=, offset=) declares
! the array as this rank's block of a global array (no halo), in Fortran's
! axis order as resurgo_protect_global takes them: when every dataset is
! declared so, a checkpoint restarts on another rank count (docs/auto.md).
module resurgo_auto
  use, intrinsic :: iso_c_binding
  use, intrinsic :: iso_fortran_env, only: real32, real64, int32, int64
  use resurgo, only: resurgo_store, RSG_EINVAL, resurgo_finish_call, resurgo_refuse_call, &
                     resurgo_data_address, resurgo_string
  implicit none
  private

  ! How a loop accesses a dataset (rsg_auto_arg%access). RSG_AUTO_WRITE:
  ! every element the loop covers is written before it is read;
  ! RSG_AUTO_INCREMENT (a += into the dataset) reads the old value.
  integer(c_int), parameter, public :: RSG_AUTO_READ = 0
  integer(c_int), parameter, public :: RSG_AUTO_WRITE = 1
  integer(c_int), parameter, public :: RSG_AUTO_READ_WRITE = 2
  integer(c_int), parameter, public :: RSG_AUTO_INCREMENT = 3

  ! The part of a dataset a loop covers (rsg_auto_arg%range): every element,
  ! the interior only, or the halo ring only (a dataset declared with halo > 0).
  integer(c_int), parameter, public :: RSG_AUTO_ALL = 0
  integer(c_int), parameter, public :: RSG_AUTO_INTERIOR = 1
  integer(c_int), parameter, public :: RSG_AUTO_HALO = 2

  ! ---- The C API's structs, field for field (resurgo/auto.h) ----------------
  ! Unsigned C fields are signed here, as in module resurgo.

  ! One dataset a loop accesses; resurgo_auto_arg builds one.
  type, bind(C), public :: rsg_auto_arg
    integer(c_int) :: dataset  ! an id from resurgo_auto_dataset
    integer(c_int) :: access   ! RSG_AUTO_READ .. RSG_AUTO_INCREMENT
    integer(c_int) :: range    ! RSG_AUTO_ALL, RSG_AUTO_INTERIOR or RSG_AUTO_HALO
  end type rsg_auto_arg

  ! resurgo_auto_options_init sets the defaults. A checkpoint is due every
  ! interval_loops loops when > 0, else interval_seconds after the previous
  ! one when > 0, else when the store's [interval] policy says so, else only
  ! after resurgo_auto_trigger.
  type, bind(C), public :: rsg_auto_options
    integer(c_long_long) :: interval_loops
    real(c_double) :: interval_seconds
    integer(c_long_long) :: region_timeout_loops  ! loops a checkpointing region may span
    integer(c_long_long) :: agreement_loops       ! MPI jobs: loops between the ranks' exchanges
    integer(c_int) :: diagnostics                 ! 0 silent .. 3 every dataset's decision
    integer(c_int) :: check_access                ! 1: hash read-only datasets to catch lying modes
    integer(c_int) :: flush_on_termination        ! 1: in-memory stores write the newest to L2 on SIGTERM
    ! c_funloc of a subroutine(line, context) bind(C) with two
    ! type(c_ptr), value arguments (resurgo_auto_line(line) is the text);
    ! c_null_funptr: standard error.
    type(c_funptr) :: report
    type(c_ptr) :: report_context
  end type rsg_auto_options

  ! The newest automatic checkpoint of this process (version -1 before one).
  type, bind(C), public :: rsg_auto_checkpoint_report
    integer(c_int) :: version
    integer(c_long_long) :: loop_index              ! the loop (1-based) before which it was taken
    character(kind=c_char) :: location(64)          ! that loop's name, or "fastfw" / "datlist"
    integer(c_size_t) :: saved_datasets             ! datasets saved whole
    integer(c_size_t) :: halo_datasets              ! datasets of which only the halo ring was saved
    integer(c_long_long) :: dataset_bytes
    integer(c_long_long) :: query_log_bytes
    integer(c_long_long) :: payload_bytes
    integer(c_long_long) :: staged_bytes            ! copied aside before a loop of the region changed them
    integer(c_long_long) :: region_loops
    integer(c_int) :: timed_out                     ! 1 when closed by region_timeout_loops
    real(c_double) :: blocking_seconds
  end type rsg_auto_checkpoint_report

  ! The restore of this process (version -1 when it did not restart from an
  ! automatic checkpoint).
  type, bind(C), public :: rsg_auto_restore_report
    integer(c_int) :: version
    integer(c_long_long) :: loop_index              ! where execution resumed
    integer(c_long_long) :: skipped_loops           ! loops replayed without executing them
    integer(c_long_long) :: replayed_queries
    integer(c_int) :: fast_forward                  ! 1: resumed at fastfw/datlist from the payload
    real(c_double) :: read_seconds
    real(c_double) :: replay_seconds
    integer(c_int) :: ranks                         ! the rank count that wrote it (0: not recorded)
  end type rsg_auto_restore_report

  ! Opaque runtime handle; c_null_ptr when not attached.
  type, public :: resurgo_auto_runtime
    type(c_ptr) :: handle = c_null_ptr
  end type resurgo_auto_runtime

  ! ---- The C API, bound one to one ------------------------------------------
  ! Outputs the C side writes only on success are INTENT(INOUT), as in
  ! module resurgo (with INTENT(OUT) gfortran drops the wrapper's initial
  ! value as a dead store).
  public :: rsg_auto_options_init, rsg_auto_attach, rsg_auto_detach, rsg_auto_dataset, rsg_auto_loop, &
            rsg_auto_query, rsg_auto_initphase_done, rsg_auto_fastfw, rsg_auto_datlist, rsg_auto_trigger, &
            rsg_auto_restoring, rsg_auto_loop_index, rsg_auto_bookkeeping_bytes, rsg_auto_last_checkpoint, &
            rsg_auto_last_restore

  interface
    function rsg_auto_options_init(options) bind(C, name="rsg_auto_options_init") result(rc)
      import :: c_int, rsg_auto_options
      type(rsg_auto_options), intent(inout) :: options
      integer(c_int) :: rc
    end function rsg_auto_options_init

    ! options may be c_null_ptr (the defaults); otherwise c_loc of a
    ! type(rsg_auto_options).
    function rsg_auto_attach(store, options, out) bind(C, name="rsg_auto_attach") result(rc)
      import :: c_ptr, c_int
      type(c_ptr), value :: store
      type(c_ptr), value :: options
      type(c_ptr), intent(inout) :: out
      integer(c_int) :: rc
    end function rsg_auto_attach

    function rsg_auto_detach(a) bind(C, name="rsg_auto_detach") result(rc)
      import :: c_ptr, c_int
      type(c_ptr), value :: a
      integer(c_int) :: rc
    end function rsg_auto_detach

    ! dtype may be c_null_ptr; shape has ndim extents, row-major.
    function rsg_auto_dataset(a, name, data, bytes, dtype, ndim, shape, halo, id) &
        bind(C, name="rsg_auto_dataset") result(rc)
      import :: c_ptr, c_char, c_int, c_size_t, c_long_long
      type(c_ptr), value :: a
      character(kind=c_char), dimension(*), intent(in) :: name
      type(c_ptr), value :: data
      integer(c_size_t), value :: bytes
      type(c_ptr), value :: dtype
      integer(c_int), value :: ndim
      integer(c_long_long), intent(in) :: shape(*)
      integer(c_int), value :: halo
      integer(c_int), intent(inout) :: id
      integer(c_int) :: rc
    end function rsg_auto_dataset

    ! global_shape, offset and shape have ndim entries each, row-major.
    function rsg_auto_dataset_global(a, name, data, bytes, dtype, ndim, global_shape, offset, shape, id) &
        bind(C, name="rsg_auto_dataset_global") result(rc)
      import :: c_ptr, c_char, c_int, c_size_t, c_long_long
      type(c_ptr), value :: a
      character(kind=c_char), dimension(*), intent(in) :: name
      type(c_ptr), value :: data
      integer(c_size_t), value :: bytes
      type(c_ptr), value :: dtype
      integer(c_int), value :: ndim
      integer(c_long_long), intent(in) :: global_shape(*), offset(*), shape(*)
      integer(c_int), intent(inout) :: id
      integer(c_int) :: rc
    end function rsg_auto_dataset_global

    function rsg_auto_loop(a, name, args, count, execute) bind(C, name="rsg_auto_loop") result(rc)
      import :: c_ptr, c_char, c_int, c_size_t, rsg_auto_arg
      type(c_ptr), value :: a
      character(kind=c_char), dimension(*), intent(in) :: name
      type(rsg_auto_arg), intent(in) :: args(*)
      integer(c_size_t), value :: count
      integer(c_int), intent(inout) :: execute
      integer(c_int) :: rc
    end function rsg_auto_loop

    function rsg_auto_query(a, data, bytes) bind(C, name="rsg_auto_query") result(rc)
      import :: c_ptr, c_int, c_size_t
      type(c_ptr), value :: a
      type(c_ptr), value :: data
      integer(c_size_t), value :: bytes
      integer(c_int) :: rc
    end function rsg_auto_query

    function rsg_auto_initphase_done(a) bind(C, name="rsg_auto_initphase_done") result(rc)
      import :: c_ptr, c_int
      type(c_ptr), value :: a
      integer(c_int) :: rc
    end function rsg_auto_initphase_done

    function rsg_auto_fastfw(a, payload, bytes, restored) bind(C, name="rsg_auto_fastfw") result(rc)
      import :: c_ptr, c_int, c_size_t
      type(c_ptr), value :: a
      type(c_ptr), value :: payload
      integer(c_size_t), value :: bytes
      integer(c_int), intent(inout) :: restored
      integer(c_int) :: rc
    end function rsg_auto_fastfw

    function rsg_auto_datlist(a, datasets, count, payload, bytes, restored) bind(C, name="rsg_auto_datlist") &
        result(rc)
      import :: c_ptr, c_int, c_size_t
      type(c_ptr), value :: a
      integer(c_int), intent(in) :: datasets(*)
      integer(c_size_t), value :: count
      type(c_ptr), value :: payload
      integer(c_size_t), value :: bytes
      integer(c_int), intent(inout) :: restored
      integer(c_int) :: rc
    end function rsg_auto_datlist

    function rsg_auto_trigger(a) bind(C, name="rsg_auto_trigger") result(rc)
      import :: c_ptr, c_int
      type(c_ptr), value :: a
      integer(c_int) :: rc
    end function rsg_auto_trigger

    function rsg_auto_restoring(a, restoring) bind(C, name="rsg_auto_restoring") result(rc)
      import :: c_ptr, c_int
      type(c_ptr), value :: a
      integer(c_int), intent(inout) :: restoring
      integer(c_int) :: rc
    end function rsg_auto_restoring

    function rsg_auto_loop_index(a, index) bind(C, name="rsg_auto_loop_index") result(rc)
      import :: c_ptr, c_int, c_long_long
      type(c_ptr), value :: a
      integer(c_long_long), intent(inout) :: index
      integer(c_int) :: rc
    end function rsg_auto_loop_index

    function rsg_auto_bookkeeping_bytes(a, bytes) bind(C, name="rsg_auto_bookkeeping_bytes") result(rc)
      import :: c_ptr, c_int, c_long_long
      type(c_ptr), value :: a
      integer(c_long_long), intent(inout) :: bytes
      integer(c_int) :: rc
    end function rsg_auto_bookkeeping_bytes

    function rsg_auto_last_checkpoint(a, out) bind(C, name="rsg_auto_last_checkpoint") result(rc)
      import :: c_ptr, c_int, rsg_auto_checkpoint_report
      type(c_ptr), value :: a
      type(rsg_auto_checkpoint_report), intent(out) :: out
      integer(c_int) :: rc
    end function rsg_auto_last_checkpoint

    function rsg_auto_last_restore(a, out) bind(C, name="rsg_auto_last_restore") result(rc)
      import :: c_ptr, c_int, rsg_auto_restore_report
      type(c_ptr), value :: a
      type(rsg_auto_restore_report), intent(out) :: out
      integer(c_int) :: rc
    end function rsg_auto_last_restore

    function c_strlen(s) bind(C, name="strlen") result(n)
      import :: c_ptr, c_size_t
      type(c_ptr), value :: s
      integer(c_size_t) :: n
    end function c_strlen
  end interface

  ! ---- Fortran wrappers -----------------------------------------------------
  public :: resurgo_auto_options_init, resurgo_auto_attach, resurgo_auto_detach, resurgo_auto_dataset, &
            resurgo_auto_dataset_bytes, resurgo_auto_arg, resurgo_auto_loop, resurgo_auto_query, &
            resurgo_auto_initphase_done, resurgo_auto_fastfw, resurgo_auto_datlist, resurgo_auto_trigger, &
            resurgo_auto_restoring, resurgo_auto_loop_index, resurgo_auto_bookkeeping_bytes, &
            resurgo_auto_last_checkpoint, resurgo_auto_last_restore, resurgo_auto_line

  ! An array of these kinds, of any rank (scalars included); see declare_array.
  interface resurgo_auto_dataset
    module procedure dataset_real32, dataset_real64, dataset_int32, dataset_int64, &
                     dataset_complex32, dataset_complex64
  end interface resurgo_auto_dataset

  ! A value (or array) of these kinds, of any rank; see query_array.
  interface resurgo_auto_query
    module procedure query_real32, query_real64, query_int32, query_int64, query_complex32, query_complex64
  end interface resurgo_auto_query

contains

  ! The defaults of every option (resurgo::autockpt::Options).
  subroutine resurgo_auto_options_init(options, ierr)
    type(rsg_auto_options), intent(out) :: options
    integer, intent(out), optional :: ierr
    call resurgo_finish_call(rsg_auto_options_init(options), 'resurgo_auto_options_init', ierr)
  end subroutine resurgo_auto_options_init

  ! Attaches a runtime to `store`, which must stay open until
  ! resurgo_auto_detach and hold nothing but the runtime's checkpoints. When
  ! it holds an automatic checkpoint, the runtime starts in restore mode.
  subroutine resurgo_auto_attach(store, rt, ierr, options)
    type(resurgo_store), intent(in) :: store
    type(resurgo_auto_runtime), intent(out) :: rt
    integer, intent(out), optional :: ierr
    type(rsg_auto_options), intent(in), optional, target :: options
    type(c_ptr) :: chosen
    chosen = c_null_ptr
    if (present(options)) chosen = c_loc(options)
    call resurgo_finish_call(rsg_auto_attach(store%handle, chosen, rt%handle), 'resurgo_auto_attach', ierr)
  end subroutine resurgo_auto_attach

  ! Frees the runtime in every case.
  subroutine resurgo_auto_detach(rt, ierr)
    type(resurgo_auto_runtime), intent(inout) :: rt
    integer, intent(out), optional :: ierr
    integer(c_int) :: rc
    rc = rsg_auto_detach(rt%handle)
    rt%handle = c_null_ptr
    call resurgo_finish_call(rc, 'resurgo_auto_detach', ierr)
  end subroutine resurgo_auto_detach

  ! Declares `bytes` bytes at `ptr` (c_loc of a derived type, say) as the
  ! dataset `name`, without dtype, shape or halo.
  subroutine resurgo_auto_dataset_bytes(rt, name, ptr, bytes, id, ierr)
    type(resurgo_auto_runtime), intent(in) :: rt
    character(len=*), intent(in) :: name
    type(c_ptr), intent(in) :: ptr
    integer(c_size_t), intent(in) :: bytes
    integer, intent(out) :: id
    integer, intent(out), optional :: ierr
    integer(c_long_long) :: no_shape(1)
    integer(c_int) :: declared
    no_shape = 0
    declared = -1
    call resurgo_finish_call(rsg_auto_dataset(rt%handle, trim(name) // c_null_char, ptr, bytes, c_null_ptr, &
                                              0_c_int, no_shape, 0_c_int, declared), 'resurgo_auto_dataset', ierr)
    id = int(declared)
  end subroutine resurgo_auto_dataset_bytes

  ! resurgo_auto_dataset has one specific per element kind, each forwarding
  ! here with the kind's NumPy name and size. The dummies are not CONTIGUOUS
  ! for the reason module resurgo gives at protect_array: a strided section
  ! arrives as it is and is refused, instead of a temporary copy whose
  ! address the runtime would keep.
  subroutine declare_array(rt, name, array, dtype, element_bits, id, halo, ierr, global_shape, offset)
    type(resurgo_auto_runtime), intent(in) :: rt
    character(len=*), intent(in) :: name, dtype
    type(*), dimension(..), intent(inout), target :: array
    integer, intent(in) :: element_bits
    integer, intent(out) :: id
    integer, intent(in), optional :: halo
    integer, intent(out), optional :: ierr
    integer, intent(in), optional :: global_shape(:), offset(:)
    character(kind=c_char, len=:), allocatable, target :: cdtype
    integer(c_long_long) :: row_major(max(1, rank(array)))
    integer(c_int) :: depth, declared
    id = -1
    if (.not. is_contiguous(array)) then
      call resurgo_refuse_call(RSG_EINVAL, 'resurgo_auto_dataset', "dataset '" // trim(name) // &
                               "' is not contiguous (a strided section?): declare the whole array, " // &
                               "TARGET, so that the runtime keeps the address of your data", ierr)
      return
    end if
    row_major = 0
    associate(extents => shape(array, kind=c_long_long))
      row_major(:size(extents)) = extents(size(extents):1:-1)
    end associate
    depth = 0
    if (present(halo)) depth = int(halo, c_int)
    cdtype = dtype // c_null_char
    declared = -1
    if (present(global_shape) .or. present(offset)) then
      call declare_block(rt, name, array, c_loc(cdtype), element_bits, row_major, depth, global_shape, offset, &
                         id, ierr)
      return
    end if
    call resurgo_finish_call(rsg_auto_dataset(rt%handle, trim(name) // c_null_char, resurgo_data_address(array), &
                                              size(array, kind=c_size_t) * int(element_bits / 8, c_size_t), &
                                              c_loc(cdtype), int(rank(array), c_int), row_major, depth, declared), &
                             'resurgo_auto_dataset', ierr)
    id = int(declared)
  end subroutine declare_array

  ! declare_array's block of a global array: global_shape and offset in
  ! Fortran's axis order (offset 0 for the first block), handed to the
  ! row-major library reversed, as resurgo_protect_global does. The C call
  ! takes no halo, so a halo is refused here, as the library refuses it.
  subroutine declare_block(rt, name, array, cdtype, element_bits, row_major, depth, global_shape, offset, id, ierr)
    type(resurgo_auto_runtime), intent(in) :: rt
    character(len=*), intent(in) :: name
    type(*), dimension(..), intent(inout), target :: array
    type(c_ptr), intent(in) :: cdtype
    integer, intent(in) :: element_bits
    integer(c_long_long), intent(in) :: row_major(:)
    integer(c_int), intent(in) :: depth
    integer, intent(in), optional :: global_shape(:), offset(:)
    integer, intent(out) :: id
    integer, intent(out), optional :: ierr
    integer(c_long_long) :: global_row_major(max(1, rank(array))), offset_row_major(max(1, rank(array)))
    integer(c_int) :: declared
    id = -1
    if (.not. (present(global_shape) .and. present(offset))) then
      call resurgo_refuse_call(RSG_EINVAL, 'resurgo_auto_dataset', "dataset '" // trim(name) // &
                               "': a block of a global array needs both global_shape and offset", ierr)
      return
    end if
    if (depth > 0) then
      call resurgo_refuse_call(RSG_EINVAL, 'resurgo_auto_dataset', "dataset '" // trim(name) // &
                               "' as a block of a global array: a dataset with a halo cannot be one (its ring " // &
                               "holds other ranks' cells); declare it with halo 0, its block without the ring", ierr)
      return
    end if
    if (size(global_shape) /= rank(array) .or. size(offset) /= rank(array)) then
      call resurgo_refuse_call(RSG_EINVAL, 'resurgo_auto_dataset', "dataset '" // trim(name) // &
                               "': global_shape and offset need one entry per axis of the array", ierr)
      return
    end if
    global_row_major = global_shape(size(global_shape):1:-1)
    offset_row_major = offset(size(offset):1:-1)
    declared = -1
    call resurgo_finish_call(rsg_auto_dataset_global(rt%handle, trim(name) // c_null_char, &
                                                     resurgo_data_address(array), &
                                                     size(array, kind=c_size_t) * int(element_bits / 8, c_size_t), &
                                                     cdtype, int(rank(array), c_int), global_row_major, &
                                                     offset_row_major, row_major, declared), &
                             'resurgo_auto_dataset', ierr)
    id = int(declared)
  end subroutine declare_block

  subroutine dataset_real32(rt, name, array, id, ierr, halo, global_shape, offset)
    type(resurgo_auto_runtime), intent(in) :: rt
    character(len=*), intent(in) :: name
    real(real32), dimension(..), intent(inout), target :: array
    integer, intent(out) :: id
    integer, intent(out), optional :: ierr
    integer, intent(in), optional :: halo
    integer, intent(in), optional :: global_shape(:), offset(:)
    call declare_array(rt, name, array, 'float32', storage_size(array), id, halo, ierr, global_shape, offset)
  end subroutine dataset_real32

  subroutine dataset_real64(rt, name, array, id, ierr, halo, global_shape, offset)
    type(resurgo_auto_runtime), intent(in) :: rt
    character(len=*), intent(in) :: name
    real(real64), dimension(..), intent(inout), target :: array
    integer, intent(out) :: id
    integer, intent(out), optional :: ierr
    integer, intent(in), optional :: halo
    integer, intent(in), optional :: global_shape(:), offset(:)
    call declare_array(rt, name, array, 'float64', storage_size(array), id, halo, ierr, global_shape, offset)
  end subroutine dataset_real64

  subroutine dataset_int32(rt, name, array, id, ierr, halo, global_shape, offset)
    type(resurgo_auto_runtime), intent(in) :: rt
    character(len=*), intent(in) :: name
    integer(int32), dimension(..), intent(inout), target :: array
    integer, intent(out) :: id
    integer, intent(out), optional :: ierr
    integer, intent(in), optional :: halo
    integer, intent(in), optional :: global_shape(:), offset(:)
    call declare_array(rt, name, array, 'int32', storage_size(array), id, halo, ierr, global_shape, offset)
  end subroutine dataset_int32

  subroutine dataset_int64(rt, name, array, id, ierr, halo, global_shape, offset)
    type(resurgo_auto_runtime), intent(in) :: rt
    character(len=*), intent(in) :: name
    integer(int64), dimension(..), intent(inout), target :: array
    integer, intent(out) :: id
    integer, intent(out), optional :: ierr
    integer, intent(in), optional :: halo
    integer, intent(in), optional :: global_shape(:), offset(:)
    call declare_array(rt, name, array, 'int64', storage_size(array), id, halo, ierr, global_shape, offset)
  end subroutine dataset_int64

  subroutine dataset_complex32(rt, name, array, id, ierr, halo, global_shape, offset)
    type(resurgo_auto_runtime), intent(in) :: rt
    character(len=*), intent(in) :: name
    complex(real32), dimension(..), intent(inout), target :: array
    integer, intent(out) :: id
    integer, intent(out), optional :: ierr
    integer, intent(in), optional :: halo
    integer, intent(in), optional :: global_shape(:), offset(:)
    call declare_array(rt, name, array, 'complex64', storage_size(array), id, halo, ierr, global_shape, offset)
  end subroutine dataset_complex32

  subroutine dataset_complex64(rt, name, array, id, ierr, halo, global_shape, offset)
    type(resurgo_auto_runtime), intent(in) :: rt
    character(len=*), intent(in) :: name
    complex(real64), dimension(..), intent(inout), target :: array
    integer, intent(out) :: id
    integer, intent(out), optional :: ierr
    integer, intent(in), optional :: halo
    integer, intent(in), optional :: global_shape(:), offset(:)
    call declare_array(rt, name, array, 'complex128', storage_size(array), id, halo, ierr, global_shape, offset)
  end subroutine dataset_complex64

  ! One loop argument: `dataset` accessed as `access` over `range`
  ! (default RSG_AUTO_ALL).
  pure function resurgo_auto_arg(dataset, access, range) result(arg)
    integer, intent(in) :: dataset
    integer(c_int), intent(in) :: access
    integer(c_int), intent(in), optional :: range
    type(rsg_auto_arg) :: arg
    arg%dataset = int(dataset, c_int)
    arg%access = access
    arg%range = RSG_AUTO_ALL
    if (present(range)) arg%range = range
  end function resurgo_auto_arg

  ! Call before each parallel loop with the datasets it accesses; `execute`
  ! is .false. while a restarted run replays towards its checkpoint.
  subroutine resurgo_auto_loop(rt, name, args, execute, ierr)
    type(resurgo_auto_runtime), intent(in) :: rt
    character(len=*), intent(in) :: name
    type(rsg_auto_arg), intent(in) :: args(:)
    logical, intent(out) :: execute
    integer, intent(out), optional :: ierr
    integer(c_int) :: flag
    flag = 0
    call resurgo_finish_call(rsg_auto_loop(rt%handle, trim(name) // c_null_char, args, &
                                           size(args, kind=c_size_t), flag), 'resurgo_auto_loop', ierr)
    execute = flag /= 0
  end subroutine resurgo_auto_loop

  ! resurgo_auto_query's specifics forward here: the value is logged, and
  ! while replaying overwritten with the one the checkpointed run saw.
  subroutine query_array(rt, value, element_bits, ierr)
    type(resurgo_auto_runtime), intent(in) :: rt
    type(*), dimension(..), intent(inout), target :: value
    integer, intent(in) :: element_bits
    integer, intent(out), optional :: ierr
    if (.not. is_contiguous(value)) then
      call resurgo_refuse_call(RSG_EINVAL, 'resurgo_auto_query', 'the value is not contiguous (a strided ' // &
                               'section?): query a whole array or a scalar', ierr)
      return
    end if
    call resurgo_finish_call(rsg_auto_query(rt%handle, resurgo_data_address(value), &
                                            size(value, kind=c_size_t) * int(element_bits / 8, c_size_t)), &
                             'resurgo_auto_query', ierr)
  end subroutine query_array

  subroutine query_real32(rt, value, ierr)
    type(resurgo_auto_runtime), intent(in) :: rt
    real(real32), dimension(..), intent(inout), target :: value
    integer, intent(out), optional :: ierr
    call query_array(rt, value, storage_size(value), ierr)
  end subroutine query_real32

  subroutine query_real64(rt, value, ierr)
    type(resurgo_auto_runtime), intent(in) :: rt
    real(real64), dimension(..), intent(inout), target :: value
    integer, intent(out), optional :: ierr
    call query_array(rt, value, storage_size(value), ierr)
  end subroutine query_real64

  subroutine query_int32(rt, value, ierr)
    type(resurgo_auto_runtime), intent(in) :: rt
    integer(int32), dimension(..), intent(inout), target :: value
    integer, intent(out), optional :: ierr
    call query_array(rt, value, storage_size(value), ierr)
  end subroutine query_int32

  subroutine query_int64(rt, value, ierr)
    type(resurgo_auto_runtime), intent(in) :: rt
    integer(int64), dimension(..), intent(inout), target :: value
    integer, intent(out), optional :: ierr
    call query_array(rt, value, storage_size(value), ierr)
  end subroutine query_int64

  subroutine query_complex32(rt, value, ierr)
    type(resurgo_auto_runtime), intent(in) :: rt
    complex(real32), dimension(..), intent(inout), target :: value
    integer, intent(out), optional :: ierr
    call query_array(rt, value, storage_size(value), ierr)
  end subroutine query_complex32

  subroutine query_complex64(rt, value, ierr)
    type(resurgo_auto_runtime), intent(in) :: rt
    complex(real64), dimension(..), intent(inout), target :: value
    integer, intent(out), optional :: ierr
    call query_array(rt, value, storage_size(value), ierr)
  end subroutine query_complex64

  ! Ends the initialisation phase: datasets written so far are not saved,
  ! and a restarted run executes the phase again instead of skipping it.
  subroutine resurgo_auto_initphase_done(rt, ierr)
    type(resurgo_auto_runtime), intent(in) :: rt
    integer, intent(out), optional :: ierr
    call resurgo_finish_call(rsg_auto_initphase_done(rt%handle), 'resurgo_auto_initphase_done', ierr)
  end subroutine resurgo_auto_initphase_done

  ! The payload of fastfw and datlist: `bytes` at `payload` (c_loc and
  ! c_sizeof of a TARGET variable, e.g. a derived type holding the step and
  ! the time), or nothing when absent. Both or neither must be given.
  logical function payload_given(what, payload, bytes, address, length, ierr) result(ok)
    character(len=*), intent(in) :: what
    type(c_ptr), intent(in), optional :: payload
    integer(c_size_t), intent(in), optional :: bytes
    type(c_ptr), intent(out) :: address
    integer(c_size_t), intent(out) :: length
    integer, intent(out), optional :: ierr
    address = c_null_ptr
    length = 0
    ok = present(payload) .eqv. present(bytes)
    if (.not. ok) then
      call resurgo_refuse_call(RSG_EINVAL, what, 'payload and bytes go together: give both (c_loc and ' // &
                               'c_sizeof of a TARGET variable) or neither', ierr)
    else if (present(payload)) then
      address = payload
      length = bytes
    end if
  end function payload_given

  ! A checkpoint location named by the application, with its payload. When
  ! restoring, the first call restores the datasets and the payload and
  ! sets `restored`: the application continues from the payload's step.
  subroutine resurgo_auto_fastfw(rt, restored, ierr, payload, bytes)
    type(resurgo_auto_runtime), intent(in) :: rt
    logical, intent(out) :: restored
    integer, intent(out), optional :: ierr
    type(c_ptr), intent(in), optional :: payload
    integer(c_size_t), intent(in), optional :: bytes
    type(c_ptr) :: address
    integer(c_size_t) :: length
    integer(c_int) :: flag
    restored = .false.
    if (.not. payload_given('resurgo_auto_fastfw', payload, bytes, address, length, ierr)) return
    flag = 0
    call resurgo_finish_call(rsg_auto_fastfw(rt%handle, address, length, flag), 'resurgo_auto_fastfw', ierr)
    restored = flag /= 0
  end subroutine resurgo_auto_fastfw

  ! As resurgo_auto_fastfw, with the ids of the datasets to save listed here
  ! (saved right at this call). Without a payload a restarted run replays up
  ! to this call.
  subroutine resurgo_auto_datlist(rt, datasets, restored, ierr, payload, bytes)
    type(resurgo_auto_runtime), intent(in) :: rt
    integer, intent(in) :: datasets(:)
    logical, intent(out) :: restored
    integer, intent(out), optional :: ierr
    type(c_ptr), intent(in), optional :: payload
    integer(c_size_t), intent(in), optional :: bytes
    type(c_ptr) :: address
    integer(c_size_t) :: length
    integer(c_int) :: ids(max(1, size(datasets)))
    integer(c_int) :: flag
    restored = .false.
    if (.not. payload_given('resurgo_auto_datlist', payload, bytes, address, length, ierr)) return
    ids(:size(datasets)) = int(datasets, c_int)
    flag = 0
    call resurgo_finish_call(rsg_auto_datlist(rt%handle, ids, size(datasets, kind=c_size_t), address, length, &
                                              flag), 'resurgo_auto_datlist', ierr)
    restored = flag /= 0
  end subroutine resurgo_auto_datlist

  ! A checkpoint is due now, whatever the interval says.
  subroutine resurgo_auto_trigger(rt, ierr)
    type(resurgo_auto_runtime), intent(in) :: rt
    integer, intent(out), optional :: ierr
    call resurgo_finish_call(rsg_auto_trigger(rt%handle), 'resurgo_auto_trigger', ierr)
  end subroutine resurgo_auto_trigger

  ! Whether the runtime is replaying towards a restore point.
  subroutine resurgo_auto_restoring(rt, restoring, ierr)
    type(resurgo_auto_runtime), intent(in) :: rt
    logical, intent(out) :: restoring
    integer, intent(out), optional :: ierr
    integer(c_int) :: flag
    flag = 0
    call resurgo_finish_call(rsg_auto_restoring(rt%handle, flag), 'resurgo_auto_restoring', ierr)
    restoring = flag /= 0
  end subroutine resurgo_auto_restoring

  ! Loops declared so far (the 1-based index of the last).
  subroutine resurgo_auto_loop_index(rt, index, ierr)
    type(resurgo_auto_runtime), intent(in) :: rt
    integer(int64), intent(out) :: index
    integer, intent(out), optional :: ierr
    integer(c_long_long) :: loops
    loops = 0
    call resurgo_finish_call(rsg_auto_loop_index(rt%handle, loops), 'resurgo_auto_loop_index', ierr)
    index = int(loops, int64)
  end subroutine resurgo_auto_loop_index

  ! Bytes the runtime holds for its bookkeeping (query log, statistics,
  ! staged copies).
  subroutine resurgo_auto_bookkeeping_bytes(rt, bytes, ierr)
    type(resurgo_auto_runtime), intent(in) :: rt
    integer(int64), intent(out) :: bytes
    integer, intent(out), optional :: ierr
    integer(c_long_long) :: held
    held = 0
    call resurgo_finish_call(rsg_auto_bookkeeping_bytes(rt%handle, held), 'resurgo_auto_bookkeeping_bytes', ierr)
    bytes = int(held, int64)
  end subroutine resurgo_auto_bookkeeping_bytes

  ! The newest automatic checkpoint of this process (report%version is -1
  ! before the first); resurgo_string(report%location) is its location.
  subroutine resurgo_auto_last_checkpoint(rt, report, ierr)
    type(resurgo_auto_runtime), intent(in) :: rt
    type(rsg_auto_checkpoint_report), intent(out) :: report
    integer, intent(out), optional :: ierr
    call resurgo_finish_call(rsg_auto_last_checkpoint(rt%handle, report), 'resurgo_auto_last_checkpoint', ierr)
  end subroutine resurgo_auto_last_checkpoint

  ! The restore of this process (report%version is -1 when it did not
  ! restart from an automatic checkpoint).
  subroutine resurgo_auto_last_restore(rt, report, ierr)
    type(resurgo_auto_runtime), intent(in) :: rt
    type(rsg_auto_restore_report), intent(out) :: report
    integer, intent(out), optional :: ierr
    call resurgo_finish_call(rsg_auto_last_restore(rt%handle, report), 'resurgo_auto_last_restore', ierr)
  end subroutine resurgo_auto_last_restore

  ! The text of the NUL-terminated line a report callback receives.
  function resurgo_auto_line(line) result(text)
    type(c_ptr), intent(in) :: line
    character(len=:), allocatable :: text
    character(kind=c_char), pointer :: chars(:)
    text = ''
    if (.not. c_associated(line)) return
    call c_f_pointer(line, chars, [c_strlen(line)])
    text = resurgo_string(chars)
  end function resurgo_auto_line

end module resurgo_auto
