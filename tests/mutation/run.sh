#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-2-Clause
# Mutation smoke for librpcrdma's protocol MUSTs (docs/testing.md "Mutation
# smoke"). Each tests/mutation/mutants/NAME.patch plants one deliberate bug
# in a protocol rule; this script copies the project's tracked files into a
# scratch directory (the working tree is never touched), builds it once,
# then for each mutant: applies the patch, rebuilds, runs the tests, and
# reverts it. A mutant is "caught" when a test fails (or times out), "NOT
# CAUGHT" when every test passes, "does not apply" when its patch no longer
# fits the sources (re-base it: the header says what it breaks), and "build
# failed" when the patched tree does not compile.
#
# usage: tests/mutation/run.sh [--full] [-j N] [--keep] [--list] [NAME ...]
#   (default)  quick: per mutant, the tests its "Caught-by:" header names
#              (the fast subset; every mutant must still be caught by it)
#   --full     the whole CTest suite for every mutant (stops at the first
#              failure), as a check that the quick subsets are not chosen
#              to fit
#   -j N       build and test jobs (default 2)
#   --keep     keep the scratch directory (printed)
#   --list     list the mutants and what each breaks, then exit
#   NAME ...   only these mutants (file names without .patch)
# Exit status: 0 every mutant caught; 1 one was not caught; 2 the unmutated
# baseline fails or the setup failed; 3 a mutant does not apply or build.
# Needs: git, patch, cmake, a C compiler (as the project's build).
set -u
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
mode=quick jobs=2 keep=0 list=0
names=()
while [ $# -gt 0 ]; do
	case $1 in
	--full) mode=full ;;
	--quick) mode=quick ;;
	-j) jobs=$2; shift ;;
	-j*) jobs=${1#-j} ;;
	--keep) keep=1 ;;
	--list) list=1 ;;
	-h|--help) sed -n '2,28p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
	-*) echo "run.sh: unknown option $1 (see --help)" >&2; exit 2 ;;
	*) names+=("$1") ;;
	esac
	shift
done

field() { sed -n "s/^$1: *//p" "$2" | head -n 1; }

patches=()
if [ ${#names[@]} -eq 0 ]; then
	for p in "$here"/mutants/*.patch; do patches+=("$p"); done
else
	for n in "${names[@]}"; do
		p="$here/mutants/${n%.patch}.patch"
		[ -f "$p" ] || { echo "run.sh: no mutant $n" >&2; exit 2; }
		patches+=("$p")
	done
fi
if [ $list -eq 1 ]; then
	for p in "${patches[@]}"; do
		printf '%-28s %s\n' "$(basename "$p" .patch)" "$(field Breaks "$p")"
	done
	exit 0
fi
for tool in git patch cmake ctest; do
	command -v $tool >/dev/null || { echo "run.sh: $tool not found" >&2; exit 2; }
done

scratch=$(mktemp -d "${TMPDIR:-/tmp}/rr-mutation.XXXXXX")
cleanup() { [ $keep -eq 1 ] && echo "scratch kept: $scratch" || rm -rf "$scratch"; }
trap cleanup EXIT
src=$scratch/src build=$scratch/build log=$scratch/log
mkdir -p "$src"
# The tracked files as they are in the working tree (uncommitted edits
# included), without build directories or anything untracked.
(cd "$root" && git ls-files -z) | (cd "$root" && xargs -0 cp --parents -t "$src") ||
	{ echo "run.sh: copying the sources failed" >&2; exit 2; }

echo "== baseline: build ($mode mode, scratch $scratch)"
if ! cmake -S "$src" -B "$build" -DCMAKE_BUILD_TYPE=Release >"$log" 2>&1 ||
   ! cmake --build "$build" -j"$jobs" >>"$log" 2>&1; then
	tail -n 30 "$log"; echo "run.sh: the unmutated tree does not build" >&2; exit 2
fi

# the tests a mutant's quick run uses: "^(a|b|c)$"
regex_of() { echo "^($(field Caught-by "$1" | tr -s ' ' '|'))\$"; }

run_tests() { # $1: patch (quick) or "" (full); output in $log
	if [ "$mode" = quick ]; then
		ctest --test-dir "$build" -j"$jobs" --timeout 120 -R "$(regex_of "$1")" >"$log" 2>&1
	else
		ctest --test-dir "$build" -j"$jobs" --timeout 120 --stop-on-failure >"$log" 2>&1
	fi
}

if [ "$mode" = quick ]; then
	all=$(for p in "${patches[@]}"; do field Caught-by "$p"; done | tr ' ' '\n' | sort -u |
	      grep -v '^$' | paste -sd'|')
	echo "== baseline: the quick subsets ($(echo "$all" | tr '|' '\n' | wc -l) tests) pass unmutated"
	ctest --test-dir "$build" -j"$jobs" --timeout 120 -R "^($all)\$" >"$log" 2>&1
	rc=$?
	n=$(grep -c 'Test *#' "$log" || true)
	[ $rc -eq 0 ] && [ "$n" -gt 0 ] || { tail -n 30 "$log"; echo "run.sh: baseline fails" >&2; exit 2; }
else
	echo "== baseline: the whole suite passes unmutated"
	run_tests "" || { tail -n 30 "$log"; echo "run.sh: baseline fails" >&2; exit 2; }
fi

caught=0 missed=0 broken=0
results=()
for p in "${patches[@]}"; do
	name=$(basename "$p" .patch)
	if ! patch -p1 -s --dry-run -d "$src" <"$p" >/dev/null 2>&1; then
		results+=("$(printf '%-28s does not apply (re-base it)' "$name")")
		echo "${results[-1]}"
		broken=$((broken + 1))
		continue
	fi
	patch -p1 -s -d "$src" <"$p" >/dev/null
	start=$(date +%s)
	if ! cmake --build "$build" -j"$jobs" >"$log" 2>&1; then
		results+=("$(printf '%-28s build failed' "$name")")
		broken=$((broken + 1))
	elif run_tests "$p"; then
		results+=("$(printf '%-28s NOT CAUGHT (%ss)' "$name" $(($(date +%s) - start)))")
		missed=$((missed + 1))
	else
		# the tests that failed (not those --stop-on-failure left unrun)
		by=$(grep -v '(Not Run)\|(Skipped)' "$log" |
		     sed -n 's/^[[:space:]]*[0-9]* - \([A-Za-z0-9_]*\) (.*/\1/p' | head -n 3 | paste -sd' ')
		results+=("$(printf '%-28s caught by %s (%ss)' "$name" "${by:-?}" \
			$(($(date +%s) - start)))")
		caught=$((caught + 1))
	fi
	echo "${results[-1]}"
	patch -p1 -s -R -d "$src" <"$p" >/dev/null ||
		{ echo "run.sh: could not revert $name" >&2; exit 2; }
done

echo
echo "== $mode mode: ${#patches[@]} mutants: $caught caught, $missed not caught, $broken did not apply or build"
for r in "${results[@]}"; do echo "  $r"; done
[ $missed -gt 0 ] && exit 1
[ $broken -gt 0 ] && exit 3
exit 0
