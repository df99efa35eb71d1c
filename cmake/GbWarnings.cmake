# Warnings as errors on our own code; sanitizers on request.
set(GB_C_FLAGS -Wall -Wextra -Werror -Wshadow -Wstrict-prototypes -Wno-unused-parameter)
set(GB_CUDA_FLAGS -Xcompiler=-Wall,-Wextra,-Werror,-Wno-unused-parameter --Werror all-warnings)
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
if(GB_SANITIZE)
  add_compile_options($<$<COMPILE_LANGUAGE:C>:-fsanitize=address,undefined>
                      $<$<COMPILE_LANGUAGE:C>:-fno-omit-frame-pointer>
                      $<$<COMPILE_LANGUAGE:C>:-fno-sanitize-recover=undefined>)
  add_link_options(-fsanitize=address,undefined)
endif()
# gb_target_warnings(tgt): apply our flags to a target of our own sources.
function(gb_target_warnings tgt)
  target_compile_options(${tgt} PRIVATE $<$<COMPILE_LANGUAGE:C>:${GB_C_FLAGS}>
                                        $<$<COMPILE_LANGUAGE:CUDA>:${GB_CUDA_FLAGS}>)
endfunction()
