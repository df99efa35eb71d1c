# The grain SDK (include/gpubridge/grain.h): what a grain library needs to
# build against an installed gpubridge. Its headers are all under
# include/gpubridge/ (grain.h and the ring, mail and team headers a handler
# uses; detail/: the grain table and dispatch step the kernels run; device/:
# the kernels GB_DEFINE_GRAIN instantiates) and include each other as
# "gpubridge/...", so one include directory serves the build and an install
# prefix. gpubridge::grain carries it; gpubridge_add_grain_library
# (GpubridgeGrain.cmake) builds a library the daemon loads. In this build the
# target is gb_grain_sdk.
include(GNUInstallDirs)
set(GB_SDK_DIR ${PROJECT_SOURCE_DIR}/include/gpubridge)
file(GLOB GB_SDK_HEADERS CONFIGURE_DEPENDS ${GB_SDK_DIR}/*.h)
file(GLOB GB_SDK_DETAIL CONFIGURE_DEPENDS ${GB_SDK_DIR}/detail/*.h)
file(GLOB GB_SDK_DEVICE CONFIGURE_DEPENDS ${GB_SDK_DIR}/device/*.h ${GB_SDK_DIR}/device/*.cuh)

add_library(gb_grain_sdk INTERFACE)
add_library(gpubridge::grain ALIAS gb_grain_sdk)
set_target_properties(gb_grain_sdk PROPERTIES EXPORT_NAME grain)
target_include_directories(gb_grain_sdk INTERFACE
  $<BUILD_INTERFACE:${PROJECT_SOURCE_DIR}/include>
  $<INSTALL_INTERFACE:${CMAKE_INSTALL_INCLUDEDIR}>)
install(TARGETS gb_grain_sdk EXPORT gpubridgeTargets)
# runtime.h is installed with libgpubridge-runtime (embed/CMakeLists.txt).
list(REMOVE_ITEM GB_SDK_HEADERS ${GB_SDK_DIR}/runtime.h)
install(FILES ${GB_SDK_HEADERS} DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/gpubridge)
install(FILES ${GB_SDK_DETAIL} DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/gpubridge/detail)
install(FILES ${GB_SDK_DEVICE} DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/gpubridge/device)
# The architectures this gpubridge was built for: the default of its grain libraries.
if(GB_HAVE_CUDA)
  set(GB_SDK_CUDA_ARCHITECTURES "${CMAKE_CUDA_ARCHITECTURES}")
  set(GB_SDK_HAS_CUDA ON)
else()
  set(GB_SDK_CUDA_ARCHITECTURES "75-real;80-real;86-real;89-real;90")
  set(GB_SDK_HAS_CUDA OFF)
endif()
