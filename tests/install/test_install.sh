#!/usr/bin/env bash
# Installs the build into a temporary prefix and uses it as a user would, with no
# LD_LIBRARY_PATH: the installed tools run, a C program builds with pkg-config and a C++ program
# with find_package(trn); then the prefix moves and both still work.
# usage: test_install.sh BUILD_DIR SOURCE_DIR C_COMPILER
set -euo pipefail
build=$1 source=$2 cc=$3
work=$(mktemp -d)
sim=$(mktemp -d /dev/shm/trn-install-test-XXXXXX)
trap 'rm -rf "$work" "$sim"' EXIT
unset LD_LIBRARY_PATH PKG_CONFIG_PATH
export TRN_SIM_ROOT=$sim

cmake --install "$build" --prefix "$work/prefix" >/dev/null

check_prefix() {
  local prefix=$1
  echo "== tools from $prefix"
  "$prefix/bin/trn-ls"
  "$prefix/bin/trn-as" --help >/dev/null

  local pc
  pc=$(dirname "$(find "$prefix" -name trn.pc)")
  echo "== pkg-config ($pc)"
  PKG_CONFIG_PATH=$pc pkg-config --modversion trn
  local cflags libs libdir
  cflags=$(PKG_CONFIG_PATH=$pc pkg-config --cflags trn)
  libs=$(PKG_CONFIG_PATH=$pc pkg-config --libs trn)
  libdir=$(PKG_CONFIG_PATH=$pc pkg-config --variable=libdir trn)
  case "$libdir" in "$prefix"/*) ;; *) echo "libdir $libdir is outside $prefix" >&2; exit 1 ;; esac
  # shellcheck disable=SC2086 # flags are words
  "$cc" -std=c11 -Wall -Wextra -Werror -pedantic "$source/examples/c/enumerate.c" $cflags $libs \
    -Wl,-rpath,"$libdir" -o "$work/c-consumer"
  "$work/c-consumer"

  echo "== find_package(trn)"
  rm -rf "$work/cxx"
  cmake -S "$source/tests/install/cxx_consumer" -B "$work/cxx" -G Ninja \
    -DCMAKE_PREFIX_PATH="$prefix" >/dev/null
  cmake --build "$work/cxx" >/dev/null
  "$work/cxx/consumer"
}

check_prefix "$work/prefix"
mv "$work/prefix" "$work/moved"
check_prefix "$work/moved"
echo "install test passed"
