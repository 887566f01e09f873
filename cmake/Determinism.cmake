# Compiler flags that docs/DETERMINISM.md requires of every translation unit.
# -ffp-contract=off: the compiler may not fuse a*b+c on its own; only explicit fma fuses.
# -fno-fast-math and friends: no reassociation, no flush-to-zero, no approximate math.
# -fno-math-errno only drops errno bookkeeping (so sqrt can vectorize); results are unchanged.
set(CNSR_CXX_DETERMINISM_FLAGS
  -ffp-contract=off
  -fno-fast-math
  -fno-unsafe-math-optimizations
  -fno-associative-math
  -fno-reciprocal-math
  -fno-finite-math-only
  -fno-math-errno)
add_compile_options(
  "$<$<COMPILE_LANGUAGE:CXX>:${CNSR_CXX_DETERMINISM_FLAGS}>"
  "$<$<COMPILE_LANGUAGE:CXX>:-Wall;-Wextra;-Wno-unused-parameter>")
if(CMAKE_SYSTEM_PROCESSOR MATCHES "x86_64|AMD64")
  add_compile_options("$<$<COMPILE_LANGUAGE:CXX>:-mfpmath=sse>")
endif()

if(CNSR_SANITIZE)
  add_compile_options("$<$<COMPILE_LANGUAGE:CXX>:-fsanitize=address,undefined;-fno-sanitize-recover=undefined;-fno-omit-frame-pointer>")
  add_link_options(-fsanitize=address,undefined)
endif()
if(CNSR_FUZZ)
  if(NOT CMAKE_CXX_COMPILER_ID STREQUAL "Clang")
    message(FATAL_ERROR "CNSR_FUZZ needs clang (libFuzzer); scripts/fuzz.sh configures it")
  endif()
  add_compile_options("$<$<COMPILE_LANGUAGE:CXX>:-fsanitize=fuzzer-no-link,address,undefined;-fno-sanitize-recover=undefined;-fno-omit-frame-pointer>")
  add_link_options(-fsanitize=address,undefined)
endif()

# nvcc: no fused multiply-add unless written, IEEE division and square root, no
# flush-to-zero, never --use_fast_math. The host side of .cu files gets the C++ flags.
set(CNSR_CUDA_DETERMINISM_FLAGS
  --fmad=false --prec-div=true --prec-sqrt=true --ftz=false
  "-Xcompiler=-ffp-contract=off,-fno-fast-math")

# Sources named *_avx2.cc are compiled for AVX2+FMA, *_avx512.cc for AVX-512F, *_avx512vnni.cc for
# AVX-512F, BW and VNNI, *_amx.cc for AMX int8 tiles, and called only after a runtime check.
function(cnsr_mark_avx2_sources)
  foreach(src ${ARGN})
    if(src MATCHES "_avx2\\.cc$")
      # -O3 so that loops over detmath functions are auto-vectorized in every build type.
      set_source_files_properties(${src} PROPERTIES COMPILE_OPTIONS "-mavx2;-mfma;-O3")
    elseif(src MATCHES "_avx512\\.cc$")
      # Called only after a run-time check for AVX-512F (gemm::CpuHasAvx512F).
      set_source_files_properties(${src} PROPERTIES COMPILE_OPTIONS "-mavx512f;-mavx2;-mfma;-O3")
    elseif(src MATCHES "_avx512vnni\\.cc$")
      # Called only after a run-time check for AVX-512F, BW and VNNI (gemm::CpuHasAvx512Vnni).
      set_source_files_properties(${src} PROPERTIES COMPILE_OPTIONS "-mavx512f;-mavx512bw;-mavx512vnni;-mavx2;-mfma;-O3")
    elseif(src MATCHES "_amx\\.cc$")
      # Called only after a run-time check for AMX int8 and the tile permission (gemm::CpuHasAmxInt8).
      set_source_files_properties(${src} PROPERTIES COMPILE_OPTIONS "-mamx-tile;-mamx-int8;-O3")
    endif()
  endforeach()
endfunction()
