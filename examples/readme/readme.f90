! examples/readme/readme.f90: kill it at any moment and run it again
program heat
  use, intrinsic :: iso_fortran_env, only: real64
  use resurgo
  implicit none
  integer, parameter :: n = 2**20, steps = 1000
  real(real64), target :: u(n) = 0
  integer, target :: step = 0
  integer :: ierr
  type(resurgo_store) :: store

  call resurgo_open('heat', store)                ! no ierr: a failure prints why and stops
  call resurgo_protect(store, 0, u, 'field')      ! real, integer, complex; any rank
  call resurgo_protect(store, 1, step, 'step')    ! a scalar is rank 0
  call resurgo_restart(store, ierr=ierr)          ! the newest intact version; restores step too
  if (ierr == RSG_OK) then
    print '(a, i0)', 'resumed after step ', step
  else if (ierr /= RSG_ENOTFOUND) then            ! RSG_ENOTFOUND: none yet
    error stop resurgo_last_error()
  end if
  do while (step < steps)
    step = step + 1
    call solve(step)
    if (mod(step, 100) == 0) call resurgo_checkpoint(store, step)
  end do
  call resurgo_wait(store)                        ! every version, level L2
  call resurgo_close(store)
  print '(i0, a, i0)', step, ' steps: u(1) = ', nint(u(1))

contains

  subroutine solve(k)                             ! time step k of the application
    integer, intent(in) :: k
    u = u + k
  end subroutine solve

end program heat
