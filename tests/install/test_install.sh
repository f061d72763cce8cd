#!/usr/bin/env bash
# Installs the build into a temporary prefix and uses it as a user would, with no
# LD_LIBRARY_PATH: the installed tools run (trn-comm-test with 2 ranks too) and the installed
# libtrn finds the installed sim driver beside it (by default, by name and by path); C programs
# build with pkg-config (trn; trn-ops and trn-comm), a C++ program with find_package(trn) using
# trn::comm, trn::ops and trn::kbuild (it builds a kernel and runs it), docs/kbuild.md's example
# from the prefix, and torch_trn imports from the prefix; then the prefix moves and all still
# work.
# usage: test_install.sh BUILD_DIR SOURCE_DIR C_COMPILER [PYTHON]
# PYTHON: the Python with the torch that torch_trn was built against (none: torch_trn is not
# built, and not checked).
set -euo pipefail
build=$1 source=$2 cc=$3 python=${4:-}
work=$(mktemp -d)
sim=$(mktemp -d /dev/shm/trn-install-test-XXXXXX)
trap 'rm -rf "$work" "$sim"' EXIT
unset LD_LIBRARY_PATH PKG_CONFIG_PATH
export TRN_SIM_ROOT=$sim
export TRN_OPS_CACHE=memory  # the eager ops' kernels: not into the user's cache

cmake --install "$build" --prefix "$work/prefix" >/dev/null

check_prefix() {
  local prefix=$1
  echo "== tools from $prefix"
  local driver
  driver=$(find "$prefix" -name libtrn-driver-sim.so)
  [ -n "$driver" ] || { echo "libtrn-driver-sim.so is not installed" >&2; exit 1; }
  [ "$(dirname "$driver")" = "$(dirname "$(find "$prefix" -name 'libtrn.so.*.*.*')")" ] ||
    { echo "$driver is not beside libtrn" >&2; exit 1; }
  for selection in "" sim "$driver"; do
    local listing
    listing=$(TRN_DRIVER=$selection "$prefix/bin/trn-ls")
    echo "$listing"
    grep -q "driver sim" <<<"$listing" && grep -q trn2 <<<"$listing" ||
      { echo "installed trn-ls (TRN_DRIVER='$selection') sees no sim device" >&2; exit 1; }
  done
  "$prefix/bin/trn-as" --help >/dev/null
  # libtrn_comm finds libtrn_ops and libtrn beside it (its own RUNPATH).
  "$prefix/bin/trn-comm-test" --ranks 2 -b 8 -e 64K -n 3 -w 1 | tail -n 3

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
  # shellcheck disable=SC2046 # flags are words
  "$cc" -std=c11 -Wall -Wextra -Werror -pedantic "$source/tests/install/c_consumer.c" \
    $(PKG_CONFIG_PATH=$pc pkg-config --cflags --libs trn-ops trn-comm) -Wl,-rpath,"$libdir" \
    -o "$work/c-comm-ops"
  "$work/c-comm-ops"

  echo "== find_package(trn)"
  rm -rf "$work/cxx"
  cmake -S "$source/tests/install/cxx_consumer" -B "$work/cxx" -G Ninja \
    -DCMAKE_PREFIX_PATH="$prefix" >/dev/null
  cmake --build "$work/cxx" >/dev/null
  "$work/cxx/consumer"

  echo "== docs/kbuild.md's example, from the prefix"
  rm -rf "$work/kbuild"
  cmake -S "$prefix/share/trn/examples/kbuild_softmax" -B "$work/kbuild" -G Ninja \
    -DCMAKE_PREFIX_PATH="$prefix" >/dev/null
  cmake --build "$work/kbuild" >/dev/null
  "$work/kbuild/kbuild-softmax" --rows 256 --cols 512

  # The PyTorch backend, where it was built: the installed package finds the installed libtrn.
  local torch_native
  torch_native=$(find "$prefix" -path '*/torch_trn/_native.so')
  if [ -n "$torch_native" ] && [ -n "$python" ]; then
    echo "== torch_trn ($(dirname "$torch_native"))"
    PYTHONPATH=$(dirname "$(dirname "$torch_native")") PYTHONDONTWRITEBYTECODE=1 "$python" -c '
import os, sys, torch, torch_trn
assert os.path.realpath(torch_trn.__file__).startswith(os.path.realpath(os.environ["PYTHONPATH"])), \
    "torch_trn was imported from " + torch_trn.__file__ + ", not from the prefix"
x = torch.arange(4.0).to("trn")
assert (x + x).cpu().tolist() == [0.0, 2.0, 4.0, 6.0], "installed torch_trn computes wrongly"
print("torch_trn:", torch_trn.device_count(), "devices, on", x.device)'
    # TorchNeuron compatibility: the neuron-compat folder beside the package.
    local packages
    packages=$(dirname "$(dirname "$torch_native")")
    PYTHONPATH=$packages/neuron-compat:$packages PYTHONDONTWRITEBYTECODE=1 "$python" -c '
import torch, torch_neuronx
x = torch.arange(3.0, device="neuron")
assert (x * 2).cpu().tolist() == [0.0, 2.0, 4.0], "installed neuron-compat computes wrongly"
print("neuron-compat:", x.device)'
  fi
}

check_prefix "$work/prefix"
mv "$work/prefix" "$work/moved"
check_prefix "$work/moved"
echo "install test passed"
