! Resurgo Fortran module: the C API (resurgo/resurgo.h) through iso_c_binding.
!
! Two layers:
!   rsg_*      the C functions bound one to one (bind(C)); strings are
!              NUL-terminated character(kind=c_char) arrays or type(c_ptr).
!   resurgo_*  Fortran-friendly wrappers: Fortran character strings, a
!              resurgo_store handle, one generic resurgo_protect for real32,
!              real64, int32, int64, complex(real32) and complex(real64)
!              arrays of any rank (scalars included), resurgo_latest giving
!              -1 when there is no version (not an error), resurgo_last_error
!              as a string, the lists of resurgo_versions and
!              resurgo_describe as allocated arrays.
! Fortran names ignore case, so the binding of rsg_latest is named
! rsg_latest_version (RSG_LATEST is the constant).
!
!   call resurgo_open('heat', store)
!   call resurgo_protect(store, 0, u, 'field')
!   call resurgo_protect(store, 1, step, 'step')
!   call resurgo_latest(store, v)
!   if (v >= 0) call resurgo_restart(store)   ! newest intact version; step is restored
!   ... call resurgo_checkpoint(store, step) ...
!   call resurgo_wait(store)                  ! or (store, ierr, version=, level=)
!   call resurgo_close(store)
!
! resurgo_restart(store, version, restored, ierr): every argument after the
! store is optional; `version` is the one to restore (default RSG_LATEST)
! and `restored` receives the one read: pass it by name,
! resurgo_restart(store, restored=v).
!
! What the store reports comes in the C structs, bind(C) types of the same
! names: resurgo_stats gives a type(rsg_version_stats), resurgo_last_restart
! a type(rsg_restart_report), resurgo_device_stats a type(rsg_device_caches),
! resurgo_versions rsg_version_info and resurgo_describe
! rsg_region_description elements. resurgo_string(field) turns one of their
! character arrays into a string:
!
!   call resurgo_stats(store, step, stats)
!   print *, resurgo_string(stats%capture), stats%blocking_seconds, stats%seconds_to_level(RSG_L2)
!   call resurgo_describe(store, v, regions)
!   print *, (resurgo_string(regions(i)%label), regions(i)%bytes, i = 1, size(regions))
!
! Every wrapper takes an optional argument `ierr`. When present it receives
! RSG_OK (0) or a negative RSG_E* code and the caller decides, with the
! cause in resurgo_last_error(); when absent a failure prints that message
! to stderr and stops the program (error stop), so short programs need no
! error handling at all.
!
! Appicpr's calls (resurgo/appic.h, docs/appic.md): a Fortran OPEN / WRITE /
! CLOSE of arrays, but incremental. A cycle is one version:
!
!   call appic_open('state.dat')
!   call appic_register(p, sizeof(p))   ! once; again is a no-op
!   call appic_write(p)
!   call appic_close()                  ! durable on return
!
! and a restarted program reads the newest version back with the same
! open/register, then appic_read(p, ierr) (ierr = RSG_ENOTFOUND: none yet).
! Arrays registered with appic_register follow the rules of resurgo_protect
! below (contiguous, TARGET or at a fixed address).
!
! Arrays passed to resurgo_protect must be contiguous and keep their address
! until unprotected or the store is closed: declare them with the TARGET
! attribute (allocatable, target :: u(:,:)) and pass the whole array. A
! strided section is refused (RSG_EINVAL): the store must hold the user's
! memory, not a copy made for the call.
!
! MPI jobs (resurgo/resurgo_mpi.h, docs/mpi.md), when libresurgo was built
! with MPI: every rank opens the store with resurgo_open_mpi(name, comm,
! store) (comm: MPI_COMM_WORLD of `use mpi`, or comm%mpi_val of `use
! mpi_f08`) and makes every later call together with the other ranks.
! resurgo_protect_global(store, id, u, label, global_shape, offset) protects
! u as this rank's block of a global array, for restart on another number of
! ranks; global_shape and offset are in Fortran's axis order (see
! protect_global_array for how the row-major library sees them).
module resurgo
  use, intrinsic :: iso_c_binding
  use, intrinsic :: iso_fortran_env, only: real32, real64, int32, int64, error_unit
  implicit none
  private

  ! Return codes (resurgo.h).
  integer(c_int), parameter, public :: RSG_OK = 0
  integer(c_int), parameter, public :: RSG_EINVAL = -1     ! bad argument
  integer(c_int), parameter, public :: RSG_ENOTFOUND = -2  ! no such version, region or file
  integer(c_int), parameter, public :: RSG_ECORRUPT = -3   ! checksum mismatch or damaged file
  integer(c_int), parameter, public :: RSG_EMISMATCH = -4  ! checkpoint does not fit the regions
  integer(c_int), parameter, public :: RSG_ESTORAGE = -5   ! file-system error
  integer(c_int), parameter, public :: RSG_ECONFIG = -6    ! unknown configuration key or bad value
  integer(c_int), parameter, public :: RSG_EFORMAT = -7    ! not a Resurgo container
  integer(c_int), parameter, public :: RSG_ESTATE = -8     ! call not valid now
  integer(c_int), parameter, public :: RSG_EINTERNAL = -9  ! unexpected failure

  ! Levels (tiers).
  integer(c_int), parameter, public :: RSG_L0 = 0  ! device cache (GPU memory)
  integer(c_int), parameter, public :: RSG_L1 = 1  ! memory level: whole versions in host memory
  integer(c_int), parameter, public :: RSG_L2 = 2  ! node-local directory
  integer(c_int), parameter, public :: RSG_L3 = 3  ! partner copy on another node
  integer(c_int), parameter, public :: RSG_L4 = 4  ! persistent (parallel) file system

  integer(c_int), parameter, public :: RSG_LEVELS = 5  ! arrays indexed by level: (RSG_L0:RSG_L4)

  integer(c_int), parameter, public :: RSG_ALL = -1     ! wait: every pending version
  integer(c_int), parameter, public :: RSG_LATEST = -1  ! restart: newest intact version

  ! Region kinds (rsg_region_description%kind).
  integer(c_int), parameter, public :: RSG_KIND_HOST = 0
  integer(c_int), parameter, public :: RSG_KIND_DEVICE = 1
  integer(c_int), parameter, public :: RSG_KIND_MANAGED = 2

  ! Bounds of a region table (labels of at most 255 bytes and dtype names of
  ! at most 64, NUL-terminated here; shapes of at most 32 axes).
  integer(c_int), parameter, public :: RSG_LABEL_CAPACITY = 256
  integer(c_int), parameter, public :: RSG_DTYPE_CAPACITY = 65
  integer(c_int), parameter, public :: RSG_MAX_DIMS = 32

  ! ---- The C API's structs, field for field (resurgo.h) ---------------------
  ! Named as in C. Unsigned C fields are signed here (Fortran has no
  ! unsigned integers; counts and sizes stay below 2**63). Arrays indexed by
  ! level start at 0, so stats%seconds_to_level(RSG_L4) reads as in C.
  ! Strings are NUL-terminated character(kind=c_char) arrays: resurgo_string
  ! turns one into a Fortran string.

  ! What one checkpoint cost (resurgo_stats); per-level entries are -1 where
  ! the version does not go or has not arrived.
  type, bind(C), public :: rsg_version_stats
    integer(c_int) :: version
    character(kind=c_char) :: capture(16)            ! "copy", "synchronous", "fork" or "delta"
    integer(c_long_long) :: bytes                    ! protected bytes captured
    real(c_double) :: blocking_seconds               ! time the checkpoint blocked, in all
    real(c_double) :: backpressure_seconds           ! ... waiting for buffer space or the forked writer
    real(c_double) :: first_touch_seconds            ! ... faulting in buffer pages
    real(c_double) :: copy_seconds                   ! ... copying (copy) or forking (fork)
    integer(c_long_long) :: copy_on_write_bytes      ! fork: pages written while the child wrote
    real(c_double) :: seconds_to_level(0:RSG_LEVELS - 1)  ! from the checkpoint until durable there
    integer(c_long_long) :: stored_bytes(0:RSG_LEVELS - 1)  ! bytes of the file at each level
    integer(c_int) :: failed                         ! 1 when a background error hit this version
    integer(c_int) :: base_version                   ! delta: the version it builds on; -1 = full
    integer(c_long_long) :: captured_bytes           ! the state, or the delta's blocks
    integer(c_long_long) :: dirty_bytes              ! in the pages the tracker reported written
    integer(c_long_long) :: granularity_bytes        ! largest management block in force
    character(kind=c_char) :: tracker(16)            ! "uffd", "soft-dirty", "mprotect", "hash"; ""
    integer(c_long_long) :: device_bytes             ! bytes of device and managed regions
    character(kind=c_char) :: device_path(8)         ! "l0", "host" or ""
    real(c_double) :: device_wait_seconds            ! part of copy_seconds waiting for L0
  end type rsg_version_stats

  ! The device regions' caches (resurgo_device_stats; docs/gpu.md): the L0
  ! device cache and the host staging buffer they are copied into.
  type, bind(C), public :: rsg_device_caches
    integer(c_int) :: has_cache                      ! 1 with device.capacity > 0 and a usable backend
    integer(c_long_long) :: cache_capacity           ! reserved bytes
    integer(c_long_long) :: cache_mapped             ! bytes usable now
    integer(c_long_long) :: cache_used               ! bytes held by cached versions
    integer(c_long_long) :: cache_versions           ! cached versions
    integer(c_long_long) :: cache_evicted            ! versions evicted so far
    integer(c_long_long) :: cache_bypassed           ! versions too large for L0
    integer(c_int) :: cache_growth_done              ! fully mapped, or stopped growing
    character(kind=c_char) :: cache_growth_stopped(256)  ! why mapping stopped early
    real(c_double) :: cache_mapping_seconds
    real(c_double) :: cache_map_wait_seconds
    real(c_double) :: cache_flush_wait_seconds
    integer(c_int) :: cache_device                   ! the ordinal of the device it is on (device.ordinal)
    integer(c_long_long) :: cache_prefetched         ! versions resurgo_prefetch staged into the cache
    integer(c_long_long) :: cache_prefetch_too_large ! too large for it: restored from host memory
    integer(c_long_long) :: cache_prefetch_failed    ! stagings that failed: restored from the next level
    integer(c_long_long) :: cache_restored_from_prefetch  ! restarts copying a staged version device to device
    integer(c_int) :: has_staging                    ! 1 once a device region was checkpointed
    integer(c_long_long) :: staging_capacity
    character(kind=c_char) :: pin(8)                 ! "lazy", "eager", "off"
    character(kind=c_char) :: touch(16)              ! "auto", "concurrent", "sequential"
    character(kind=c_char) :: state(40)              ! "touching", "pinning", "pinned", ...
    character(kind=c_char) :: strategy(16)           ! the touch strategy in force
    integer(c_long_long) :: touched_bytes
    real(c_double) :: touch_seconds
    integer(c_int) :: pinned
    integer(c_long_long) :: pin_pieces
    real(c_double) :: pin_seconds
    real(c_double) :: token_wait_seconds
    character(kind=c_char) :: pin_failure(256)       ! the driver's error when pinning failed
    integer(c_long_long) :: flushes
    integer(c_long_long) :: flushes_to_untouched
    integer(c_long_long) :: checkpoints
    real(c_double) :: touch_alone, touch_concurrent, flush_touched, flush_untouched, flush_concurrent
    character(kind=c_char) :: decision(512)          ! the touch model's latest choice, one line
  end type rsg_device_caches

  ! The last restart (resurgo_last_restart).
  type, bind(C), public :: rsg_restart_report
    integer(c_int) :: version                        ! restored; -1 before any restart succeeded
    integer(c_int) :: level                          ! read from; -1 likewise
    real(c_double) :: seconds
    integer(c_long_long) :: bytes
    integer(c_int) :: skipped                        ! damaged copies skipped or repaired
  end type rsg_restart_report

  ! A region of a committed version (resurgo_describe).
  type, bind(C), public :: rsg_region_description
    integer(c_int) :: id
    integer(c_int) :: kind                           ! RSG_KIND_HOST, RSG_KIND_DEVICE, RSG_KIND_MANAGED
    integer(c_long_long) :: bytes
    character(kind=c_char) :: label(RSG_LABEL_CAPACITY)
    character(kind=c_char) :: dtype(RSG_DTYPE_CAPACITY)  ! NumPy's name; "" when not given
    integer(c_int) :: ndims                          ! entries of shape in use
    ! Row-major, the slowest axis first: Fortran's axis order reversed, as
    ! for resurgo_protect_global.
    integer(c_long_long) :: shape(RSG_MAX_DIMS)
  end type rsg_region_description

  ! A version the store holds (resurgo_versions).
  type, bind(C), public :: rsg_version_info
    integer(c_int) :: version
    integer(c_int) :: pending                        ! 1: captured, not yet durable everywhere
    integer(c_int) :: levels(0:RSG_LEVELS - 1)       ! 1 where the level holds a complete copy
  end type rsg_version_info

  ! Message of the wrapper's own refusal of the last call; not allocated
  ! when the last call reached the C API. Process-wide, unlike the C API's
  ! thread-local one: Fortran has no thread-local variables without OpenMP.
  character(len=:), allocatable :: wrapper_error

  ! Opaque store handle; c_null_ptr when not open.
  type, public :: resurgo_store
    type(c_ptr) :: handle = c_null_ptr
  end type resurgo_store

  ! ---- The C API, bound one to one ------------------------------------------
  public :: rsg_open, rsg_close, rsg_protect, rsg_protect_device, rsg_protect_managed, rsg_unprotect, &
            rsg_set_metadata, rsg_get_metadata, rsg_checkpoint, rsg_wait, rsg_latest_version, rsg_restart, &
            rsg_prefetch, rsg_discard, rsg_need_checkpoint, rsg_stats, rsg_last_restart, rsg_device_stats, &
            rsg_set_capture_streams, rsg_versions, rsg_describe, rsg_persist, rsg_last_error, &
            rsg_appic_open, rsg_appic_register, rsg_appic_write, rsg_appic_read, &
            rsg_appic_version, rsg_appic_close, rsg_appic_finalize
