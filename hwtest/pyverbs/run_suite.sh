#!/bin/sh
# run_suite.sh BRIDGE SHIM PROFILE FILE...: runs rdma-core's tests
# (Debian's python3-pyverbs, /usr/share/doc/rdma-core/tests) on the model
# through the bridge (the command BRIDGE, preloading the library SHIM),
# one bridge and one process per test file (FILE:wrapped: with the
# crypto engine in wrapped import mode), and prints per file
# a line "FILE ran N passed P failed F errors E skipped S" followed by the
# unittest output. It uses a copy of the tests (Debian gzips some).
set -u
bridge=$1; shim=$2; profile=$3; shift 3
src=/usr/share/doc/rdma-core/tests
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cp -r "$src" "$work/tests"
gunzip -f "$work"/tests/*.gz
cd "$work/tests"
for f in "$@"; do
	# FILE:wrapped runs FILE with the AES-XTS engine in wrapped import
	# mode (the bridge's -crypto), else it is in plaintext mode.
	crypto=plaintext
	case "$f" in *:wrapped) crypto=wrapped ;; esac
	out=$(timeout -s KILL 120 "$bridge" -profile "$profile" -crypto "$crypto" -shim "$shim" -- \
		/usr/bin/python3 run_tests.py -v --dev mlx5_0 "${f%:wrapped}" 2>&1)
	rc=$?
	ran=$(printf '%s\n' "$out" | sed -n 's/^Ran \([0-9]*\) test.*/\1/p')
	ok=$(printf '%s\n' "$out" | grep -cE '(\.\.\. |^)ok$')
	fl=$(printf '%s\n' "$out" | grep -c '\.\.\. FAIL$')
	er=$(printf '%s\n' "$out" | grep -c '\.\.\. ERROR$')
	sk=$(printf '%s\n' "$out" | grep -c '\.\.\. skipped')
	echo "$f rc $rc ran ${ran:-0} passed $ok failed $fl errors $er skipped $sk"
	printf '%s\n' "$out" | sed 's/^/  /'
done
