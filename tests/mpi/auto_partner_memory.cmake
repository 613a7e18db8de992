# In-memory automatic checkpoints with partner copies (issue 31 part 2;
# src/job/partner_memory.h), cmake -P. tealeaf_mpi with --checkpoints
# in-memory (L1 only, nothing written to a disk) and partner.scheme =
# partner, RANKS_PER_NODE ranks per fake node (default 1), in WORKDIR:
#   full:    the run uninterrupted, which must leave no shared-memory copy;
#   killed:  a checkpoint every 2 steps, rank KILL_RANK killed at step 5
#            (SIGKILL, after the job's wait for L1, so its partner copies
#            are complete; -1, the default: every rank; else mpirun ends the
#            others, which flush to L2 on its SIGTERM as without partners);
#            then the nodes LOST lose their storage: their L2
#            directory and their shared memory (/dev/shm/resurgo-<uid>/
#            memory-<the node's L2 path>);
#   resumed: the killed command without the kill. With FAULT unset it must
#            restore a version, each rank of a lost node from its partner's
#            memory (its note in the store's warnings: checked, not assumed;
#            every rank of a lost node, none other),
#            end with the checksum and, on every rank, the bytes of full, and
#            leave no shared-memory copy once closed. FAULT=damaged first
#            flips a byte of the copy node 0 keeps for rank 1: the checksums
#            refuse it. With FAULT set the resumed run must fail on every
#            rank with an error matching EXPECT, and fail again the same way
#            (the copies it could not restore stay, so that no job starts
#            from scratch beside them); the test then removes them.
#
#   cmake -DLAUNCH="mpiexec|-n|2" -DRANKS=2 -DPROGRAM=path -DWORKDIR=dir -DMODE=initphase|fastfw
#         -DLOST="1" [-DRANKS_PER_NODE=2] [-DKILL_RANK=1] [-DFAULT=damaged|partner_dead -DEXPECT=regex]
#         -P auto_partner_memory.cmake
cmake_minimum_required(VERSION 3.25)

include(${CMAKE_CURRENT_LIST_DIR}/../../examples/restart_check.cmake)
require_defined(LAUNCH RANKS PROGRAM WORKDIR MODE LOST)
default_values(RANKS_PER_NODE=1 KILL_RANK=-1)
string(REPLACE "|" ";" LAUNCH "${LAUNCH}")
set(run ${LAUNCH} ${PROGRAM} --mode ${MODE} --steps 8 --checkpoints in-memory)
set(ENV{RESURGO_MPI_RANKS_PER_NODE} ${RANKS_PER_NODE})
set(ENV{RESURGO_PARTNER_SCHEME} partner)
set(ENV{RESURGO_LOG_LEVEL} warn)  # the partner memory's notes are warnings
execute_process(COMMAND id -u OUTPUT_VARIABLE uid OUTPUT_STRIP_TRAILING_WHITESPACE)
set(shm "/dev/shm/resurgo-${uid}")

# The shared-memory directory of `tag`'s fake node `node`, as
# PartnerMemory::directory_for names it from the node's L2 directory.
function(shm_dir tag node out)
  string(REGEX REPLACE "^/+" "" name "${WORKDIR}/${tag}/node${node}/tealeaf_mpi")
  string(REPLACE "/" "_" name "${name}")
  set(${out} "${shm}/memory-${name}" PARENT_SCOPE)
endfunction()

# Fails when a shared-memory copy of `tag`'s nodes is left.
function(expect_no_copy_left tag)
  string(REGEX REPLACE "^/+" "" name "${WORKDIR}/${tag}/node")
  string(REPLACE "/" "_" name "${name}")
  file(GLOB_RECURSE left "${shm}/memory-${name}*")
  if(left)
    message(FATAL_ERROR "${tag}: shared-memory copies left after the store closed: ${left}")
  endif()
endfunction()

function(remove_copies tag)
  math(EXPR last "${RANKS} - 1")
  foreach(node RANGE ${last})
    shm_dir(${tag} ${node} dir)
    file(REMOVE_RECURSE "${dir}")
  endforeach()
endfunction()

file(REMOVE_RECURSE "${WORKDIR}")
file(MAKE_DIRECTORY "${WORKDIR}")
remove_copies(full)
remove_copies(killed)

set(ENV{RESURGO_LOCAL_PATH} "${WORKDIR}/full/node{node}")
run_for_result(full "${WORKDIR}" ${run} --checkpoint-every 2 --dump "${WORKDIR}/full")
field(full checksum full_checksum)
expect_no_copy_left(full)

