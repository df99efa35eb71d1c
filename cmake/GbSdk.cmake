# The grain SDK (include/gpubridge/grain.h): what a grain library needs to
# build against an installed gpubridge. gpubridge::grain carries the include
# paths (the public header and the kernels' headers it instantiates);
# gpubridge_add_grain_library (GpubridgeGrain.cmake) builds a library the
# daemon loads. In this build the target is gb_grain_sdk.
include(GNUInstallDirs)
set(GB_SDK_HEADERS
  ${PROJECT_SOURCE_DIR}/bridge/ring.h ${PROJECT_SOURCE_DIR}/bridge/grain_table.h
  ${PROJECT_SOURCE_DIR}/bridge/dispatch.h ${PROJECT_SOURCE_DIR}/bridge/large_payload.h ${PROJECT_SOURCE_DIR}/bridge/mail.h
  ${PROJECT_SOURCE_DIR}/actors/team.h
  ${PROJECT_SOURCE_DIR}/kernels/ring_kernel.h ${PROJECT_SOURCE_DIR}/kernels/inline_kernel.h
  ${PROJECT_SOURCE_DIR}/kernels/ldst.cuh ${PROJECT_SOURCE_DIR}/kernels/ring_kernel.cuh
  ${PROJECT_SOURCE_DIR}/kernels/inline_kernel.cuh ${PROJECT_SOURCE_DIR}/kernels/team_kernel.cuh
  ${PROJECT_SOURCE_DIR}/kernels/grain_kernels.cuh)

add_library(gb_grain_sdk INTERFACE)
add_library(gpubridge::grain ALIAS gb_grain_sdk)
set_target_properties(gb_grain_sdk PROPERTIES EXPORT_NAME grain)
target_include_directories(gb_grain_sdk INTERFACE
  $<BUILD_INTERFACE:${PROJECT_SOURCE_DIR}/include>
  $<BUILD_INTERFACE:${PROJECT_SOURCE_DIR}/bridge>
  $<BUILD_INTERFACE:${PROJECT_SOURCE_DIR}/actors>
  $<BUILD_INTERFACE:${PROJECT_SOURCE_DIR}/kernels>
  $<INSTALL_INTERFACE:${CMAKE_INSTALL_INCLUDEDIR}>
  $<INSTALL_INTERFACE:${CMAKE_INSTALL_INCLUDEDIR}/gpubridge/sdk>)
install(TARGETS gb_grain_sdk EXPORT gpubridgeTargets)
install(FILES ${PROJECT_SOURCE_DIR}/include/gpubridge/grain.h DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/gpubridge)
install(FILES ${GB_SDK_HEADERS} DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/gpubridge/sdk)
# The architectures this gpubridge was built for: the default of its grain libraries.
if(GB_HAVE_CUDA)
  set(GB_SDK_CUDA_ARCHITECTURES "${CMAKE_CUDA_ARCHITECTURES}")
else()
  set(GB_SDK_CUDA_ARCHITECTURES "75-real;80-real;86-real;89-real;90")
endif()
