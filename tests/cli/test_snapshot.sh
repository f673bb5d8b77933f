#!/bin/bash
# watt snapshot records exactly what watt reads: replaying the tar with
# --root gives the same report as the tree it was taken from.
set -u
W=${WATT:?}
F=${WATT_FIXTURES:?}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail=0
norm() { # drop what legitimately differs: the root ($1), the cost and the time of sampling
    python3 -c '
import json, sys
r = json.loads(sys.stdin.read().replace(sys.argv[1], "ROOT"))
for k in ("root", "sample_cost_ms", "time"):
    r.pop(k, None)
print(json.dumps(r, indent=1, sort_keys=True))' "$1"
}
for name in node_exporter intel-2s amd-epyc; do
    src="$F/$name"
    [ -d "$src" ] || { echo "FAIL: fixture $name missing"; fail=1; continue; }
    "$W" snapshot --root "$src" -o "$tmp/$name.tar" 2>"$tmp/err" || { echo "FAIL: snapshot $name"; cat "$tmp/err"; fail=1; continue; }
    mkdir -p "$tmp/$name" && tar -xf "$tmp/$name.tar" -C "$tmp/$name"
    grep -q '^watt snapshot' "$tmp/$name/watt-snapshot.txt" || { echo "FAIL: $name: no metadata"; fail=1; }
    # Only what watt reads: far fewer files than the tree holds.
    n_src=$(find "$src" -type f | wc -l); n_snap=$(find "$tmp/$name" -type f | wc -l)
    echo "$name: $n_snap files recorded of $n_src"
    [ "$n_snap" -lt "$n_src" ] || { echo "FAIL: $name: snapshot is not selective"; fail=1; }
    "$W" report --root "$src" --interval 0 --json | norm "$src" >"$tmp/a.json"
    "$W" report --root "$tmp/$name" --interval 0 --json | norm "$tmp/$name" >"$tmp/b.json"
    if ! diff -u "$tmp/a.json" "$tmp/b.json" >"$tmp/diff"; then
        echo "FAIL: $name: replayed report differs"; head -40 "$tmp/diff"; fail=1
    fi
done
# The live machine too: the replay shows the same C-states.
"$W" snapshot -o "$tmp/live.tar" 2>/dev/null || { echo "FAIL: live snapshot"; exit 1; }
mkdir -p "$tmp/live" && tar -xf "$tmp/live.tar" -C "$tmp/live"
a=$("$W" report --interval 0 --json | python3 -c 'import json,sys; print(json.load(sys.stdin)["cstates"]["states"])')
b=$("$W" report --root "$tmp/live" --interval 0 --json | python3 -c 'import json,sys; print(json.load(sys.stdin)["cstates"]["states"])')
[ "$a" = "$b" ] || { echo "FAIL: live replay differs: $a vs $b"; fail=1; }
# Errors name the problem.
out=$("$W" snapshot 2>&1); [ $? -eq 2 ] && grep -q 'required' <<<"$out" || { echo "FAIL: missing -o"; fail=1; }
out=$("$W" snapshot -o /nonexistent/dir/x.tar 2>&1); [ $? -ne 0 ] && grep -q '/nonexistent/dir/x.tar' <<<"$out" || { echo "FAIL: unwritable output: $out"; fail=1; }
exit $fail
