#!/usr/bin/env bash
# Measures one of the scripts here on a redis-server of its own (port 6413):
# Redis CPU per observation (INFO cpu) and evalsha's time (INFO commandstats).
#   docs/bench-log/stats-fold/run.sh every_precision.lua 1000 100 8 [clients]
#   (script, statistics, observations per call, seconds, clients: 50)
# Each script runs after the store's own merge (lua/kind_stats.lua) and
# common.lua. See docs/bench-log/stats.md, "the fold measured".
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
port=6413
script=$1 stats=$2 n=$3 secs=$4 clients=${5:-50}
lua=$(cat "$here/../../../crates/tally/src/backend/redis/lua/kind_stats.lua" "$here/common.lua" "$here/$script")
redis-cli -p $port ping >/dev/null 2>&1 ||
  { redis-server --port $port --save '' --appendonly no --daemonize yes --logfile /tmp/stats-fold-redis.log; sleep 0.5; }
redis-cli -p $port flushall >/dev/null
sha=$(redis-cli -p $port script load "$lua")
keys=$(for _ in $(seq "$n"); do printf 's:__rand_int__ '; done)
cpu() { redis-cli -p $port info cpu | awk -F: '/used_cpu_user:/{u=$2}/used_cpu_sys:/{s=$2}END{print u+s}'; }
redis-cli -p $port config resetstat >/dev/null
c0=$(cpu) t0=$(date +%s.%N)
# shellcheck disable=SC2086
timeout "$secs" redis-benchmark -p $port -c "$clients" -n 100000000 -r "$stats" -q EVALSHA "$sha" "$n" $keys >/dev/null 2>&1 || true
t1=$(date +%s.%N) c1=$(cpu)
stat=$(redis-cli -p $port info commandstats | grep '^cmdstat_evalsha:')
calls=$(echo "$stat" | sed 's/^cmdstat_evalsha:calls=\([0-9]*\).*/\1/')
uspc=$(echo "$stat" | sed 's/.*usec_per_call=\([0-9.]*\).*/\1/')
python3 -c "
calls, n, secs, cpu = $calls, $n, $t1 - $t0, $c1 - $c0
print(f'$script, $stats stats, {n} a call: {calls * n / secs:,.0f} observations/s, '
      f'Redis CPU {cpu / (calls * n) * 1e6:.2f} us per observation, evalsha {$uspc / n:.2f} us per observation')"
