# Cross-compiles qemb for 64-bit ARM Linux.
#
# Debian: crossbuild-essential-arm64 and the :arm64 -dev packages of every
# dependency (scripts/test-aarch64.sh installs them); tests run under
# qemu-aarch64 through ctest (QEMU_CPU picks the emulated CPU model).
#
# Android: pass the NDK's compiler and the prefix holding the dependencies
# built for the device, e.g.
#   -DCMAKE_CXX_COMPILER=$NDK/toolchains/llvm/prebuilt/linux-x86_64/bin/aarch64-linux-android29-clang++
#   -DQEMB_CROSS_PREFIX=/path/to/android-arm64-prefix
# (the NDK's clang knows its own sysroot; QEMB_CROSS_PREFIX is searched for
# headers, libraries and CMake package files instead of the build machine).
# The C compiler (the C API test) is the C++ one's sibling unless given.
set(CMAKE_SYSTEM_NAME Linux)
set(CMAKE_SYSTEM_PROCESSOR aarch64)

if(NOT CMAKE_CXX_COMPILER)
  set(CMAKE_CXX_COMPILER aarch64-linux-gnu-g++)
endif()
if(NOT CMAKE_C_COMPILER)
  string(REGEX REPLACE "clang\\+\\+$" "clang" CMAKE_C_COMPILER "${CMAKE_CXX_COMPILER}")
  string(REGEX REPLACE "g\\+\\+$" "gcc" CMAKE_C_COMPILER "${CMAKE_C_COMPILER}")
endif()

set(QEMB_CROSS_PREFIX "" CACHE PATH "Prefix of the dependencies built for the target (empty: Debian multiarch)")
if(QEMB_CROSS_PREFIX)
  list(APPEND CMAKE_FIND_ROOT_PATH ${QEMB_CROSS_PREFIX})
  set(CMAKE_FIND_ROOT_PATH_MODE_PROGRAM NEVER)
  set(CMAKE_FIND_ROOT_PATH_MODE_LIBRARY ONLY)
  set(CMAKE_FIND_ROOT_PATH_MODE_INCLUDE ONLY)
  set(CMAKE_FIND_ROOT_PATH_MODE_PACKAGE ONLY)
else()
  # Debian multiarch: the :arm64 libraries live in /usr/lib/aarch64-linux-gnu,
  # next to the build machine's, and headers are shared.
  set(CMAKE_LIBRARY_ARCHITECTURE aarch64-linux-gnu)
endif()

if(NOT CMAKE_CROSSCOMPILING_EMULATOR)
  find_program(QEMB_QEMU_AARCH64 qemu-aarch64)
  if(QEMB_QEMU_AARCH64)
    set(CMAKE_CROSSCOMPILING_EMULATOR ${QEMB_QEMU_AARCH64})
  endif()
endif()
