# cuda.cmake - the CUDA/NCCL backend of tf-exec (included by the top level).
#
# TF_CUDA=AUTO builds the backend when nvcc, cuBLAS and NCCL are all found and
# says why not otherwise; ON makes a missing piece a configure error; OFF
# skips the search.  When enabled, the sources below form the tfexec_cuda
# library; tfexec links it and so carries TF_HAVE_CUDA=1 to its users.
#
# Hints: CUDAToolkit_ROOT / CUDA_HOME / CUDA_PATH (default /usr/local/cuda),
# NCCL_ROOT / NCCL_HOME for a NCCL outside the toolkit, CMAKE_CUDA_COMPILER,
# CMAKE_CUDA_ARCHITECTURES (default 80;90: A100, H100/H200).

set(TF_HAVE_CUDA OFF)
string(TOUPPER "${TF_CUDA}" _tf_cuda_mode)
if(NOT _tf_cuda_mode MATCHES "^(AUTO|ON|OFF)$")
  message(FATAL_ERROR "TF_CUDA=${TF_CUDA}: expected AUTO, ON or OFF")
endif()

# Reports a missing piece: fatal with TF_CUDA=ON, a status line with AUTO.
macro(_tf_cuda_missing what)
  if(_tf_cuda_mode STREQUAL "ON")
    message(FATAL_ERROR "TF_CUDA=ON but ${what}.  Install the CUDA Toolkit with cuBLAS and "
                        "NCCL, point CUDAToolkit_ROOT / NCCL_ROOT at them, or use TF_CUDA=AUTO|OFF.")
  endif()
  message(STATUS "CUDA backend of tf-exec: off (${what})")
  set(_tf_cuda_ok FALSE)
endmacro()

set(_tf_cuda_ok TRUE)
if(_tf_cuda_mode STREQUAL "OFF")
  message(STATUS "CUDA backend of tf-exec: off (TF_CUDA=OFF)")
  set(_tf_cuda_ok FALSE)
elseif(NOT TARGET tfexec)
  _tf_cuda_missing("the executor (tfexec target) is not part of this build")
endif()

# 1. nvcc.  A compiler named on the command line must exist (enable_language
#    cannot recover from a bad one); otherwise look on PATH / CUDACXX, then in
#    the usual install folders, which need not be on PATH.
if(_tf_cuda_ok)
  if(DEFINED CMAKE_CUDA_COMPILER AND CMAKE_CUDA_COMPILER)
    if(NOT EXISTS "${CMAKE_CUDA_COMPILER}")
      _tf_cuda_missing("CMAKE_CUDA_COMPILER=${CMAKE_CUDA_COMPILER} does not exist")
    endif()
  else()
    if(NOT DEFINED CMAKE_CUDA_COMPILER)
      include(CheckLanguage)
      check_language(CUDA)
    endif()
    if(NOT CMAKE_CUDA_COMPILER)
      find_program(TF_NVCC_EXECUTABLE nvcc
        HINTS ${CUDAToolkit_ROOT} ENV CUDAToolkit_ROOT ENV CUDA_HOME ENV CUDA_PATH
        PATHS /usr/local/cuda
        PATH_SUFFIXES bin NO_DEFAULT_PATH)
      if(TF_NVCC_EXECUTABLE)
        set(CMAKE_CUDA_COMPILER "${TF_NVCC_EXECUTABLE}" CACHE FILEPATH "CUDA compiler" FORCE)
      else()
        _tf_cuda_missing("no CUDA compiler (nvcc) was found")
      endif()
    endif()
  endif()
endif()

# 2. The language, the toolkit's libraries and NCCL.
if(_tf_cuda_ok)
  if(NOT DEFINED CMAKE_CUDA_ARCHITECTURES)
    # "native" needs a GPU at configure time, which CI does not have.
    set(CMAKE_CUDA_ARCHITECTURES 80 90)
  endif()
  enable_language(CUDA)
  if(NOT CUDAToolkit_ROOT)
    get_filename_component(_tf_nvcc_dir "${CMAKE_CUDA_COMPILER}" DIRECTORY)
    get_filename_component(CUDAToolkit_ROOT "${_tf_nvcc_dir}" DIRECTORY)
  endif()
  find_package(CUDAToolkit)
  if(NOT CUDAToolkit_FOUND OR NOT TARGET CUDA::cudart OR NOT TARGET CUDA::cublas)
    _tf_cuda_missing("the CUDA Toolkit's cudart / cuBLAS libraries were not found")
  endif()
