"""Design study for issue 20 §1 (not part of the product): Redis memory per
sparse counter for candidate layouts, each written by a bare pipeline of
the commands it needs into a fresh redis-server.

    python3 -m venv /tmp/v && /tmp/v/bin/pip install redis
    /tmp/v/bin/python scripts/compact_layout_study.py [COUNTERS]

Every counter gets one increment at every default precision (1, 5, 60,
300, 3600, 18000, 86400 s). Prints one JSON line per design: bytes of
`used_memory` per counter, keys per counter, and the Redis CPU per
counter from `INFO commandstats` (only meaningful on a quiet machine)."""

import json
import socket
import subprocess
import sys
import time
import zlib

import redis

PRECISIONS = [1, 5, 60, 300, 3600, 18000, 86400]
NOW = 1764111000


def shard(name, shards):
    return zlib.crc32(name.encode()) % shards


def index_field(i, p):
    """An integer field (listpack stores it as an integer): the slice's
    index times 8 plus the precision's index."""
    return (NOW // p) * 8 + i


def hashes_per_precision(pipe, name):
    """Today's `default` layout: a hash per (counter, precision), 64-way registry."""
    s = shard(name, 64)
    for p in PRECISIONS:
        pipe.hincrby(f"{{tally:{s}}}:{p}:{name}", NOW // p * p, 1)
    pipe.zadd(f"{{tally:{s}}}:names", {name: 0})


def hash_text_fields(pipe, name):
    """One hash per counter, fields `<precision>:<slice start>`."""
    s = shard(name, 64)
    for p in PRECISIONS:
        pipe.hincrby(f"{{tally:{s}}}:c:{name}", f"{p}:{NOW // p * p}", 1)
    pipe.zadd(f"{{tally:{s}}}:names", {name: 0})


def hash_seconds_fields(pipe, name):
    """One hash per counter, integer fields `precision << 32 | slice index`."""
    s = shard(name, 64)
    for p in PRECISIONS:
        pipe.hincrby(f"{{tally:{s}}}:c:{name}", (p << 32) | (NOW // p), 1)
    pipe.zadd(f"{{tally:{s}}}:names", {name: 0})


def hash_index_fields(pipe, name):
    """One hash per counter, integer fields `slice index * 8 + precision index`."""
    s = shard(name, 64)
    for i, p in enumerate(PRECISIONS):
        pipe.hincrby(f"{{tally:{s}}}:c:{name}", index_field(i, p), 1)
    pipe.zadd(f"{{tally:{s}}}:names", {name: 0})


def hash_index_fields_small_registries(pipe, name):
    """The same, with the registry in 16,384 shards (listpack-sized zsets)."""
    s = shard(name, 16384)
    for i, p in enumerate(PRECISIONS):
        pipe.hincrby(f"{{t:{s}}}:c:{name}", index_field(i, p), 1)
    pipe.zadd(f"{{t:{s}}}:n", {name: 0})


def hash_index_fields_no_registry(pipe, name):
    """The hash alone: the floor of any one-hash-per-counter layout."""
    for i, p in enumerate(PRECISIONS):
        pipe.hincrby(f"c:{name}", index_field(i, p), 1)


def shared_buckets(pipe, name):
    """Sparse counters share 131,072 bucket hashes, fields `<name>\\0<index field>`."""
    b = shard(name, 1 << 17)
    for i, p in enumerate(PRECISIONS):
        pipe.hincrby(f"b:{b}", f"{name}\0{index_field(i, p)}", 1)


DESIGNS = [
    hashes_per_precision,
    hash_text_fields,
    hash_seconds_fields,
    hash_index_fields,
    hash_index_fields_small_registries,
    hash_index_fields_no_registry,
    shared_buckets,
]


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def started_server():
    port = free_port()
    proc = subprocess.Popen(
        ["redis-server", "--port", str(port), "--save", "", "--appendonly", "no"],
        stdout=subprocess.DEVNULL,
    )
    client = redis.Redis(port=port)
    for _ in range(200):
        try:
            client.ping()
            return proc, client
        except redis.ConnectionError:
            time.sleep(0.05)
    proc.terminate()
    raise SystemExit(f"redis-server on port {port} did not answer (is redis-server installed?)")


def redis_usec(client):
    return sum(v["usec"] for v in client.info("commandstats").values())


def measure(design, counters):
    proc, client = started_server()
    try:
        mem0, usec0 = client.info("memory")["used_memory"], redis_usec(client)
        pipe = client.pipeline(transaction=False)
        for i in range(counters):
            design(pipe, f"ad:{i}")
            if i % 1000 == 999:
                pipe.execute()
        pipe.execute()
        mem = client.info("memory")["used_memory"] - mem0
        usec = redis_usec(client) - usec0
        return {
            "design": design.__name__,
            "counters": counters,
            "bytes_per_counter": round(mem / counters, 1),
            "keys_per_counter": round(client.dbsize() / counters, 3),
            "redis_us_per_counter": round(usec / counters, 2),
        }
    finally:
        proc.terminate()
        proc.wait()


if __name__ == "__main__":
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 100_000
    for d in DESIGNS:
        print(json.dumps(measure(d, n)), flush=True)
