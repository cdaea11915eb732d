# Every third-party dependency is found here, once. Package names and CMake quirks of
# Debian 12 are recorded in docs/operations.md ("Toolchain").
find_package(Threads REQUIRED)
find_package(Protobuf REQUIRED)            # FindProtobuf module; Debian ships no config file
find_package(gRPC CONFIG REQUIRED)         # needs protobuf-compiler-grpc for the plugin target
find_package(absl CONFIG REQUIRED)
find_package(prometheus-cpp CONFIG REQUIRED)  # no version argument: its config has no version file
find_package(nlohmann_json 3 REQUIRED)
find_package(spdlog REQUIRED)
find_package(CURL REQUIRED)
find_package(Catch2 2 REQUIRED)
include(Catch)
find_package(PkgConfig REQUIRED)
pkg_check_modules(PQXX REQUIRED IMPORTED_TARGET libpqxx libpq)

# CUDA: the toolkit is a build dependency, the driver is not. The engine reaches the driver
# through cudart_static (which opens libcuda.so.1 at first use) and
# cudaGetDriverEntryPointByVersion, so every binary starts on a machine without a GPU.
if(NOT EXISTS /usr/local/cuda/bin/nvcc AND NOT DEFINED CUDAToolkit_ROOT)
  message(FATAL_ERROR "PTXBench needs the CUDA 13 toolkit at /usr/local/cuda (or pass "
                      "-DCUDAToolkit_ROOT=...). Install it from NVIDIA's Debian 12 repository.")
endif()
find_package(CUDAToolkit 13 REQUIRED)
# CMake 3.25 has no imported targets for nvJitLink or cuDNN.
find_library(PTXBENCH_NVJITLINK_LIBRARY nvJitLink HINTS ${CUDAToolkit_LIBRARY_DIR} REQUIRED)
find_library(PTXBENCH_CUDNN_LIBRARY cudnn HINTS ${CUDAToolkit_LIBRARY_DIR} REQUIRED)
find_path(PTXBENCH_CUPTI_INCLUDE_DIR cupti_sass_metrics.h
          HINTS ${CUDAToolkit_INCLUDE_DIRS} ${CUDAToolkit_LIBRARY_ROOT}/extras/CUPTI/include REQUIRED)

# ptxbench_add_library(NAME SOURCES... [DEPS ...]): a static component library with the
# project's warnings.
function(ptxbench_add_library name)
  cmake_parse_arguments(ARG "" "" "SOURCES;DEPS;PRIVATE_DEPS" ${ARGN})
  add_library(${name} STATIC ${ARG_SOURCES})
  target_include_directories(${name} PUBLIC ${CMAKE_SOURCE_DIR} ${CMAKE_BINARY_DIR})
  target_compile_options(${name} PRIVATE ${PTXBENCH_WARNINGS})
  target_link_libraries(${name} PUBLIC ${ARG_DEPS} PRIVATE ${ARG_PRIVATE_DEPS})
endfunction()

# ptxbench_add_test(NAME SOURCES... DEPS ... [LABELS ...]): a Catch2 test binary whose cases
# ctest discovers one by one.
function(ptxbench_add_test name)
  cmake_parse_arguments(ARG "" "" "SOURCES;DEPS;LABELS" ${ARGN})
  add_executable(${name} ${ARG_SOURCES})
  target_compile_options(${name} PRIVATE ${PTXBENCH_WARNINGS})
  target_link_libraries(${name} PRIVATE ${ARG_DEPS} ptxbench_test_main)
  set_target_properties(${name} PROPERTIES RUNTIME_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR}/tests)
  # An empty LABELS value would swallow the next keyword as its value, so add it only when set.
  set(properties ENVIRONMENT "PTXBENCH_SOURCE_DIR=${CMAKE_SOURCE_DIR}")
  if(ARG_LABELS)
    list(APPEND properties LABELS "${ARG_LABELS}")
  endif()
  catch_discover_tests(${name} PROPERTIES ${properties})
endfunction()