endif()
if(_tf_cuda_ok)
  find_path(NCCL_INCLUDE_DIR nccl.h
    HINTS ${NCCL_ROOT} ENV NCCL_ROOT ENV NCCL_HOME ${CUDAToolkit_INCLUDE_DIRS}
    PATH_SUFFIXES include)
  find_library(NCCL_LIBRARY nccl
    HINTS ${NCCL_ROOT} ENV NCCL_ROOT ENV NCCL_HOME ${CUDAToolkit_LIBRARY_DIR}
    PATH_SUFFIXES lib lib64)
  if(NOT EXISTS "${NCCL_INCLUDE_DIR}/nccl.h" OR NOT EXISTS "${NCCL_LIBRARY}")
    _tf_cuda_missing("NCCL (nccl.h / libnccl) was not found; set NCCL_ROOT")
  else()
    file(STRINGS "${NCCL_INCLUDE_DIR}/nccl.h" _tf_nccl_ver REGEX "^#define NCCL_(MAJOR|MINOR|PATCH) ")
    string(REGEX REPLACE ".*NCCL_MAJOR ([0-9]+).*NCCL_MINOR ([0-9]+).*NCCL_PATCH ([0-9]+).*"
           "\\1.\\2.\\3" TF_NCCL_VERSION "${_tf_nccl_ver}")
    if(TF_NCCL_VERSION VERSION_LESS 2.19)
      # Non-blocking communicators and ncclCommGetAsyncError polling as used
      # by transport_nccl.cu need 2.19 or later.
      _tf_cuda_missing("NCCL ${TF_NCCL_VERSION} is older than 2.19")
    endif()
  endif()
endif()

if(_tf_cuda_ok)
  set(TF_HAVE_CUDA ON)
  message(STATUS "CUDA backend of tf-exec: on (CUDA ${CUDAToolkit_VERSION}, NCCL "
                 "${TF_NCCL_VERSION}, architectures ${CMAKE_CUDA_ARCHITECTURES})")
  # The executor's directory was configured before CUDA was enabled here,
  # so the CUDA sources form their own library, which tfexec links.
  set(_tf_cuda_dir ${CMAKE_CURRENT_LIST_DIR})
  add_library(tfexec_cuda STATIC
    ${_tf_cuda_dir}/backend_cuda.cu
    ${_tf_cuda_dir}/kernels.cu
    ${_tf_cuda_dir}/transport_cuda.cu
    ${_tf_cuda_dir}/transport_nccl.cu)
  target_include_directories(tfexec_cuda
    PUBLIC ${CMAKE_CURRENT_SOURCE_DIR}/executor/include
    PRIVATE ${NCCL_INCLUDE_DIR})
  # nvcc compiles .cu files as C++: programs linked by the C compiler need
  # its runtime library too.
  target_link_libraries(tfexec_cuda PUBLIC tfplanner CUDA::cudart CUDA::cublas ${NCCL_LIBRARY}
                                           Threads::Threads stdc++)
  # transport_nccl.cu uses the rendezvous helpers of tfexec (src/launch/launch_env.c):
  # CMake repeats the two static libraries on the link line for the cycle.
  target_link_libraries(tfexec_cuda PUBLIC tfexec)
  set_target_properties(tfexec_cuda PROPERTIES
    CUDA_STANDARD 17 CUDA_STANDARD_REQUIRED ON CUDA_RUNTIME_LIBRARY Shared)
  # The top level's warning and sanitizer flags are gcc options nvcc does
  # not know: keep them for C, give the warnings to nvcc's host compiler.
  get_target_property(_tf_opts tfexec_cuda COMPILE_OPTIONS)
  if(_tf_opts)
    set(_tf_wrapped)
    foreach(_opt IN LISTS _tf_opts)
      list(APPEND _tf_wrapped "$<$<NOT:$<COMPILE_LANGUAGE:CUDA>>:${_opt}>")
    endforeach()
    set_property(TARGET tfexec_cuda PROPERTY COMPILE_OPTIONS ${_tf_wrapped})
  endif()
  target_compile_options(tfexec_cuda PRIVATE
    $<$<COMPILE_LANGUAGE:CUDA>:-Xcompiler=-Wall,-Wextra,-Wno-unused-parameter,-Wno-format-truncation>)
  target_compile_definitions(tfexec_cuda PUBLIC TF_HAVE_CUDA=1)
  target_link_libraries(tfexec PUBLIC tfexec_cuda)

  # GEMM throughput against the device's peak (a benchmark, run by
  # executor/cuda/gpu-checks.sh).
  add_executable(tf-cuda-bench ${_tf_cuda_dir}/bench_cuda_gemm.c)
  target_link_libraries(tf-cuda-bench PRIVATE tfexec_cuda)
endif()