#ifdef RESURGO_HAVE_MPI
  public :: rsg_open_mpi_fortran, rsg_protect_global
#endif

  abstract interface
    ! rsg_protect, rsg_protect_device and rsg_protect_managed. label may be
    ! c_null_ptr (then "region-<id>").
    function protect_call(s, id, ptr, bytes, label) bind(C) result(rc)
      import :: c_ptr, c_int, c_size_t
      type(c_ptr), value :: s
      integer(c_int), value :: id
      type(c_ptr), value :: ptr
      integer(c_size_t), value :: bytes
      type(c_ptr), value :: label
      integer(c_int) :: rc
    end function protect_call
  end interface

  procedure(protect_call), bind(C, name="rsg_protect") :: rsg_protect
  procedure(protect_call), bind(C, name="rsg_protect_device") :: rsg_protect_device
  procedure(protect_call), bind(C, name="rsg_protect_managed") :: rsg_protect_managed

  interface
    ! config_path may be c_null_ptr; otherwise c_loc of a NUL-terminated string.
    function rsg_open(config_path, name, out) bind(C, name="rsg_open") result(rc)
      import :: c_ptr, c_char, c_int
      type(c_ptr), value :: config_path
      character(kind=c_char), dimension(*), intent(in) :: name
      type(c_ptr), intent(out) :: out
      integer(c_int) :: rc
    end function rsg_open

    function rsg_close(s) bind(C, name="rsg_close") result(rc)
      import :: c_ptr, c_int
      type(c_ptr), value :: s
      integer(c_int) :: rc
    end function rsg_close

    function rsg_unprotect(s, id) bind(C, name="rsg_unprotect") result(rc)
      import :: c_ptr, c_int
      type(c_ptr), value :: s
      integer(c_int), value :: id
      integer(c_int) :: rc
    end function rsg_unprotect

    function rsg_set_metadata(s, data, bytes) bind(C, name="rsg_set_metadata") result(rc)
      import :: c_ptr, c_int, c_size_t
      type(c_ptr), value :: s
      type(c_ptr), value :: data
      integer(c_size_t), value :: bytes
      integer(c_int) :: rc
    end function rsg_set_metadata

    function rsg_get_metadata(s, data, capacity, bytes) bind(C, name="rsg_get_metadata") &
        result(rc)
      import :: c_ptr, c_int, c_size_t
      type(c_ptr), value :: s
      type(c_ptr), value :: data
      integer(c_size_t), value :: capacity
      integer(c_size_t), intent(out) :: bytes
      integer(c_int) :: rc
    end function rsg_get_metadata

    function rsg_checkpoint(s, version) bind(C, name="rsg_checkpoint") result(rc)
      import :: c_ptr, c_int
      type(c_ptr), value :: s
      integer(c_int), value :: version
      integer(c_int) :: rc
    end function rsg_checkpoint

    function rsg_wait(s, version, level) bind(C, name="rsg_wait") result(rc)
      import :: c_ptr, c_int
      type(c_ptr), value :: s
      integer(c_int), value :: version
      integer(c_int), value :: level
      integer(c_int) :: rc
    end function rsg_wait

    ! Fortran names are case-insensitive, so rsg_latest would clash with the
    ! constant RSG_LATEST: the binding of rsg_latest is rsg_latest_version.
    function rsg_latest_version(s, version) bind(C, name="rsg_latest") result(rc)
      import :: c_ptr, c_int
      type(c_ptr), value :: s
      integer(c_int), intent(inout) :: version  ! written only on success
      integer(c_int) :: rc
    end function rsg_latest_version

    ! restored is written only on success, so it is INTENT(INOUT): with
    ! INTENT(OUT) gfortran drops the caller's initial value as a dead store
    ! (measured: the wrapper's -1 for "nothing restored" was lost).
    function rsg_restart(s, version, restored) bind(C, name="rsg_restart") result(rc)
      import :: c_ptr, c_int
      type(c_ptr), value :: s
      integer(c_int), value :: version
      integer(c_int), intent(inout) :: restored
      integer(c_int) :: rc
    end function rsg_restart

    function rsg_prefetch(s, versions, count) bind(C, name="rsg_prefetch") result(rc)
      import :: c_ptr, c_int, c_size_t
      type(c_ptr), value :: s
      integer(c_int), intent(in) :: versions(*)
      integer(c_size_t), value :: count
      integer(c_int) :: rc
    end function rsg_prefetch

    function rsg_set_capture_streams(s, streams, count) bind(C, name="rsg_set_capture_streams") result(rc)
      import :: c_ptr, c_int, c_size_t
      type(c_ptr), value :: s
      type(c_ptr), intent(in) :: streams(*)
      integer(c_size_t), value :: count
      integer(c_int) :: rc
    end function rsg_set_capture_streams

    function rsg_discard(s, version) bind(C, name="rsg_discard") result(rc)
      import :: c_ptr, c_int
      type(c_ptr), value :: s
      integer(c_int), value :: version
      integer(c_int) :: rc
    end function rsg_discard

    function rsg_need_checkpoint(s, need) bind(C, name="rsg_need_checkpoint") result(rc)
      import :: c_ptr, c_int
      type(c_ptr), value :: s
      integer(c_int), intent(inout) :: need
      integer(c_int) :: rc
    end function rsg_need_checkpoint

    function rsg_stats(s, version, out) bind(C, name="rsg_stats") result(rc)
      import :: c_ptr, c_int, rsg_version_stats
      type(c_ptr), value :: s
      integer(c_int), value :: version
      type(rsg_version_stats), intent(out) :: out
      integer(c_int) :: rc
    end function rsg_stats

    function rsg_last_restart(s, out) bind(C, name="rsg_last_restart") result(rc)
      import :: c_ptr, c_int, rsg_restart_report
      type(c_ptr), value :: s
      type(rsg_restart_report), intent(out) :: out
      integer(c_int) :: rc
    end function rsg_last_restart

    function rsg_device_stats(s, out) bind(C, name="rsg_device_stats") result(rc)
      import :: c_ptr, c_int, rsg_device_caches
      type(c_ptr), value :: s
      type(rsg_device_caches), intent(out) :: out
      integer(c_int) :: rc
    end function rsg_device_stats

    ! The lists: `capacity` entries at `out`; count receives the full number,
    ! and when it exceeds capacity nothing is copied (RSG_EINVAL).
    function rsg_versions(s, out, capacity, count) bind(C, name="rsg_versions") result(rc)
      import :: c_ptr, c_int, c_size_t, rsg_version_info
      type(c_ptr), value :: s
      type(rsg_version_info), intent(inout) :: out(*)
      integer(c_size_t), value :: capacity
      integer(c_size_t), intent(inout) :: count
      integer(c_int) :: rc
    end function rsg_versions

    function rsg_describe(s, version, out, capacity, count) bind(C, name="rsg_describe") result(rc)
      import :: c_ptr, c_int, c_size_t, rsg_region_description
      type(c_ptr), value :: s
      integer(c_int), value :: version
      type(rsg_region_description), intent(inout) :: out(*)
      integer(c_size_t), value :: capacity
      integer(c_size_t), intent(inout) :: count
      integer(c_int) :: rc
    end function rsg_describe

    function rsg_persist(s, version, level) bind(C, name="rsg_persist") result(rc)
      import :: c_ptr, c_int
      type(c_ptr), value :: s
      integer(c_int), value :: version
      integer(c_int), value :: level
      integer(c_int) :: rc
    end function rsg_persist

    ! Thread-local message of the last failure (a C string; see
    ! resurgo_last_error for a Fortran one).
    function rsg_last_error() bind(C, name="rsg_last_error") result(msg)
      import :: c_ptr
      type(c_ptr) :: msg
    end function rsg_last_error

    function rsg_appic_open(path) bind(C, name="rsg_appic_open") result(rc)
      import :: c_char, c_int
      character(kind=c_char), dimension(*), intent(in) :: path
      integer(c_int) :: rc
    end function rsg_appic_open

    function rsg_appic_register(ptr, bytes) bind(C, name="rsg_appic_register") result(rc)
      import :: c_ptr, c_int, c_size_t
      type(c_ptr), value :: ptr
      integer(c_size_t), value :: bytes
      integer(c_int) :: rc
    end function rsg_appic_register

    function rsg_appic_write(ptr) bind(C, name="rsg_appic_write") result(rc)
      import :: c_ptr, c_int
      type(c_ptr), value :: ptr
      integer(c_int) :: rc
    end function rsg_appic_write

    function rsg_appic_read(ptr) bind(C, name="rsg_appic_read") result(rc)
      import :: c_ptr, c_int
      type(c_ptr), value :: ptr
      integer(c_int) :: rc
    end function rsg_appic_read

    function rsg_appic_version(version) bind(C, name="rsg_appic_version") result(rc)
      import :: c_int
      integer(c_int), intent(inout) :: version  ! written only on success
      integer(c_int) :: rc
    end function rsg_appic_version

    function rsg_appic_close() bind(C, name="rsg_appic_close") result(rc)
      import :: c_int
      integer(c_int) :: rc
    end function rsg_appic_close

    function rsg_appic_finalize() bind(C, name="rsg_appic_finalize") result(rc)
      import :: c_int
      integer(c_int) :: rc
    end function rsg_appic_finalize

#ifdef RESURGO_HAVE_MPI
    ! comm is a Fortran MPI handle (MPI_Fint, a default integer in Open MPI
    ! and MPICH); the C rsg_open_mpi takes an MPI_Comm, which Fortran has not.
    function rsg_open_mpi_fortran(config_path, name, comm, out) bind(C, name="rsg_open_mpi_fortran") &
        result(rc)
      import :: c_ptr, c_char, c_int
      type(c_ptr), value :: config_path
      character(kind=c_char), dimension(*), intent(in) :: name
      integer(c_int), value :: comm
      type(c_ptr), intent(out) :: out
      integer(c_int) :: rc
    end function rsg_open_mpi_fortran

    ! global_shape, offset and shape have ndims entries each, row-major
    ! (the slowest axis first).
    function rsg_protect_global(s, id, ptr, bytes, label, dtype, ndims, global_shape, offset, shape) &
        bind(C, name="rsg_protect_global") result(rc)
      import :: c_ptr, c_char, c_int, c_size_t, c_int64_t
      type(c_ptr), value :: s
      integer(c_int), value :: id
      type(c_ptr), value :: ptr
      integer(c_size_t), value :: bytes
      type(c_ptr), value :: label
      character(kind=c_char), dimension(*), intent(in) :: dtype
      integer(c_int), value :: ndims
      integer(c_int64_t), intent(in) :: global_shape(*), offset(*), shape(*)
      integer(c_int) :: rc
    end function rsg_protect_global
#endif

    function c_strlen(s) bind(C, name="strlen") result(n)
      import :: c_ptr, c_size_t
      type(c_ptr), value :: s
      integer(c_size_t) :: n
    end function c_strlen
  end interface

  ! ---- Fortran wrappers -----------------------------------------------------
  public :: resurgo_open, resurgo_close, resurgo_protect, resurgo_protect_bytes, resurgo_protect_device, &
            resurgo_protect_managed, resurgo_unprotect, resurgo_set_metadata, resurgo_get_metadata, &
            resurgo_checkpoint, resurgo_wait, resurgo_latest, resurgo_restart, resurgo_prefetch, resurgo_discard, &
            resurgo_need_checkpoint, resurgo_stats, resurgo_last_restart, resurgo_device_stats, &
            resurgo_set_capture_streams, &
            resurgo_versions, resurgo_describe, resurgo_persist, &
            resurgo_last_error, resurgo_string
#ifdef RESURGO_HAVE_MPI
  public :: resurgo_open_mpi, resurgo_protect_global
#endif

  public :: appic_open, appic_register, appic_write, appic_read, appic_version, appic_close, &
            appic_finalize

  ! bytes as sizeof / c_sizeof give it (c_size_t) or as a default integer.
  interface appic_register
    module procedure appic_register_size_t, appic_register_int32
  end interface appic_register

  ! Any rank (scalars included) of these kinds; see protect_array.
  interface resurgo_protect
    module procedure protect_real32, protect_real64, protect_int32, protect_int64, &
                     protect_complex32, protect_complex64
  end interface resurgo_protect

#ifdef RESURGO_HAVE_MPI
  ! The kinds of resurgo_protect, of rank 1 or more; see protect_global_array.
  interface resurgo_protect_global
    module procedure protect_global_real32, protect_global_real64, protect_global_int32, &
                     protect_global_int64, protect_global_complex32, protect_global_complex64
  end interface resurgo_protect_global
#endif

  ! For the modules built on this one (resurgo_auto): their wrappers end as
  ! these do, so that ierr, resurgo_last_error() and the stop without ierr
  ! behave alike (a refusal of one module's wrapper must not outlive a later
  ! call of the other's). Generic names over the private procedures, so that
  ! programs using this module see no unprefixed name.
  public :: resurgo_finish_call, resurgo_refuse_call, resurgo_data_address
  interface resurgo_finish_call
    module procedure finish
  end interface resurgo_finish_call
  interface resurgo_refuse_call
    module procedure fail
  end interface resurgo_refuse_call
  interface resurgo_data_address
    module procedure data_address
  end interface resurgo_data_address

contains

  ! Message of the last failure: the wrapper's own when it refused the last
  ! call before reaching the C API, otherwise rsg_last_error() of this
  ! thread (which a successful C call clears).
  function resurgo_last_error() result(msg)
    character(len=:), allocatable :: msg
    type(c_ptr) :: p
    character(kind=c_char), pointer :: chars(:)
    if (allocated(wrapper_error)) then
      msg = wrapper_error
      return
    end if
    p = rsg_last_error()
    if (.not. c_associated(p)) then
      msg = ""
      return
    end if
    call c_f_pointer(p, chars, [c_strlen(p)])
    msg = resurgo_string(chars)
  end function resurgo_last_error

  ! The text of a NUL-terminated character(kind=c_char) array, such as the
  ! string fields of rsg_version_stats or rsg_region_description, as a
  ! Fortran string: the characters before the first NUL (all of them when
  ! there is none).
  pure function resurgo_string(chars) result(text)
    character(kind=c_char), intent(in) :: chars(:)
    character(len=:), allocatable :: text
    integer :: length, i
    length = findloc(chars, c_null_char, dim=1) - 1
    if (length < 0) length = size(chars)
    allocate(character(len=length) :: text)
    do i = 1, length
      text(i:i) = chars(i)
    end do
  end function resurgo_string

  ! Ends a wrapper with the result of its C call, which has set (or
  ! cleared) rsg_last_error: an older refusal of the wrapper no longer applies.
  subroutine finish(rc, what, ierr)
    integer(c_int), intent(in) :: rc
    character(len=*), intent(in) :: what
    integer, intent(out), optional :: ierr
    if (allocated(wrapper_error)) deallocate(wrapper_error)
    call report(rc, what, ierr)
  end subroutine finish

  ! Ends a wrapper that refuses the call itself, before the C API, with the
  ! message resurgo_last_error() will return.
  subroutine fail(rc, what, message, ierr)
    integer(c_int), intent(in) :: rc
    character(len=*), intent(in) :: what, message
    integer, intent(out), optional :: ierr
    wrapper_error = message
    call report(rc, what, ierr)
  end subroutine fail

  ! Hands rc to the caller through ierr, or stops with the message.
  subroutine report(rc, what, ierr)
    integer(c_int), intent(in) :: rc
    character(len=*), intent(in) :: what
    integer, intent(out), optional :: ierr
    if (present(ierr)) then
      ierr = int(rc)
    else if (rc /= RSG_OK) then
      write(error_unit, '(a, a, i0, a, a)') what, ' failed (', rc, '): ', resurgo_last_error()
      error stop 1
    end if
  end subroutine report

  ! Fortran string -> NUL-terminated C string (kept alive by the caller).
  pure function c_string(s) result(cs)
    character(len=*), intent(in) :: s
    character(kind=c_char, len=:), allocatable :: cs
    cs = trim(s) // c_null_char
  end function c_string

  ! Opens the store `name`; `config` is the path of a TOML file (optional;
  ! RESURGO_<SECTION>_<KEY> environment variables apply either way).
  subroutine resurgo_open(name, store, ierr, config)
    character(len=*), intent(in) :: name
    type(resurgo_store), intent(out) :: store
    integer, intent(out), optional :: ierr
    character(len=*), intent(in), optional :: config
    character(kind=c_char, len=:), allocatable, target :: cfg
    integer(c_int) :: rc
    if (present(config)) then
      cfg = c_string(config)
      rc = rsg_open(c_loc(cfg), c_string(name), store%handle)
    else
      rc = rsg_open(c_null_ptr, c_string(name), store%handle)
    end if
    call finish(rc, 'resurgo_open', ierr)
  end subroutine resurgo_open

  ! Waits for pending work and frees the store (also when it reports an error).
  subroutine resurgo_close(store, ierr)
    type(resurgo_store), intent(inout) :: store
    integer, intent(out), optional :: ierr
    integer(c_int) :: rc
    rc = rsg_close(store%handle)
    store%handle = c_null_ptr
    call finish(rc, 'resurgo_close', ierr)
  end subroutine resurgo_close

  ! Protects `bytes` bytes at `ptr` (any type, e.g. c_loc of a derived type).
  subroutine resurgo_protect_bytes(store, id, ptr, bytes, label, ierr)
    type(resurgo_store), intent(in) :: store
    integer, intent(in) :: id
    type(c_ptr), intent(in) :: ptr
    integer(c_size_t), intent(in) :: bytes
    character(len=*), intent(in) :: label
    integer, intent(out), optional :: ierr
    call protect_pointer(rsg_protect, 'resurgo_protect', store, id, ptr, bytes, label, ierr)
  end subroutine resurgo_protect_bytes

  ! Protects `bytes` bytes of CUDA device memory at `device_ptr` (from
  ! cudaMalloc through iso_c_binding, or OpenACC's acc_deviceptr): checkpoints
  ! copy it into the L0 device cache, restart writes it back (docs/gpu.md).
  subroutine resurgo_protect_device(store, id, device_ptr, bytes, label, ierr)
    type(resurgo_store), intent(in) :: store
    integer, intent(in) :: id
    type(c_ptr), intent(in) :: device_ptr
    integer(c_size_t), intent(in) :: bytes
    character(len=*), intent(in) :: label
    integer, intent(out), optional :: ierr
    call protect_pointer(rsg_protect_device, 'resurgo_protect_device', store, id, device_ptr, bytes, label, ierr)
  end subroutine resurgo_protect_device

  ! Protects `bytes` bytes of CUDA managed memory at `ptr` (cudaMallocManaged,
  ! or OpenACC/CUDA Fortran managed arrays through c_loc): the host reads it
  ! like host memory, and the version records its kind.
  subroutine resurgo_protect_managed(store, id, ptr, bytes, label, ierr)
    type(resurgo_store), intent(in) :: store
    integer, intent(in) :: id
    type(c_ptr), intent(in) :: ptr
    integer(c_size_t), intent(in) :: bytes
    character(len=*), intent(in) :: label
    integer, intent(out), optional :: ierr
    call protect_pointer(rsg_protect_managed, 'resurgo_protect_managed', store, id, ptr, bytes, label, ierr)
  end subroutine resurgo_protect_managed

  ! The protect wrappers taking an address: `c_call` is the C protect of the
  ! region's kind, `what` the wrapper's name for its failure.
  subroutine protect_pointer(c_call, what, store, id, ptr, bytes, label, ierr)
    procedure(protect_call) :: c_call
    character(len=*), intent(in) :: what
    type(resurgo_store), intent(in) :: store
    integer, intent(in) :: id
    type(c_ptr), intent(in) :: ptr
    integer(c_size_t), intent(in) :: bytes
    character(len=*), intent(in) :: label
    integer, intent(out), optional :: ierr
    character(kind=c_char, len=:), allocatable, target :: clabel
    clabel = c_string(label)
    call finish(c_call(store%handle, int(id, c_int), ptr, bytes, c_loc(clabel)), what, ierr)
  end subroutine protect_pointer

  ! resurgo_protect has one specific per element kind, each forwarding to
  ! protect_array; the rank is free (assumed rank: scalars and ranks 1 to 15).
  ! One specific for every type (type(*), dimension(..)) is not possible in
  ! standard Fortran: an assumed-type dummy may be given to c_loc, size and
  ! is_contiguous but not to storage_size (F2018 C710; gfortran 12 refuses
  ! it, and sizeof is a GNU extension that -std=f2018 does not offer). The
  ! typed specifics also turn a derived type with pointer or allocatable
  ! components, whose bytes cannot be restored, into a compile-time error;
  ! resurgo_protect_bytes takes anything else.
  !
  ! The dummies are not CONTIGUOUS: given a strided section, gfortran 12
  ! then passes a packed temporary copy (measured: c_loc differs from the
  ! actual's address, is_contiguous is true), and the store would keep the
  ! address of memory freed on return. Without the attribute the section
  ! arrives as it is and protect_array refuses it.
  subroutine protect_array(store, id, array, element_bits, label, ierr)
    type(resurgo_store), intent(in) :: store
    integer, intent(in) :: id
    type(*), dimension(..), intent(inout), target :: array
    integer, intent(in) :: element_bits
    character(len=*), intent(in) :: label
    integer, intent(out), optional :: ierr
    if (.not. protectable(array, 'resurgo_protect', label, ierr)) return
    call resurgo_protect_bytes(store, id, data_address(array), array_bytes(array, element_bits), label, ierr)
  end subroutine protect_array

  ! Whether the store may keep the address of `array`: a strided section is
  ! refused, failing the call `what`.
  logical function protectable(array, what, label, ierr) result(ok)
    type(*), dimension(..), intent(in) :: array
    character(len=*), intent(in) :: what, label
    integer, intent(out), optional :: ierr
    ok = is_contiguous(array)
    if (.not. ok) call fail(RSG_EINVAL, what, "array '" // trim(label) // &
                            "' is not contiguous (a strided section?): protect the whole array, " // &
                            "declared TARGET, so that the store keeps the address of your data", ierr)
  end function protectable

  integer(c_size_t) function array_bytes(array, element_bits)
    type(*), dimension(..), intent(in) :: array
    integer, intent(in) :: element_bits
    array_bytes = size(array, kind=c_size_t) * int(element_bits / 8, c_size_t)
  end function array_bytes

  ! Address of a contiguous array; c_null_ptr for a zero-size one, which
  ! c_loc does not take (the C call then refuses it with its own message).
  function data_address(array) result(address)
    type(*), dimension(..), intent(in), target :: array
    type(c_ptr) :: address
    address = c_null_ptr
    if (size(array) > 0) address = c_loc(array)
  end function data_address

  subroutine protect_real32(store, id, array, label, ierr)
    type(resurgo_store), intent(in) :: store
    integer, intent(in) :: id
    real(real32), dimension(..), intent(inout), target :: array
    character(len=*), intent(in) :: label
    integer, intent(out), optional :: ierr
    call protect_array(store, id, array, storage_size(array), label, ierr)
  end subroutine protect_real32

  subroutine protect_real64(store, id, array, label, ierr)
    type(resurgo_store), intent(in) :: store
    integer, intent(in) :: id
    real(real64), dimension(..), intent(inout), target :: array
    character(len=*), intent(in) :: label
    integer, intent(out), optional :: ierr
    call protect_array(store, id, array, storage_size(array), label, ierr)
  end subroutine protect_real64

  subroutine protect_int32(store, id, array, label, ierr)
    type(resurgo_store), intent(in) :: store
    integer, intent(in) :: id
    integer(int32), dimension(..), intent(inout), target :: array
    character(len=*), intent(in) :: label
    integer, intent(out), optional :: ierr
    call protect_array(store, id, array, storage_size(array), label, ierr)
  end subroutine protect_int32

  subroutine protect_int64(store, id, array, label, ierr)
    type(resurgo_store), intent(in) :: store
    integer, intent(in) :: id
    integer(int64), dimension(..), intent(inout), target :: array
    character(len=*), intent(in) :: label
    integer, intent(out), optional :: ierr
    call protect_array(store, id, array, storage_size(array), label, ierr)
  end subroutine protect_int64

  subroutine protect_complex32(store, id, array, label, ierr)
    type(resurgo_store), intent(in) :: store
    integer, intent(in) :: id
    complex(real32), dimension(..), intent(inout), target :: array
    character(len=*), intent(in) :: label
    integer, intent(out), optional :: ierr
    call protect_array(store, id, array, storage_size(array), label, ierr)
  end subroutine protect_complex32

  subroutine protect_complex64(store, id, array, label, ierr)
    type(resurgo_store), intent(in) :: store
    integer, intent(in) :: id
    complex(real64), dimension(..), intent(inout), target :: array
    character(len=*), intent(in) :: label
    integer, intent(out), optional :: ierr
    call protect_array(store, id, array, storage_size(array), label, ierr)
  end subroutine protect_complex64

#ifdef RESURGO_HAVE_MPI
  ! Opens the store `name` on every rank of the MPI communicator `comm` (a
  ! Fortran handle: MPI_COMM_WORLD of `use mpi`, comm%mpi_val of `use
  ! mpi_f08`); collective, MPI initialized. `config` as in resurgo_open.
  subroutine resurgo_open_mpi(name, comm, store, ierr, config)
    character(len=*), intent(in) :: name
    integer, intent(in) :: comm
    type(resurgo_store), intent(out) :: store
    integer, intent(out), optional :: ierr
    character(len=*), intent(in), optional :: config
    character(kind=c_char, len=:), allocatable, target :: cfg
    integer(c_int) :: rc
    if (present(config)) then
      cfg = c_string(config)
      rc = rsg_open_mpi_fortran(c_loc(cfg), c_string(name), int(comm, c_int), store%handle)
    else
      rc = rsg_open_mpi_fortran(c_null_ptr, c_string(name), int(comm, c_int), store%handle)
    end if
    call finish(rc, 'resurgo_open_mpi', ierr)
  end subroutine resurgo_open_mpi

  ! resurgo_protect_global: `array` (rank 1 or more) is this rank's block of
  ! a global array of `global_shape` elements; `offset` counts, along each
  ! axis, the global elements before the block (0 for the first block: a
  ! block starting at index i of a 1-based global array has offset i - 1).
  ! Both follow Fortran's axis order, as shape(array) does.
  !
  ! The library is row-major (its last axis varies fastest), Fortran is
  ! column-major (its first does): u(n1, n2, n3) holds the bytes of the
  ! row-major array of shape (n3, n2, n1). So global_shape, offset and the
  ! block's shape reach the library reversed, and a C, C++ or Python reader
  ! of the store, or a restart on another number of ranks, sees the global
  ! array G(g1, g2, g3) as the row-major array of shape (g3, g2, g1) with each
  ! element at the same place. A Fortran program has nothing to reverse.
  subroutine protect_global_array(store, id, array, dtype, element_bits, label, global_shape, offset, ierr)
    type(resurgo_store), intent(in) :: store
    integer, intent(in) :: id
    type(*), dimension(..), intent(inout), target :: array
    character(len=*), intent(in) :: dtype
    integer, intent(in) :: element_bits
    character(len=*), intent(in) :: label
    integer, intent(in) :: global_shape(:), offset(:)
    integer, intent(out), optional :: ierr
    character(kind=c_char, len=:), allocatable, target :: clabel
    if (rank(array) == 0 .or. size(global_shape) /= rank(array) .or. size(offset) /= rank(array)) then
      call fail(RSG_EINVAL, 'resurgo_protect_global', "array '" // trim(label) // "' has " // &
                decimal(rank(array)) // " axes, global_shape " // decimal(size(global_shape)) // &
                " and offset " // decimal(size(offset)) // ": give one entry per axis of an array " // &
                "(a scalar is no block; protect it with resurgo_protect)", ierr)
      return
    end if
    if (.not. protectable(array, 'resurgo_protect_global', label, ierr)) return
    clabel = c_string(label)
    call finish(rsg_protect_global(store%handle, int(id, c_int), data_address(array), &
                                   array_bytes(array, element_bits), c_loc(clabel), c_string(dtype), &
                                   int(rank(array), c_int), row_major(global_shape), row_major(offset), &
                                   row_major(shape(array))), 'resurgo_protect_global', ierr)
  end subroutine protect_global_array

  ! Axis values in the library's order: Fortran's, reversed.
  pure function row_major(values) result(reversed)
    integer, intent(in) :: values(:)
    integer(c_int64_t) :: reversed(size(values))
    reversed = int(values(size(values):1:-1), c_int64_t)
  end function row_major

  pure function decimal(n) result(text)
    integer, intent(in) :: n
    character(len=:), allocatable :: text
    character(len=12) :: buf
    write(buf, '(i0)') n
    text = trim(buf)
  end function decimal

  subroutine protect_global_real32(store, id, array, label, global_shape, offset, ierr)
    type(resurgo_store), intent(in) :: store
    integer, intent(in) :: id
    real(real32), dimension(..), intent(inout), target :: array
    character(len=*), intent(in) :: label
    integer, intent(in) :: global_shape(:), offset(:)
    integer, intent(out), optional :: ierr
    call protect_global_array(store, id, array, 'float32', storage_size(array), label, global_shape, offset, ierr)
  end subroutine protect_global_real32

  subroutine protect_global_real64(store, id, array, label, global_shape, offset, ierr)
    type(resurgo_store), intent(in) :: store
    integer, intent(in) :: id
    real(real64), dimension(..), intent(inout), target :: array
    character(len=*), intent(in) :: label
    integer, intent(in) :: global_shape(:), offset(:)
    integer, intent(out), optional :: ierr
    call protect_global_array(store, id, array, 'float64', storage_size(array), label, global_shape, offset, ierr)
  end subroutine protect_global_real64

  subroutine protect_global_int32(store, id, array, label, global_shape, offset, ierr)
    type(resurgo_store), intent(in) :: store
    integer, intent(in) :: id
    integer(int32), dimension(..), intent(inout), target :: array
    character(len=*), intent(in) :: label
    integer, intent(in) :: global_shape(:), offset(:)
    integer, intent(out), optional :: ierr
    call protect_global_array(store, id, array, 'int32', storage_size(array), label, global_shape, offset, ierr)
  end subroutine protect_global_int32

  subroutine protect_global_int64(store, id, array, label, global_shape, offset, ierr)
    type(resurgo_store), intent(in) :: store
    integer, intent(in) :: id
    integer(int64), dimension(..), intent(inout), target :: array
    character(len=*), intent(in) :: label
    integer, intent(in) :: global_shape(:), offset(:)
    integer, intent(out), optional :: ierr
    call protect_global_array(store, id, array, 'int64', storage_size(array), label, global_shape, offset, ierr)
  end subroutine protect_global_int64

  subroutine protect_global_complex32(store, id, array, label, global_shape, offset, ierr)
    type(resurgo_store), intent(in) :: store
    integer, intent(in) :: id
    complex(real32), dimension(..), intent(inout), target :: array
    character(len=*), intent(in) :: label
    integer, intent(in) :: global_shape(:), offset(:)
    integer, intent(out), optional :: ierr
    call protect_global_array(store, id, array, 'complex64', storage_size(array), label, global_shape, offset, &
                              ierr)
  end subroutine protect_global_complex32

  subroutine protect_global_complex64(store, id, array, label, global_shape, offset, ierr)
    type(resurgo_store), intent(in) :: store
    integer, intent(in) :: id
    complex(real64), dimension(..), intent(inout), target :: array
    character(len=*), intent(in) :: label
    integer, intent(in) :: global_shape(:), offset(:)
    integer, intent(out), optional :: ierr
    call protect_global_array(store, id, array, 'complex128', storage_size(array), label, global_shape, offset, &
                              ierr)
  end subroutine protect_global_complex64
#endif

  subroutine resurgo_unprotect(store, id, ierr)
    type(resurgo_store), intent(in) :: store
    integer, intent(in) :: id
    integer, intent(out), optional :: ierr
    call finish(rsg_unprotect(store%handle, int(id, c_int)), 'resurgo_unprotect', ierr)
  end subroutine resurgo_unprotect

  ! User metadata saved with the next checkpoint (any bytes; here a string).
  subroutine resurgo_set_metadata(store, data, ierr)
    type(resurgo_store), intent(in) :: store
    character(len=*), intent(in), target :: data
    integer, intent(out), optional :: ierr
    integer(c_int) :: rc
    if (len(data) == 0) then
      rc = rsg_set_metadata(store%handle, c_null_ptr, 0_c_size_t)
    else
      rc = rsg_set_metadata(store%handle, c_loc(data), int(len(data), c_size_t))
    end if
    call finish(rc, 'resurgo_set_metadata', ierr)
  end subroutine resurgo_set_metadata

  ! Metadata of the version last restored (or last set).
  subroutine resurgo_get_metadata(store, data, ierr)
    type(resurgo_store), intent(in) :: store
    character(len=:), allocatable, target, intent(out) :: data
    integer, intent(out), optional :: ierr
    integer(c_size_t) :: n, copied
    integer(c_int) :: rc
    ! The first call only asks for the size (capacity 0), the second copies.
    n = 0
    rc = rsg_get_metadata(store%handle, c_null_ptr, 0_c_size_t, n)
    if (rc == RSG_EINVAL .and. n > 0) rc = RSG_OK  ! "too small" is the expected answer
    if (rc /= RSG_OK) n = 0
    allocate(character(len=n) :: data)
    if (rc == RSG_OK .and. n > 0) then
      copied = 0
      rc = rsg_get_metadata(store%handle, c_loc(data), n, copied)
    end if
    call finish(rc, 'resurgo_get_metadata', ierr)
  end subroutine resurgo_get_metadata

  ! Captures every protected region as `version`; returns before the write.
  subroutine resurgo_checkpoint(store, version, ierr)
    type(resurgo_store), intent(in) :: store
    integer, intent(in) :: version
    integer, intent(out), optional :: ierr
    call finish(rsg_checkpoint(store%handle, int(version, c_int)), 'resurgo_checkpoint', ierr)
  end subroutine resurgo_checkpoint

  ! Until `version` (default RSG_ALL) is durable at `level` (default RSG_L2).
  subroutine resurgo_wait(store, ierr, version, level)
    type(resurgo_store), intent(in) :: store
    integer, intent(out), optional :: ierr
    integer, intent(in), optional :: version, level
    integer(c_int) :: v, l
    v = RSG_ALL
    l = RSG_L2
    if (present(version)) v = int(version, c_int)
    if (present(level)) l = int(level, c_int)
    call finish(rsg_wait(store%handle, v, l), 'resurgo_wait', ierr)
  end subroutine resurgo_wait

  ! The version resurgo_restart restores by default (judged without reading
  ! the data: Store::latest in resurgo.hpp), or -1 when there is none. Having none is not
  ! an error here: ierr is then RSG_OK (the C call's RSG_ENOTFOUND is absorbed).
  subroutine resurgo_latest(store, version, ierr)
    type(resurgo_store), intent(in) :: store
    integer, intent(out) :: version
    integer, intent(out), optional :: ierr
    integer(c_int) :: v, rc
    v = -1
    rc = rsg_latest_version(store%handle, v)
    if (rc == RSG_ENOTFOUND) rc = RSG_OK
    version = int(v)
    call finish(rc, 'resurgo_latest', ierr)
  end subroutine resurgo_latest

  ! Restores `version` into the protected regions; without it (or with
  ! RSG_LATEST) the newest intact version, falling back past damaged ones.
  ! `restored` receives the version actually read. The arguments follow
  ! rsg_restart(s, version, &restored): the second one is the version to
  ! restore, so `call resurgo_restart(store, 10)` reads as it acts; pass the
  ! result by name: resurgo_restart(store, restored=v).
  !
  ! Headers and indexes of the whole chain are checked before a byte is
  ! written, then each chunk as it is read into its array. A copy that fails
  ! is read again from another level (and RSG_LATEST falls back to an older
  ! version): the arrays then hold that version whole. When it fails,
  ! resurgo_last_error() names the arrays it may have partly overwritten,
  ! with which version's data, and those it left unchanged ("regions 'u',
  ! 'v' may have been partly overwritten with version 7's data before the
  ! failure; 'w' is unchanged"; on another number of MPI ranks: that any of
  ! them may have been).
  subroutine resurgo_restart(store, version, restored, ierr)
    type(resurgo_store), intent(in) :: store
    integer, intent(in), optional :: version
    integer, intent(out), optional :: restored
    integer, intent(out), optional :: ierr
    integer(c_int) :: requested, got, rc
    requested = RSG_LATEST
    if (present(version)) requested = int(version, c_int)
    got = -1
    rc = rsg_restart(store%handle, requested, got)
    if (present(restored)) restored = int(got)
    call finish(rc, 'resurgo_restart', ierr)
  end subroutine resurgo_restart

  ! Adjoint staging: `versions` in the order they will be restored; the next
  ! ones are copied into the memory level in the background (docs/adjoint.md).
  subroutine resurgo_prefetch(store, versions, ierr)
    type(resurgo_store), intent(in) :: store
    integer, intent(in) :: versions(:)
    integer, intent(out), optional :: ierr
    integer(c_int) :: order(max(1, size(versions)))
    order(1:size(versions)) = int(versions, c_int)
    call finish(rsg_prefetch(store%handle, order, int(size(versions), c_size_t)), 'resurgo_prefetch', ierr)
  end subroutine resurgo_prefetch

  ! The CUDA streams (cudaStream_t as type(c_ptr), e.g. from CUDA Fortran's
  ! c_loc or a C helper) whose work later checkpoints wait for before they
  ! copy managed regions, instead of the whole context; none: the whole
  ! context again (docs/gpu.md).
  subroutine resurgo_set_capture_streams(store, streams, ierr)
    type(resurgo_store), intent(in) :: store
    type(c_ptr), intent(in) :: streams(:)
    integer, intent(out), optional :: ierr
    type(c_ptr) :: handles(max(1, size(streams)))
    handles(1:size(streams)) = streams
    call finish(rsg_set_capture_streams(store%handle, handles, int(size(streams), c_size_t)), &
                'resurgo_set_capture_streams', ierr)
  end subroutine resurgo_set_capture_streams

  ! The version was consumed: dropped from every level.
  subroutine resurgo_discard(store, version, ierr)
    type(resurgo_store), intent(in) :: store
    integer, intent(in) :: version
    integer, intent(out), optional :: ierr
    call finish(rsg_discard(store%handle, int(version, c_int)), 'resurgo_discard', ierr)
  end subroutine resurgo_discard

  ! Whether a checkpoint is due by the [interval] policy (docs/interval.md).
  subroutine resurgo_need_checkpoint(store, need, ierr)
    type(resurgo_store), intent(in) :: store
    logical, intent(out) :: need
    integer, intent(out), optional :: ierr
    integer(c_int) :: flag
    flag = 0
    call finish(rsg_need_checkpoint(store%handle, flag), 'resurgo_need_checkpoint', ierr)
    need = flag /= 0
  end subroutine resurgo_need_checkpoint

  ! Statistics of `version` (RSG_ENOTFOUND when the store keeps none for it:
  ! only recent versions of this process are kept), e.g.
  ! stats%blocking_seconds, stats%seconds_to_level(RSG_L2),
  ! resurgo_string(stats%capture).
  subroutine resurgo_stats(store, version, stats, ierr)
    type(resurgo_store), intent(in) :: store
    integer, intent(in) :: version
    type(rsg_version_stats), intent(out) :: stats
    integer, intent(out), optional :: ierr
    call finish(rsg_stats(store%handle, int(version, c_int), stats), 'resurgo_stats', ierr)
  end subroutine resurgo_stats

  ! What the last restart restored (report%version is -1 before any did),
  ! from which level, in how many seconds.
  subroutine resurgo_last_restart(store, report, ierr)
    type(resurgo_store), intent(in) :: store
    type(rsg_restart_report), intent(out) :: report
    integer, intent(out), optional :: ierr
    call finish(rsg_last_restart(store%handle, report), 'resurgo_last_restart', ierr)
  end subroutine resurgo_last_restart

  ! The device regions' caches now: the L0 device cache (stats%has_cache)
  ! and the host staging buffer they are copied into (stats%has_staging).
  subroutine resurgo_device_stats(store, stats, ierr)
    type(resurgo_store), intent(in) :: store
    type(rsg_device_caches), intent(out) :: stats
    integer, intent(out), optional :: ierr
    call finish(rsg_device_stats(store%handle, stats), 'resurgo_device_stats', ierr)
  end subroutine resurgo_device_stats

  ! The versions the store holds, committed or pending, ascending:
  ! versions(i)%levels(RSG_L4) == 1 where L4 holds a complete copy of
  ! versions(i)%version. Empty when the call fails.
  subroutine resurgo_versions(store, versions, ierr)
    type(resurgo_store), intent(in) :: store
    type(rsg_version_info), allocatable, intent(out) :: versions(:)
    integer, intent(out), optional :: ierr
    integer(c_size_t) :: count
    integer(c_int) :: rc
    ! A checkpoint between the size query and the copy adds a version: ask
    ! again with the new count until the list fits.
    allocate(versions(0))
    do
      count = 0
      rc = rsg_versions(store%handle, versions, size(versions, kind=c_size_t), count)
      if (rc /= RSG_EINVAL .or. count <= size(versions, kind=c_size_t)) exit
      deallocate(versions)
      allocate(versions(count))
    end do
    if (rc /= RSG_OK) count = 0
    versions = versions(:count)  ! a version discarded meanwhile leaves the list shorter
    call finish(rc, 'resurgo_versions', ierr)
  end subroutine resurgo_versions

  ! The regions of the committed `version` as its region table records them,
  ! read from its header (not its data): resurgo_string(regions(i)%label),
  ! regions(i)%bytes, regions(i)%kind (RSG_KIND_HOST, ...). Empty when the
  ! call fails (RSG_ENOTFOUND: no level holds the version).
  subroutine resurgo_describe(store, version, regions, ierr)
    type(resurgo_store), intent(in) :: store
    integer, intent(in) :: version
    type(rsg_region_description), allocatable, intent(out) :: regions(:)
    integer, intent(out), optional :: ierr
    integer(c_size_t) :: count
    integer(c_int) :: rc
    ! A version's region table never changes: one size query, one copy.
    allocate(regions(0))
    count = 0
    rc = rsg_describe(store%handle, int(version, c_int), regions, 0_c_size_t, count)
    if (rc == RSG_EINVAL .and. count > 0) then  ! "too small" is the size answer
      deallocate(regions)
      allocate(regions(count))
      rc = rsg_describe(store%handle, int(version, c_int), regions, count, count)
    end if
    if (rc /= RSG_OK) count = 0
    regions = regions(:count)
    call finish(rc, 'resurgo_describe', ierr)
  end subroutine resurgo_describe

  ! Copies the committed `version` (with the bases a delta needs) to `level`
  ! (RSG_L2 or RSG_L4) and returns once it is durable there: for versions
  ! kept only in memory.
  subroutine resurgo_persist(store, version, level, ierr)
    type(resurgo_store), intent(in) :: store
    integer, intent(in) :: version, level
    integer, intent(out), optional :: ierr
    call finish(rsg_persist(store%handle, int(version, c_int), int(level, c_int)), 'resurgo_persist', ierr)
  end subroutine resurgo_persist

  ! ---- Appicpr's calls ------------------------------------------------------

  ! Begins a cycle (one version) on the store named by `path`.
  subroutine appic_open(path, ierr)
    character(len=*), intent(in) :: path
    integer, intent(out), optional :: ierr
    call finish(rsg_appic_open(c_string(path)), 'appic_open', ierr)
  end subroutine appic_open

  ! Refuses a strided section (its temporary copy would vanish on return).
  ! The appic dummies are not CONTIGUOUS, for the reason given at protect_array.
  logical function appic_contiguous(array, what, ierr) result(ok)
    type(*), dimension(..), intent(in) :: array
    character(len=*), intent(in) :: what
    integer, intent(out), optional :: ierr
    ok = is_contiguous(array)
    if (.not. ok) call fail(RSG_EINVAL, what, 'the array is not contiguous (a strided ' // &
                            'section?): pass the whole array, declared TARGET', ierr)
  end function appic_contiguous

  subroutine appic_register_size_t(array, bytes, ierr)
    type(*), dimension(..), intent(inout), target :: array
    integer(c_size_t), intent(in) :: bytes
    integer, intent(out), optional :: ierr
    if (.not. appic_contiguous(array, 'appic_register', ierr)) return
    call finish(rsg_appic_register(data_address(array), bytes), 'appic_register', ierr)
  end subroutine appic_register_size_t

  subroutine appic_register_int32(array, bytes, ierr)
    type(*), dimension(..), intent(inout), target :: array
    integer(int32), intent(in) :: bytes
    integer, intent(out), optional :: ierr
    call appic_register_size_t(array, int(bytes, c_size_t), ierr)
  end subroutine appic_register_int32

  ! Marks the registered `array` as part of this cycle's version.
  subroutine appic_write(array, ierr)
    type(*), dimension(..), intent(in), target :: array
    integer, intent(out), optional :: ierr
    if (.not. appic_contiguous(array, 'appic_write', ierr)) return
    call finish(rsg_appic_write(data_address(array)), 'appic_write', ierr)
  end subroutine appic_write

  ! The first read of a cycle restores the newest intact version into every
  ! registered array; ierr = RSG_ENOTFOUND when the path holds none.
  subroutine appic_read(array, ierr)
    type(*), dimension(..), intent(inout), target :: array
    integer, intent(out), optional :: ierr
    if (.not. appic_contiguous(array, 'appic_read', ierr)) return
    call finish(rsg_appic_read(data_address(array)), 'appic_read', ierr)
  end subroutine appic_read

  ! The version this cycle read, else the newest on disk; -1 when there is
  ! none (not an error, as in resurgo_latest).
  subroutine appic_version(version, ierr)
    integer, intent(out) :: version
    integer, intent(out), optional :: ierr
    integer(c_int) :: v, rc
    v = -1
    rc = rsg_appic_version(v)
    if (rc == RSG_ENOTFOUND) rc = RSG_OK
    version = int(v)
    call finish(rc, 'appic_version', ierr)
  end subroutine appic_version

  ! Ends the cycle; after writes, the version is durable on return.
  subroutine appic_close(ierr)
    integer, intent(out), optional :: ierr
    call finish(rsg_appic_close(), 'appic_close', ierr)
  end subroutine appic_close

  ! Closes every store the appic calls opened (also done at exit).
  subroutine appic_finalize(ierr)
    integer, intent(out), optional :: ierr
    call finish(rsg_appic_finalize(), 'appic_finalize', ierr)
  end subroutine appic_finalize

end module resurgo
