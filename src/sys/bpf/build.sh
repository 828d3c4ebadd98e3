#!/usr/bin/env bash
# Rebuild the committed BPF objects from their C sources.
#
# Needs clang (14 or later), bpftool and libbpf's headers (Debian: clang-14
# bpftool libbpf-dev). A plain `cargo build` needs none of this: the objects
# are committed next to their sources and embedded with include_bytes.
# vmlinux.h is generated from this machine's BTF and is not committed; the
# programs use CO-RE, so the objects still load on other kernels.
set -euo pipefail
cd "$(dirname "$0")"
clang=${CLANG:-$(command -v clang-14 || command -v clang)}
# vmlinux.h is generated here (git ignores it) rather than in a temporary
# directory, so that the path recorded in the objects' line info is stable
# and rebuilding unchanged sources gives identical objects.
bpftool btf dump file /sys/kernel/btf/vmlinux format c > vmlinux.h
arch=$(uname -m | sed -e 's/x86_64/x86/' -e 's/aarch64/arm64/')
# With arguments, only those sources (objects built elsewhere may differ
# byte-wise when rebuilt against another kernel's vmlinux.h).
if [ $# -gt 0 ]; then srcs=("$@"); else srcs=(*.bpf.c); fi
for src in "${srcs[@]}"; do
  obj=${src%.c}.o
  # A source may ask for more flags on a "// build: FLAGS (why)" line.
  extra=$(sed -n 's|^// build: \([^(]*\).*|\1|p' "$src")
  # shellcheck disable=SC2086 # $extra is a list of flags
  "$clang" -g -O2 -target bpf $extra -D__TARGET_ARCH_"$arch" -I. -c "$src" -o "$obj"
  # Strip DWARF but keep BTF: smaller objects, same CO-RE relocations.
  llvm-strip-14 -g "$obj" 2>/dev/null || true
  echo "built $obj"
done
