# The grain SDK (include/gpubridge/grain.h): what a grain library needs to
# build against an installed gpubridge. gpubridge::grain carries the include
# paths (the public header and the kernels' headers it instantiates);
# gpubridge_add_grain_library (GpubridgeGrain.cmake) builds a library the
# daemon loads. In this build the target is gb_grain_sdk.
include(GNUInstallDirs)
set(GB_RT ${PROJECT_SOURCE_DIR}/runtime)
set(GB_SDK_HEADERS
  ${GB_RT}/ring.h ${GB_RT}/grain_table.h ${GB_RT}/dispatch.h ${GB_RT}/large_payload.h ${GB_RT}/mail.h ${GB_RT}/team.h
  ${GB_RT}/device/ring_kernel.h ${GB_RT}/device/inline_kernel.h ${GB_RT}/device/ldst.cuh ${GB_RT}/device/profile.cuh
  ${GB_RT}/device/ring_kernel.cuh ${GB_RT}/device/inline_kernel.cuh ${GB_RT}/device/team_kernel.cuh
  ${GB_RT}/device/grain_kernels.cuh)

add_library(gb_grain_sdk INTERFACE)
add_library(gpubridge::grain ALIAS gb_grain_sdk)
set_target_properties(gb_grain_sdk PROPERTIES EXPORT_NAME grain)
target_include_directories(gb_grain_sdk INTERFACE
  $<BUILD_INTERFACE:${PROJECT_SOURCE_DIR}/include>
  $<BUILD_INTERFACE:${PROJECT_SOURCE_DIR}/runtime>
  $<BUILD_INTERFACE:${PROJECT_SOURCE_DIR}/runtime/device>
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
