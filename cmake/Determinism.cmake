# Compiler flags that docs/DETERMINISM.md requires of every translation unit.
# -ffp-contract=off: the compiler may not fuse a*b+c on its own; only explicit fma fuses.
# -fno-fast-math and friends: no reassociation, no flush-to-zero, no approximate math.
# -fexcess-precision=standard: no x87-style extended intermediates.
add_compile_options(
  -ffp-contract=off
  -fno-fast-math
  -fno-unsafe-math-optimizations
  -fno-associative-math
  -fno-reciprocal-math
  -fno-finite-math-only
  -fno-math-errno
  -Wall -Wextra -Wno-unused-parameter
)
if(CMAKE_SYSTEM_PROCESSOR MATCHES "x86_64|AMD64")
  add_compile_options(-mfpmath=sse)
endif()

if(CNSR_SANITIZE)
  add_compile_options(-fsanitize=address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer)
  add_link_options(-fsanitize=address,undefined)
endif()

# Sources named *_avx2.cc are compiled for AVX2+FMA and called only after a runtime check.
function(cnsr_mark_avx2_sources)
  foreach(src ${ARGN})
    if(src MATCHES "_avx2\\.cc$")
      # -O3 so that loops over detmath functions are auto-vectorized in every build type.
      set_source_files_properties(${src} PROPERTIES COMPILE_OPTIONS "-mavx2;-mfma;-O3")
    endif()
  endforeach()
endfunction()