set(ENV{RESURGO_LOCAL_PATH} "${WORKDIR}/killed/node{node}")
set(interrupted ${run} --checkpoint-every 2)
execute_process(COMMAND ${interrupted} --kill-step 5 --kill-rank ${KILL_RANK}
  WORKING_DIRECTORY "${WORKDIR}" RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(rc EQUAL 0 OR out MATCHES "RESULT ")
  message(FATAL_ERROR "killed: the job was to die at step 5 but finished:\n${out}${err}")
endif()
foreach(node ${LOST})
  shm_dir(killed ${node} dir)
  file(GLOB copies "${dir}/own/*.rsg")
  if(NOT copies)
    message(FATAL_ERROR "killed: node ${node} keeps no copy in ${dir}: nothing to lose")
  endif()
  file(REMOVE_RECURSE "${dir}" "${WORKDIR}/killed/node${node}")
endforeach()
if(FAULT STREQUAL "damaged")
  shm_dir(killed 0 dir)
  file(GLOB held "${dir}/partner/*.rsg")
  if(NOT held)
    message(FATAL_ERROR "damaged: node 0 keeps no partner copy in ${dir}")
  endif()
  list(GET held 0 victim)
  file(SIZE "${victim}" size)
  math(EXPR middle "${size} / 2")
  set(flip "import sys; p=sys.argv[1]; b=bytearray(open(p,'rb').read()); b[int(sys.argv[2])]^=0xff; open(p,'wb').write(b)")
  execute_process(COMMAND python3 -c "${flip}" "${victim}" ${middle} RESULT_VARIABLE flipped)
  if(NOT flipped EQUAL 0)
    message(FATAL_ERROR "damaged: could not flip a byte of ${victim}")
  endif()
endif()

if(DEFINED FAULT)
  foreach(attempt 1 2)
    execute_process(COMMAND ${interrupted} WORKING_DIRECTORY "${WORKDIR}"
      RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
    message(STATUS "${FAULT}, resumed (${attempt}): exit ${rc}\n${out}${err}")
    if(rc EQUAL 0 OR out MATCHES "RESULT ")
      remove_copies(killed)
      message(FATAL_ERROR "${FAULT}: the resumed job finished: it started again beside copies it could not restore")
    endif()
    math(EXPR last "${RANKS} - 1")
    foreach(rank RANGE ${last})
      if(NOT err MATCHES "tealeaf_mpi: rank ${rank}: [^\n]*${EXPECT}")
        remove_copies(killed)
        message(FATAL_ERROR "${FAULT}: rank ${rank} did not fail with an error matching '${EXPECT}'")
      endif()
    endforeach()
  endforeach()
  remove_copies(killed)
  message(STATUS "${FAULT}: refused on every rank, twice, naming the version lost")
  return()
endif()

execute_process(COMMAND ${interrupted} --dump "${WORKDIR}/resumed" WORKING_DIRECTORY "${WORKDIR}"
  RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
message(STATUS "resumed: exit ${rc}\n${out}${err}")
if(NOT rc EQUAL 0 OR NOT out MATCHES "RESULT ({[^\n]*})")
  remove_copies(killed)
  message(FATAL_ERROR "resumed: failed with exit status ${rc}")
endif()
set(RESULT_resumed "${CMAKE_MATCH_1}")
field(resumed checksum checksum)
if(NOT checksum STREQUAL full_checksum)
  message(FATAL_ERROR "resumed: checksums differ: uninterrupted ${full_checksum}, resumed ${checksum}")
endif()
math(EXPR last "${RANKS} - 1")
foreach(rank RANGE ${last})
  file(SIZE "${WORKDIR}/full.${rank}" bytes)
  expect_same_bytes("${WORKDIR}/full.${rank}" "${WORKDIR}/resumed.${rank}" ${bytes})
endforeach()
string(JSON version ERROR_VARIABLE none GET "${RESULT_resumed}" restore version)
if(none OR version LESS 0)
  message(FATAL_ERROR "resumed: no version restored: the job ran the whole computation again")
endif()
# Every rank of a lost node says where its copy came from.
set(lost_ranks 0)
foreach(node ${LOST})
  math(EXPR first "${node} * ${RANKS_PER_NODE}")
  math(EXPR last "${first} + ${RANKS_PER_NODE} - 1")
  foreach(rank RANGE ${first} ${last})
    if(NOT err MATCHES "partner memory: version ${version} of rank ${rank} restored from the memory of its partner rank")
      message(FATAL_ERROR "resumed: rank ${rank} of lost node ${node} did not restore version ${version} from its "
                          "partner's memory")
    endif()
    math(EXPR lost_ranks "${lost_ranks} + 1")
  endforeach()
endforeach()
string(REGEX MATCHALL "restored from the memory of its partner" notes "${err}")
list(LENGTH notes restored_from_partner)
if(NOT restored_from_partner EQUAL lost_ranks)
  message(FATAL_ERROR "resumed: ${restored_from_partner} ranks restored from partner memory, expected ${lost_ranks}")
endif()
expect_no_copy_left(killed)
message(STATUS "identical on ${RANKS} ranks after losing node(s) ${LOST}: version ${version} restored, "
               "${restored_from_partner} of ${lost_ranks} lost rank(s) from partner memory")
