! Fortran consumer: checkpoint an array, restore it in a new store, compare.
! Directories come from RESURGO_LOCAL_PATH / RESURGO_PERSISTENT_PATH; every
! call without ierr stops the program with the message on failure.
program consumer
  use resurgo
  implicit none
  type(resurgo_store) :: store
  real(8) :: a(4096), b(4096)
  integer :: i, restored

  a = [(0.125d0 * i, i = 1, size(a))]
  b = -1
  call resurgo_open('consumer-fortran', store)
  call resurgo_protect(store, 0, a, 'a')
  call resurgo_checkpoint(store, 5)
  call resurgo_wait(store, version=5, level=RSG_L2)
  call resurgo_close(store)

  call resurgo_open('consumer-fortran', store)
  call resurgo_protect(store, 0, b, 'a')
  call resurgo_restart(store, restored=restored)
  call resurgo_close(store)
  if (restored /= 5 .or. any(a /= b)) then
    print '(a, i0, a, l1)', 'restored version ', restored, ', data equal: ', all(a == b)
    error stop 1
  end if
end program consumer
