# cuda.cmake - finds what the CUDA/NCCL backend of tf-exec needs (included
# by the top level, before its subdirectories).
#
# TF_CUDA=AUTO builds the backend when nvcc, cuBLAS and NCCL are all found and
# says why not otherwise; ON makes a missing piece a configure error; OFF
# skips the search.  It sets TF_HAVE_CUDA, NCCL_INCLUDE_DIR and NCCL_LIBRARY
# and enables the CUDA language at the top level (every target that links
# the backend must see it); executor/cuda/CMakeLists.txt builds the library.
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
  message(STATUS "CUDA backend of tf-exec: off (TF_CUDA=AUTO and ${what})")
  set(_tf_cuda_ok FALSE)
endmacro()

set(_tf_cuda_ok TRUE)
if(_tf_cuda_mode STREQUAL "OFF")
  message(STATUS "CUDA backend of tf-exec: off (TF_CUDA=OFF)")
  set(_tf_cuda_ok FALSE)
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
  # Said at configure time because it changes what the installed tf-exec
  # needs on every machine it runs on.
  message(STATUS "CUDA backend of tf-exec: on (TF_CUDA=${_tf_cuda_mode} and CUDA "
                 "${CUDAToolkit_VERSION}, cuBLAS and NCCL ${TF_NCCL_VERSION} found; architectures "
                 "${CMAKE_CUDA_ARCHITECTURES}).  tf-exec and libtfexec_cuda will need libcudart, "
                 "libcublas, libnccl and an NVIDIA driver at run time; -DTF_CUDA=OFF builds "
                 "without them.")
endif()
