! Assertions shared by the Fortran tests: a failed check prints
! "<program>: FAILED: <what>" and stops with status 1.
module test_checks
  use, intrinsic :: iso_fortran_env, only: error_unit
  use resurgo, only: RSG_OK, resurgo_last_error
  implicit none
  private
  public :: check, check_ok

contains

  subroutine check_ok(ierr, what)
    integer, intent(in) :: ierr
    character(len=*), intent(in) :: what
    call check(ierr == RSG_OK, what // ': ' // resurgo_last_error())
  end subroutine check_ok

  subroutine check(ok, what)
    logical, intent(in) :: ok
    character(len=*), intent(in) :: what
    character(len=256) :: program
    if (ok) return
    call get_command_argument(0, program)
    write(error_unit, '(a, a, a)') trim(program(index(program, '/', back=.true.) + 1:)), ': FAILED: ', what
    error stop 1
  end subroutine check

end module test_checks
