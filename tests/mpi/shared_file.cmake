# persistent.layout = shared under mpirun (issue 31, part 4): RANKS ranks
# write versions 1..3, each one file on L4; every fake node's L2 is lost and
# a new job restarts version 3 from the shared files, bit for bit; then one
# rank's part of version 3 is damaged (a flipped byte) and the shared file
# of version 2 truncated: the next job restores version 1, bit for bit.
#   -DLAUNCHER -DNUMPROC_FLAG -DCHECK (mpi_store_check) -DDIR -DRANKS -DPYTHON
file(REMOVE_RECURSE ${DIR})
set(ENV{RESURGO_LOCAL_PATH} "${DIR}/node{node}")
set(ENV{RESURGO_PERSISTENT_PATH} "${DIR}/l4")
set(ENV{RESURGO_PERSISTENT_EVERY} 1)
set(ENV{RESURGO_PERSISTENT_KEEP} 0)
set(ENV{RESURGO_PERSISTENT_LAYOUT} shared)

function(run_job what)
  execute_process(COMMAND ${LAUNCHER} ${NUMPROC_FLAG} ${RANKS} ${CHECK} ${ARGN}
                  RESULT_VARIABLE failed OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(failed)
    message(FATAL_ERROR "${RANKS} ranks, ${what} (${ARGN}) failed:\n${out}${err}")
  endif()
endfunction()

run_job("writing one file per version" write 3)
file(GLOB shared_files ${DIR}/l4/mpi-check/v*.shared.rsg)
file(GLOB rank_files ${DIR}/l4/mpi-check/v*.r*.rsg)
list(LENGTH shared_files count)
if(NOT count EQUAL 3 OR rank_files)
  message(FATAL_ERROR "L4 holds ${count} shared files (3 expected) and rank files '${rank_files}' (none expected)")
endif()
file(GLOB nodes ${DIR}/node*)
file(REMOVE_RECURSE ${nodes})
run_job("restart from the shared files" verify 3)

# Rank RANKS-1's part of version 3: a byte flipped in its middle; version 2
# cut short by 100 bytes.
set(flip [=[
import struct, sys
path, rank = sys.argv[1], int(sys.argv[2])
with open(path, "r+b") as f:
    f.seek(-40, 2)
    magic, fmt, ranks, version, index_offset, _ = struct.unpack("<QIIqQQ", f.read(40))
    f.seek(index_offset + 24 * rank)
    offset, size, _ = struct.unpack("<QQQ", f.read(24))
    f.seek(offset + size // 2)
    byte = f.read(1)[0] ^ 0x5A
    f.seek(offset + size // 2)
    f.write(bytes([byte]))
]=])
math(EXPR last_rank "${RANKS} - 1")
execute_process(COMMAND ${PYTHON} -c "${flip}" ${DIR}/l4/mpi-check/v0000000003.shared.rsg ${last_rank}
                RESULT_VARIABLE flipped)
file(SIZE ${DIR}/l4/mpi-check/v0000000002.shared.rsg size)
math(EXPR size "${size} - 100")
execute_process(COMMAND ${PYTHON} -c "import os, sys; os.truncate(sys.argv[1], int(sys.argv[2]))"
                        ${DIR}/l4/mpi-check/v0000000002.shared.rsg ${size} RESULT_VARIABLE truncated)
if(flipped OR truncated)
  message(FATAL_ERROR "could not damage the shared files")
endif()
file(GLOB nodes ${DIR}/node*)
if(nodes)
  file(REMOVE_RECURSE ${nodes})  # what the restart before copied back to L2
endif()
run_job("restart past a damaged part and a torn file" verify 1)
message(STATUS "${RANKS} ranks: 3 versions as shared files restored bit for bit; a flipped byte in rank "
               "${last_rank}'s part and a truncated file refused, version 1 restored")
