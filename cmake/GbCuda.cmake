# Decides whether the CUDA backend is built (GB_HAVE_CUDA) from GB_CUDA.
# Architectures default to sm_75, 80, 86, 89 and 90 (Turing to Hopper: the
# consumer GPUs of WSL2 and desktop hosts as well as H100/H200), with compute_90
# PTX for the driver to JIT on newer GPUs; set CMAKE_CUDA_ARCHITECTURES to change.
set(GB_HAVE_CUDA OFF)
if(NOT GB_CUDA STREQUAL "OFF")
  include(CheckLanguage)
  if(NOT DEFINED CMAKE_CUDA_COMPILER AND NOT DEFINED ENV{CUDACXX}
     AND EXISTS /usr/local/cuda/bin/nvcc)
    set(CMAKE_CUDA_COMPILER /usr/local/cuda/bin/nvcc)
  endif()
  check_language(CUDA)
  if(CMAKE_CUDA_COMPILER)
    if(NOT DEFINED CMAKE_CUDA_ARCHITECTURES)
      set(CMAKE_CUDA_ARCHITECTURES 75-real 80-real 86-real 89-real 90)
    endif()
    # The shared CUDA runtime: grain libraries (gpubridge/grain.h) loaded by
    # the daemon launch on streams the daemon made, which needs one runtime.
    set(CMAKE_CUDA_RUNTIME_LIBRARY Shared)
    enable_language(CUDA)
    find_package(CUDAToolkit REQUIRED)
    set(CMAKE_CUDA_STANDARD 17)
    set(GB_HAVE_CUDA ON)
  elseif(GB_CUDA STREQUAL "ON")
    message(FATAL_ERROR "GB_CUDA=ON but no CUDA compiler (nvcc) was found. "
            "Install the CUDA toolkit, set CUDACXX, or configure with -DGB_CUDA=OFF.")
  else()
    message(STATUS "gpubridge: nvcc not found, building without the CUDA backend")
  endif()
endif()
message(STATUS "gpubridge: CUDA backend ${GB_HAVE_CUDA}")
