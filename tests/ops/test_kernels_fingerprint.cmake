# ops.kernels_fingerprint: the kernel cache's key carries a fingerprint of the kernels' sources
# (cmake/kernels_fingerprint.cmake). The build's header holds the fingerprint of the tree it was
# built from, and a copy of the tree gets a new one for an edit to an op's kernel, to the kernel
# builder, to the ISA, and for a new source file.
#   cmake -DSOURCE=<source dir> -DHEADER=<build's header> -DSCRATCH=<scratch dir> -P this file
function(fingerprint root out)
  execute_process(COMMAND ${CMAKE_COMMAND} -DROOT=${root} -P ${SOURCE}/cmake/kernels_fingerprint.cmake
                  RESULT_VARIABLE failed ERROR_VARIABLE printed OUTPUT_VARIABLE printed_out)
  if(failed)
    message(FATAL_ERROR "fingerprinting ${root} failed: ${printed}${printed_out}")
  endif()
  string(STRIP "${printed}${printed_out}" printed)
  if(NOT printed MATCHES "^[0-9a-f]+$")
    message(FATAL_ERROR "not a fingerprint: '${printed}'")
  endif()
  set(${out} ${printed} PARENT_SCOPE)
endfunction()

fingerprint(${SOURCE} source_fp)
file(READ ${HEADER} header)
if(NOT header MATCHES "TRN_KERNELS_FINGERPRINT \"${source_fp}\"")
  message(FATAL_ERROR "the build's fingerprint is not its sources' (${source_fp}):\n${header}")
endif()

file(REMOVE_RECURSE ${SCRATCH})
foreach(dir src/isa src/kbuild src/ops/kernels)
  get_filename_component(parent ${SCRATCH}/${dir} DIRECTORY)
  file(COPY ${SOURCE}/${dir} DESTINATION ${parent})
endforeach()
fingerprint(${SCRATCH} previous)
if(NOT previous STREQUAL source_fp)
  message(FATAL_ERROR "a copy of the sources has another fingerprint: ${previous} vs ${source_fp}")
endif()
foreach(edit src/ops/kernels/matmul.cpp src/kbuild/tile.cpp src/isa/opcodes.hpp
             src/kbuild/kernels/added.hpp)
  file(APPEND ${SCRATCH}/${edit} "// an edit\n")
  fingerprint(${SCRATCH} now)
  if(now STREQUAL previous)
    message(FATAL_ERROR "editing ${edit} left the fingerprint at ${now}")
  endif()
  message("after editing ${edit}: ${now}")
  set(previous ${now})
endforeach()
file(REMOVE_RECURSE ${SCRATCH})
message("the fingerprint follows the sources (${source_fp})")
