#!/usr/bin/env bash
# `make install` as a C user meets it: installs into a temporary DESTDIR with
# a PREFIX of its own, builds examples/c/basic.c from the installed copy with
# `pkg-config --cflags --libs linger`, linked against liblinger.so and (with
# --static) against liblinger.a, and runs both; then `make uninstall` must
# leave nothing behind. Exits 1 at the first thing that is wrong.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cd "$root"
CC="${CC:-cc}"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT

die() {
    echo "FAIL install: $*" >&2
    exit 1
}
# quiet LOG CMD...: runs CMD with its output in LOG, shown if it fails.
quiet() {
    local log="$1"
    shift
    "$@" >"$log" 2>&1 || { tail -n 25 "$log" | sed 's/^/    | /' >&2; die "$*"; }
}

# shows PATTERN CMD...: CMD's output has a line matching PATTERN. The output
# is read whole first: in `CMD | grep -q` grep may exit at its match while
# CMD still writes, and CMD's SIGPIPE then fails the pipeline (pipefail):
# `ldd` did so once in a CI run, for a program that loaded the right copy.
shows() {
    local pattern="$1" out
    shift
    out="$("$@")"
    grep -q "$pattern" <<<"$out"
}

version="$(sed -n 's/^version = "\(.*\)"/\1/p' Cargo.toml)"
soname="liblinger.so.${version%%.*}"
# The files land under DESTDIR, but everything in them names PREFIX.
prefix=/opt/linger-install-test
dest="$tmp/dest"
lib="$dest$prefix/lib"

quiet "$tmp/lib.log" make --no-print-directory lib
quiet "$tmp/install.log" make --no-print-directory install DESTDIR="$dest" PREFIX="$prefix"

[ -f "$lib/liblinger.so.$version" ] && [ ! -L "$lib/liblinger.so.$version" ] ||
    die "no $lib/liblinger.so.$version"
[ "$(readlink "$lib/$soname")" = "liblinger.so.$version" ] || die "$soname is not a link to liblinger.so.$version"
[ "$(readlink "$lib/liblinger.so")" = "$soname" ] || die "liblinger.so is not a link to $soname"
[ -f "$lib/liblinger.a" ] || die "no liblinger.a"
cmp -s include/linger.h "$dest$prefix/include/linger.h" || die "include/linger.h not installed"
grep -qx "prefix=$prefix" "$lib/pkgconfig/linger.pc" || die "linger.pc does not say prefix=$prefix"
shows "Library soname: \[$soname\]" readelf -d "$lib/liblinger.so.$version" ||
    die "liblinger.so.$version has no soname $soname"
for f in "$lib/liblinger.so.$version" "$lib/libturquoise.so.$version"; do
    ! readelf -S "$f" | grep -q '\.debug_info' || die "$f keeps its debug information (make install strips it)"
    readelf -S "$f" | grep -q '\.symtab' || die "$f lost its symbol table (only the debug information goes)"
done
echo "ok install: files, links, soname $soname"

# --define-prefix: the prefix is taken from where linger.pc is found (the
# DESTDIR copy), not from what it says (PREFIX, where nothing is yet).
export PKG_CONFIG_PATH="$lib/pkgconfig"
flags() { pkg-config --define-prefix "$@" linger; }
[ "$(flags --variable=libdir)" = "$lib" ] || die "pkg-config finds libdir $(flags --variable=libdir), not $lib"
cflags=(-Wall -Wextra -Werror -O2)

# Shared: the program must record the soname and load the installed copy.
# shellcheck disable=SC2046 # pkg-config's output is meant to be split
quiet "$tmp/shared.build.log" "$CC" "${cflags[@]}" examples/c/basic.c \
    $(flags --cflags --libs) -Wl,-rpath,"$lib" -o "$tmp/basic"
shows "(NEEDED).*\[$soname\]" readelf -d "$tmp/basic" || die "the program does not need $soname"
shows "$soname => $lib/$soname" ldd "$tmp/basic" || die "the program does not load $lib/$soname"
quiet "$tmp/shared.log" timeout 60 "$tmp/basic"
echo "ok install: examples/c/basic.c with pkg-config --cflags --libs linger"

# Static: pkg-config cannot ask for one library's archive when both are
# installed, so -llinger becomes GNU ld's -l:liblinger.a; Libs.private must
# supply the rest.
# shellcheck disable=SC2046
quiet "$tmp/static.build.log" "$CC" "${cflags[@]}" examples/c/basic.c \
    $(flags --static --cflags --libs | sed 's/-llinger\b/-l:liblinger.a/') -o "$tmp/basic.static"
if shows "(NEEDED).*liblinger" readelf -d "$tmp/basic.static"; then die "the static program needs liblinger.so"; fi
quiet "$tmp/static.log" timeout 60 "$tmp/basic.static"
echo "ok install: examples/c/basic.c with pkg-config --static against liblinger.a"

# libturquoise (green threads, carries linger): examples/c/green.c through
# pkg-config's turquoise.pc, shared and static.
tsoname="libturquoise.so.${version%%.*}"
[ "$(readlink "$lib/$tsoname")" = "libturquoise.so.$version" ] || die "$tsoname is not a link to libturquoise.so.$version"
cmp -s include/turquoise.h "$dest$prefix/include/turquoise.h" || die "include/turquoise.h not installed"
shows "Library soname: \[$tsoname\]" readelf -d "$lib/libturquoise.so.$version" ||
    die "libturquoise.so.$version has no soname $tsoname"
tflags() { pkg-config --define-prefix "$@" turquoise; }
# shellcheck disable=SC2046
quiet "$tmp/green.build.log" "$CC" "${cflags[@]}" examples/c/green.c \
    $(tflags --cflags --libs) -Wl,-rpath,"$lib" -o "$tmp/green"
shows "$tsoname => $lib/$tsoname" ldd "$tmp/green" || die "the program does not load $lib/$tsoname"
quiet "$tmp/green.log" timeout 60 "$tmp/green"
# shellcheck disable=SC2046
quiet "$tmp/green.static.build.log" "$CC" "${cflags[@]}" examples/c/green.c \
    $(tflags --static --cflags --libs | sed 's/-lturquoise\b/-l:libturquoise.a/') -o "$tmp/green.static"
quiet "$tmp/green.static.log" timeout 60 "$tmp/green.static"
echo "ok install: examples/c/green.c with pkg-config turquoise, shared and static"

quiet "$tmp/uninstall.log" make --no-print-directory uninstall DESTDIR="$dest" PREFIX="$prefix"
left="$(find "$dest" ! -type d)"
[ -z "$left" ] || die "make uninstall left: $left"
echo "ok install: make uninstall removes every file"
