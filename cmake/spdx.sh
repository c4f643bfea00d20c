#!/bin/sh
# SPDX-License-Identifier: BSD-2-Clause
# spdx.sh - the licence line of every source file (LICENSE: BSD-2-Clause).
# `spdx.sh --check [ROOT]` lists each source file under ROOT (default: the
# tree this script is in) whose first lines lack
# "SPDX-License-Identifier: BSD-2-Clause" and exits 1 if there is one; CTest
# runs it (test spdx_headers), so a file added later without the line fails
# the suite. `spdx.sh --fix [ROOT]` adds the line to those files in the
# comment syntax of each kind (C, shell/Python/CMake, roff), after a "#!"
# line, and is re-run after merges. Source files: src/ include/ tools/
# tests/ fuzz/ bench/ examples/ cmake/ man/ (C, headers, shell, Python,
# rpcgen .x, linker maps, CMake, .in templates, man pages), the top-level
# CMakeLists.txt, .ci/run, .ci/packages and debian/rules. Not covered: fuzz
# corpora (data) and JSON (CMakePresets.json: JSON has no comments).
set -eu

mode=${1:-}
root=${2:-$(cd "$(dirname "$0")/.." && pwd)}
case "$mode" in
--check | --fix) ;;
*)
	echo "usage: spdx.sh --check|--fix [ROOT]" >&2
	exit 2
	;;
esac
cd "$root"

TAG="SPDX-License-Identifier: BSD-2-Clause"

# Every source file, one per line, relative to $root.
list_sources() {
	for d in src include tools tests fuzz bench examples cmake man; do
		[ -d "$d" ] || continue
		find "$d" -path fuzz/corpus -prune -o -type f \( -name '*.c' -o -name '*.h' \
			-o -name '*.sh' -o -name '*.py' -o -name '*.x' -o -name '*.map' \
			-o -name '*.in' -o -name '*.cmake' -o -name 'CMakeLists.txt' \
			-o -name '*.[1-8]' \) -print
	done
	for f in CMakeLists.txt .ci/run .ci/packages debian/rules; do
		[ -f "$f" ] && echo "$f"
	done
	return 0
}

# The comment line for @1 in its syntax.
tag_line() {
	case "$1" in
	*.c | *.h | *.x | *.map) echo "/* $TAG */" ;;
	*.[1-8]) echo ".\\\" $TAG" ;;
	*) echo "# $TAG" ;;
	esac
}

missing=0
for f in $(list_sources | sort); do
	if head -n 3 "$f" | grep -q "$TAG"; then
		continue
	fi
	if [ "$mode" = --check ]; then
		echo "missing SPDX line: $f" >&2
		missing=$((missing + 1))
		continue
	fi
	line=$(tag_line "$f")
	tmp="$f.spdx.$$"
	if head -n 1 "$f" | grep -q '^#!'; then
		{ head -n 1 "$f"; echo "$line"; tail -n +2 "$f"; } >"$tmp"
	else
		{ echo "$line"; cat "$f"; } >"$tmp"
	fi
	chmod --reference="$f" "$tmp"
	mv "$tmp" "$f"
	echo "added: $f"
done
if [ "$missing" -ne 0 ]; then
	echo "$missing source file(s) without \"$TAG\" (fix: sh cmake/spdx.sh --fix)" >&2
	exit 1
fi
exit 0
