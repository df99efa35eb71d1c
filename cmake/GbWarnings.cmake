# Warnings on our own code (errors with GB_WERROR); sanitizers on request.
set(GB_C_FLAGS -Wall -Wextra -Wshadow -Wstrict-prototypes -Wmissing-prototypes -Wformat=2
    -Wno-unused-parameter)
set(GB_CUDA_FLAGS -Xcompiler=-Wall,-Wextra,-Wno-unused-parameter)
if(GB_WERROR)
  list(APPEND GB_C_FLAGS -Werror)
  list(APPEND GB_CUDA_FLAGS -Xcompiler=-Werror --Werror all-warnings)
endif()
if(GB_FUZZ)
  if(NOT CMAKE_C_COMPILER_ID MATCHES "Clang")
    message(FATAL_ERROR "GB_FUZZ=ON needs clang (CC=clang); libFuzzer is part of clang")
  endif()
  # Coverage for the fuzzer in everything it reaches, plus the sanitizers.
  # UB stops the run (and leaves an artifact) rather than scrolling past.
  add_compile_options($<$<COMPILE_LANGUAGE:C>:-fsanitize=fuzzer-no-link,address,undefined>
                      $<$<COMPILE_LANGUAGE:C>:-fno-omit-frame-pointer>
                      $<$<COMPILE_LANGUAGE:C>:-fno-sanitize-recover=undefined>)
  add_link_options(-fsanitize=address,undefined)
endif()
string(TOLOWER "${GB_SANITIZE}" GB_SANITIZE_KIND)
if(GB_SANITIZE_KIND MATCHES "^(on|yes|true|1|address)$")
  set(GB_SANITIZE_KIND address)
  add_compile_options($<$<COMPILE_LANGUAGE:C>:-fsanitize=address,undefined>
                      $<$<COMPILE_LANGUAGE:C>:-fno-omit-frame-pointer>
                      $<$<COMPILE_LANGUAGE:C>:-fno-sanitize-recover=undefined>)
  add_link_options(-fsanitize=address,undefined)
elseif(GB_SANITIZE_KIND STREQUAL "thread")
  # TSan sees only C11/__atomic accesses as synchronisation: volatile is a race.
  add_compile_options($<$<COMPILE_LANGUAGE:C>:-fsanitize=thread>
                      $<$<COMPILE_LANGUAGE:C>:-fno-omit-frame-pointer>)
  add_link_options(-fsanitize=thread)
  # GCC warns that TSan does not model atomic_thread_fence. The fences left in
  # our code order a store before a load (the sleep/wake and armed handshakes);
  # the happens-before edges TSan needs come from acquire/release atomics.
  include(CheckCCompilerFlag)
  check_c_compiler_flag(-Wtsan GB_CC_HAS_WTSAN)
  if(GB_CC_HAS_WTSAN)
    add_compile_options($<$<COMPILE_LANGUAGE:C>:-Wno-tsan>)
  endif()
elseif(GB_SANITIZE_KIND MATCHES "^(off|no|false|0|)$")
  set(GB_SANITIZE_KIND "")
else()
  message(FATAL_ERROR "GB_SANITIZE=${GB_SANITIZE}: expected OFF, address (or ON) or thread")
endif()
# gb_target_warnings(tgt): apply our flags to a target of our own sources.
function(gb_target_warnings tgt)
  target_compile_options(${tgt} PRIVATE $<$<COMPILE_LANGUAGE:C>:${GB_C_FLAGS}>
                                        $<$<COMPILE_LANGUAGE:CUDA>:${GB_CUDA_FLAGS}>)
endfunction()
