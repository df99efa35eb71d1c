# Finds the fixed dependencies. libzmq by find_library/find_path because its
# .pc file names packages that the GPU machine lacks; the rest by pkg-config.
find_package(PkgConfig REQUIRED)
find_package(Threads REQUIRED)

find_path(ZMQ_INCLUDE_DIR zmq.h)
find_library(ZMQ_LIBRARY NAMES zmq)
if(NOT ZMQ_INCLUDE_DIR OR NOT ZMQ_LIBRARY)
  message(FATAL_ERROR "libzmq not found (install libzmq3-dev: scripts/setup does)")
endif()
add_library(gb::zmq UNKNOWN IMPORTED)
set_target_properties(gb::zmq PROPERTIES IMPORTED_LOCATION ${ZMQ_LIBRARY}
                      INTERFACE_INCLUDE_DIRECTORIES ${ZMQ_INCLUDE_DIR})

pkg_check_modules(PROTOBUF_C REQUIRED IMPORTED_TARGET libprotobuf-c)
pkg_check_modules(LIBCONFIG REQUIRED IMPORTED_TARGET libconfig)
find_program(PROTOC_C NAMES protoc-c protoc-gen-c)
if(NOT PROTOC_C)
  message(FATAL_ERROR "protoc-c not found (install protobuf-c-compiler: scripts/setup does)")
endif()
if(GB_BUILD_TESTS)
  pkg_check_modules(CMOCKA REQUIRED IMPORTED_TARGET cmocka)
endif()
# Debian's python3-* packages live under /usr/bin/python3, not the first python3 on PATH.
if(NOT Python3_EXECUTABLE AND EXISTS /usr/bin/python3)
  set(Python3_EXECUTABLE /usr/bin/python3)
endif()
