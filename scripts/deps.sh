#!/usr/bin/env bash
# The C libraries the tour and the isolation tests (gotcha) link: libpng,
# zlib and sqlite3, with their headers. Installs the missing Debian packages
# when run as root with apt-get (as CI does); otherwise says what to install.
set -euo pipefail
need=()
[ -e /usr/include/png.h ] || need+=(libpng-dev)
[ -e /usr/include/zlib.h ] || need+=(zlib1g-dev)
[ -e /usr/include/sqlite3.h ] || need+=(libsqlite3-dev)
[ ${#need[@]} -eq 0 ] && exit 0
if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
    echo "installing: ${need[*]}"
    apt-get update -q
    DEBIAN_FRONTEND=noninteractive apt-get install -y -q "${need[@]}"
else
    echo "missing: ${need[*]} (install them: sudo apt-get install ${need[*]})" >&2
    exit 1
fi
