# gb_test(NAME SOURCES... [LIBS libs...] [TIMEOUT s] [GPU]): one cmocka program
# registered with ctest. Exit code 77 means "skipped" (no GPU present).
function(gb_test name)
  cmake_parse_arguments(T "GPU" "TIMEOUT" "LIBS;SOURCES" ${ARGN})
  set(srcs ${T_SOURCES} ${T_UNPARSED_ARGUMENTS})
  add_executable(${name} ${srcs})
  target_link_libraries(${name} PRIVATE gb_test_hooks gb_daemon PkgConfig::CMOCKA ${T_LIBS})
  target_include_directories(${name} PRIVATE ${PROJECT_SOURCE_DIR}/tests)
  gb_target_warnings(${name})
  if(NOT T_TIMEOUT)
    set(T_TIMEOUT 120)
  endif()
  if(GB_SANITIZE_KIND STREQUAL "thread")
    math(EXPR T_TIMEOUT "${T_TIMEOUT} * 4") # TSan runs 5-15x slower
  elseif(GB_SANITIZE_KIND STREQUAL "address")
    math(EXPR T_TIMEOUT "${T_TIMEOUT} * 2")
  endif()
  add_test(NAME ${name} COMMAND ${name})
  set(labels cpu)
  if(T_GPU)
    set(labels gpu)
  endif()
  set_tests_properties(${name} PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT ${T_TIMEOUT}
                       LABELS "${labels}"
                       ENVIRONMENT "GB_SOURCE_DIR=${PROJECT_SOURCE_DIR}")
  if(T_GPU)
    # One GPU test at a time: persistent kernels of several processes
    # time-slice the GPU and slow each other down by orders of magnitude.
    set_tests_properties(${name} PROPERTIES RESOURCE_LOCK gpu)
  endif()
endfunction()
