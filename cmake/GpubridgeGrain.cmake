# gpubridge_add_grain_library(TARGET [CPU_ONLY] SOURCES...): a grain library
# (a shared object of grain types defined with GB_DEFINE_GRAIN from
# <gpubridge/grain.h>) that the gpubridge daemon loads from its config:
#   grains = ( { library = "/path/libTARGET.so"; } );
# With CUDA enabled in the project (project(... LANGUAGES C CUDA) or
# enable_language(CUDA)) the sources compile with nvcc: each grain type gets
# its ring kernels, for GPUBRIDGE_CUDA_ARCHITECTURES (default: those gpubridge
# was built for; set it to change them, e.g. -DGPUBRIDGE_CUDA_ARCHITECTURES=90), linked to the
# shared CUDA runtime the daemon uses. Without CUDA, with CPU_ONLY, or
# against a gpubridge built without CUDA (GPUBRIDGE_HAS_CUDA OFF: its daemon
# runs cpu mode only), the library serves cpu mode only (the daemon refuses
# it on a GPU mode).
# Records that grain library target compiles source s one way (kind: CPU or
# GPU) in the calling directory; stops when a library there already compiles
# it the other way (other), which `how` describes.
function(_gpubridge_claim_source target s kind other how)
  get_filename_component(abs "${s}" ABSOLUTE)
  get_filename_component(dir "${CMAKE_CURRENT_SOURCE_DIR}" ABSOLUTE)
  get_property(taken GLOBAL PROPERTY "GPUBRIDGE_${other}_SOURCES:${dir}")
  if(abs IN_LIST taken)
    message(FATAL_ERROR "gpubridge: grain library ${target} uses ${s}, which ${how}: a source has one language "
                        "per directory; define the CPU_ONLY library in its own directory")
  endif()
  set_property(GLOBAL APPEND PROPERTY "GPUBRIDGE_${kind}_SOURCES:${dir}" "${abs}")
endfunction()

function(gpubridge_add_grain_library target)
  cmake_parse_arguments(G "CPU_ONLY" "" "SOURCES" ${ARGN})
  set(srcs ${G_SOURCES} ${G_UNPARSED_ARGUMENTS})
  add_library(${target} MODULE ${srcs})
  target_link_libraries(${target} PRIVATE gpubridge::grain)
  # Only the entry point gb_grain_library is exported (it says so itself).
  set_target_properties(${target} PROPERTIES C_VISIBILITY_PRESET hidden CUDA_VISIBILITY_PRESET hidden
                                             POSITION_INDEPENDENT_CODE ON)
  get_property(langs GLOBAL PROPERTY ENABLED_LANGUAGES)
  if(DEFINED GPUBRIDGE_HAS_CUDA AND NOT GPUBRIDGE_HAS_CUDA AND NOT G_CPU_ONLY AND "CUDA" IN_LIST langs)
    message(STATUS "gpubridge: grain library ${target} without GPU code: this gpubridge was built "
                   "without CUDA (its daemon runs cpu mode only)")
    return()
  endif()
  # A source's language is one per directory, not per target: a file that
  # a GPU library compiles as CUDA cannot also be C in a CPU_ONLY library of
  # the same directory (it would silently get GPU code), nor the reverse.
  if(G_CPU_ONLY OR NOT "CUDA" IN_LIST langs)
    foreach(s ${srcs})
      _gpubridge_claim_source(${target} ${s} CPU GPU "a grain library with GPU code in this directory compiles with nvcc")
    endforeach()
    message(STATUS "gpubridge: grain library ${target} without GPU code (cpu mode only)")
    return()
  endif()
  foreach(s ${srcs})
    if(s MATCHES "\\.(c|cu)$")
      _gpubridge_claim_source(${target} ${s} GPU CPU "a CPU_ONLY grain library in this directory compiles as C")
      set_source_files_properties(${s} TARGET_DIRECTORY ${target} PROPERTIES LANGUAGE CUDA)
    endif()
  endforeach()
  set_target_properties(${target} PROPERTIES CUDA_ARCHITECTURES "${GPUBRIDGE_CUDA_ARCHITECTURES}" CUDA_STANDARD 17
                                             CUDA_STANDARD_REQUIRED ON CUDA_RUNTIME_LIBRARY Shared)
endfunction()
