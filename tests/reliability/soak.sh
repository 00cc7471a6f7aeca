#!/usr/bin/env bash
# A longer run of the reliability tests that mount for real: the mount model, the crash rounds
# and the concurrency storm. Run from anywhere, as a user who can mount FUSE:
#
#   bash tests/reliability/soak.sh                  # ZARRFS_SOAK=100 (about 35 minutes)
#   ZARRFS_SOAK=20 bash tests/reliability/soak.sh   # a quicker one (about 7 minutes)
#   bash tests/reliability/soak.sh -x -k crash      # extra arguments go to pytest
#
# ZARRFS_SOAK=N means: N examples of 50 random steps per layout (test_mount_model.py, 7
# layouts, ~2 s per example), N SIGKILL rounds and N/3 SIGTERM rounds (test_crash_storm.py,
# ~2.5 s each), and a concurrency storm of N seconds, at least 10 (test_concurrency.py). The figures
# of each file (random steps run, crash rounds survived, data lost, daemon peak RSS) are
# printed at the end, from the JSON lines the tests append to $ZARRFS_STATS. Exits non-zero if
# a test fails or leaves a mount.
set -euo pipefail

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
cd "$repo"
export ZARRFS_SOAK=${ZARRFS_SOAK:-100}
basetemp=$(mktemp -d /tmp/zarrfs-soak.XXXXXX)
export ZARRFS_STATS="$basetemp/stats.jsonl"

rc=0
"$repo/.venv/bin/pytest" -q --basetemp="$basetemp/t" "$@" \
    tests/reliability/test_mount_model.py \
    tests/reliability/test_crash_storm.py \
    tests/reliability/test_crash_mountpoint.py \
    tests/reliability/test_concurrency.py || rc=$?

printf '\n== soak figures (ZARRFS_SOAK=%s)\n' "$ZARRFS_SOAK"
cat "$ZARRFS_STATS" 2>/dev/null || echo "(no figures: no test module finished)"

leaked=$(awk -v base="$basetemp/" 'index($2, base) == 1 { print $2 }' /proc/self/mounts)
if [[ -n $leaked ]]; then
    printf 'soak: tests left these mounts behind (unmounting them):\n%s\n' "$leaked" >&2
    while read -r m; do fusermount3 -uz "$m" || true; done <<<"$leaked"
    ((rc)) || rc=1
elif ((rc == 0)); then
    rm -rf "$basetemp"
else
    echo "soak: logs and arrays of the failed run are kept in $basetemp" >&2
fi
exit "$rc"
