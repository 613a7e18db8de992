! Without ierr, a failed call stops the program with the cause on stderr:
! here the wrapper's own refusal of a strided section. CTest expects the
! message (see CMakeLists.txt); reaching the end is a failure.
program stop_without_ierr
  use, intrinsic :: iso_fortran_env, only: real64
  use resurgo
  implicit none
  type(resurgo_store) :: store
  real(real64), target :: u(4, 4)
  u = 0
  call resurgo_open('fortran-stop', store)
  call resurgo_protect(store, 0, u(1, :), 'row')
  write(*, '(a)') 'stop_without_ierr: the program went on after a failed call'
end program stop_without_ierr
