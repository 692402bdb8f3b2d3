# The CUDA backend's toolchain and libraries.
#
# DPRUN_CUDA = AUTO (default) builds the CUDA backend when nvcc and the CUDA runtime, cuBLAS,
# cuBLASLt, cuDNN and NCCL are all found; ON requires them (configuration fails, naming what is
# missing); OFF never looks. nvcc is taken from CMAKE_CUDA_COMPILER, the CUDACXX environment
# variable, the PATH, or /usr/local/cuda/bin/nvcc, in that order.
#
# Sets DPRUN_HAS_CUDA (TRUE or FALSE) and, when TRUE, the interface target dprun::cuda_libs that
# carries the libraries and headers the backend needs.

set(DPRUN_CUDA AUTO CACHE STRING "Build the CUDA backend: AUTO, ON or OFF")
set_property(CACHE DPRUN_CUDA PROPERTY STRINGS AUTO ON OFF)
string(TOUPPER "${DPRUN_CUDA}" _dprun_cuda)
if(NOT _dprun_cuda MATCHES "^(AUTO|ON|OFF)$")
  message(FATAL_ERROR "DPRUN_CUDA must be AUTO, ON or OFF, not '${DPRUN_CUDA}'")
endif()

set(DPRUN_HAS_CUDA FALSE)
set(_dprun_cuda_missing "")

if(NOT _dprun_cuda STREQUAL "OFF")
  if(NOT CMAKE_CUDA_COMPILER AND NOT DEFINED ENV{CUDACXX} AND EXISTS /usr/local/cuda/bin/nvcc)
    find_program(_dprun_nvcc_in_path nvcc)
    if(NOT _dprun_nvcc_in_path)
      set(ENV{CUDACXX} /usr/local/cuda/bin/nvcc)
    endif()
  endif()
  # The GPUs people train on: machine code for sm_80 (A100; it runs on sm_86 and sm_89 too:
  # RTX 30 and 40, A10, L4) and sm_90 (H100, H200), and sm_90's PTX, which the driver compiles
  # for later GPUs. Each architecture adds nvcc's time for the plugin; -DCMAKE_CUDA_ARCHITECTURES
  # overrides (`native` for the GPU of the building machine).
  if(NOT DEFINED CMAKE_CUDA_ARCHITECTURES)
    set(CMAKE_CUDA_ARCHITECTURES 80-real 90)
  endif()
  include(CheckLanguage)
  check_language(CUDA)
  if(CMAKE_CUDA_COMPILER)
    enable_language(CUDA)
    # .cu files include the engine's C++20 headers. CMake 3.25 knows nvcc's dialect flags only
    # up to C++17; nvcc 12 and later take -std=c++20.
    if(NOT CMAKE_CUDA20_STANDARD_COMPILE_OPTION)
      set(CMAKE_CUDA20_STANDARD_COMPILE_OPTION "-std=c++20")
      set(CMAKE_CUDA20_EXTENSION_COMPILE_OPTION "-std=c++20")
    endif()
    set(CMAKE_CUDA_STANDARD 20)
    set(CMAKE_CUDA_STANDARD_REQUIRED ON)
    find_package(CUDAToolkit)
  else()
    list(APPEND _dprun_cuda_missing "nvcc")
  endif()
  if(CUDAToolkit_FOUND)
    foreach(_lib cudart cublas cublasLt)
      if(NOT TARGET CUDA::${_lib})
        list(APPEND _dprun_cuda_missing "lib${_lib}")
      endif()
    endforeach()
    set(_dprun_cuda_hints ${CUDAToolkit_LIBRARY_DIR} ${CUDAToolkit_LIBRARY_ROOT}/lib64
                          ${CUDAToolkit_LIBRARY_ROOT}/lib)
    find_library(DPRUN_CUDNN_LIBRARY cudnn HINTS ${_dprun_cuda_hints})
    find_path(DPRUN_CUDNN_INCLUDE_DIR cudnn.h HINTS ${CUDAToolkit_INCLUDE_DIRS})
    find_library(DPRUN_NCCL_LIBRARY nccl HINTS ${_dprun_cuda_hints})
    find_path(DPRUN_NCCL_INCLUDE_DIR nccl.h HINTS ${CUDAToolkit_INCLUDE_DIRS})
    foreach(_var DPRUN_CUDNN_LIBRARY DPRUN_CUDNN_INCLUDE_DIR DPRUN_NCCL_LIBRARY
                 DPRUN_NCCL_INCLUDE_DIR)
      if(NOT ${_var})
        list(APPEND _dprun_cuda_missing "${_var}")
      endif()
    endforeach()
  elseif(CMAKE_CUDA_COMPILER)
    list(APPEND _dprun_cuda_missing "the CUDA toolkit (find_package(CUDAToolkit))")
  endif()

  if(_dprun_cuda_missing)
    if(_dprun_cuda STREQUAL "ON")
      message(FATAL_ERROR "DPRUN_CUDA=ON but not found: ${_dprun_cuda_missing}")
    endif()
    message(STATUS "dprun: CUDA backend off (not found: ${_dprun_cuda_missing})")
  else()
    set(DPRUN_HAS_CUDA TRUE)
    add_library(dprun_cuda_libs INTERFACE)
    add_library(dprun::cuda_libs ALIAS dprun_cuda_libs)
    target_include_directories(dprun_cuda_libs INTERFACE ${DPRUN_CUDNN_INCLUDE_DIR}
                                                         ${DPRUN_NCCL_INCLUDE_DIR})
    target_link_libraries(dprun_cuda_libs INTERFACE CUDA::cudart CUDA::cublas CUDA::cublasLt
                                                    ${DPRUN_CUDNN_LIBRARY} ${DPRUN_NCCL_LIBRARY})
    message(STATUS "dprun: CUDA backend on (CUDA ${CUDAToolkit_VERSION}, "
                   "architectures ${CMAKE_CUDA_ARCHITECTURES})")
  endif()
else()
  message(STATUS "dprun: CUDA backend off (DPRUN_CUDA=OFF)")
endif()
