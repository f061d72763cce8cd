#!/usr/bin/env bash
# scripts/abi-check's rules, on a small library built here in variants against a baseline of
# its first version: compatible changes pass, incompatible ones fail.
# usage: test_abi_policy.sh SOURCE_DIR C_COMPILER
set -euo pipefail
source=$1 cc=$2
here=$source/tests/abi/probe
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cp "$source/abi/suppressions.ini" "$work/"

build() {  # build NAME NODE_OF_ADDED [-DVARIANT...]: NODE is none, TRN_0.1 or TRN_0.2
  local name=$1 node=$2
  shift 2
  {
    echo "TRN_0.1 { global: trn_probe_get; trn_probe_version;"
    [ "$node" = TRN_0.1 ] && echo "trn_probe_added;"
    echo "local: *; };"
    [ "$node" = TRN_0.2 ] && echo "TRN_0.2 { global: trn_probe_added; } TRN_0.1;"
  } >"$work/$name.map"
  "$cc" -g -O0 -shared -fPIC -I"$here" "$@" "$here/trn_probe.c" \
    -Wl,--version-script="$work/$name.map" -o "$work/$name.so"
}

build v1 none
abidw --headers-dir "$here" --drop-private-types --exported-interfaces-only --no-corpus-path \
  --no-comp-dir-path --short-locs --out-file "$work/baseline.abi" "$work/v1.so"

expect() {  # expect pass|fail NAME NODE [-DVARIANT]
  local want=$1 name=$2 node=$3
  shift 3
  build "$name" "$node" "$@"
  if "$source/scripts/abi-check" "$work/$name.so" "$work/baseline.abi" "$here" >"$work/$name.log" 2>&1; then
    got=pass
  else
    got=fail
  fi
  if [ "$got" != "$want" ]; then
    echo "FAILED: $name should $want the check but did $got:" >&2
    cat "$work/$name.log" >&2
    exit 1
  fi
  echo "ok: $name: $want, as it should"
}

expect pass same none
expect pass grow-at-end none -DGROW_END
expect pass added-in-new-node TRN_0.2 -DADD_IN_NEW_NODE
expect fail grow-in-middle none -DGROW_MIDDLE
expect fail removed none -DREMOVE_FUNCTION
expect fail signature none -DCHANGE_SIGNATURE
expect fail added-in-released-node TRN_0.1 -DADD_IN_OLD_NODE
echo "abi policy test passed"
