#!/usr/bin/python3
"""test/fuzz/ps_seeds.py — writes seed conversations for the parameter server's fuzz target
(test/fuzz/fuzz_ps_server.c) into test/fuzz/corpus/ps_server/seed_*: whole valid exchanges (dense
tables of each optimizer, sync and async; sparse tables with pulls and pushes; SAVE; STOP) and
the near misses that must be refused (wrong lengths, versions, workers, tables, geometry). Input
layout: one byte for the worker count (n = 1 + b % 3), then messages as u16 length + bytes.
Run from the repo root: /usr/bin/python3 test/fuzz/ps_seeds.py"""
import os
import struct

MAGIC, VERSION = 0x53504744, 1
INIT, PULL, PUSH, STOP, SPARSE_INIT, SPARSE_PULL, SPARSE_PUSH, SAVE, GEO_PUSH, SPARSE_GEO_PUSH, EVICT = range(1, 12)
ASYNC, SYNC, GEO = range(3)
SGD, MOMENTUM, ADAGRAD, ADAM = 0, 1, 2, 3   # dg_opt_kind order is checked by the replay test


def req(op, table=0, worker=0, arg=0, payload=b"", version=VERSION, magic=MAGIC, reserved=0):
    return struct.pack("<IHHIIQI", magic, version, op, table, worker, arg, reserved) + payload


def init_msg(total, offset, length, n_workers, sync, kind, lr=0.1, values=None):
    head = struct.pack("<QQQ6I9d", total, offset, length, n_workers, sync, kind, 0, 0, 0,
                       lr, 0.0, 0.9, 0.0, 0.9, 0.999, 1e-8, 0.0, 0.0)
    vals = values if values is not None else [0.5 - 0.1 * i for i in range(length)]
    return head + struct.pack("<%df" % len(vals), *vals)


def sparse_msg(dim, kind, n_workers, mode, seed=7, lr=0.05, init_range=0.1, entry=0):
    return struct.pack("<4IQ4d2I2d", dim, kind, n_workers, mode, seed, lr, 1e-6, 0.1, init_range, entry, 0, 0.9, 0.999)


def conversation(n_workers_byte, msgs):
    out = bytes([n_workers_byte])
    for m in msgs:
        out += struct.pack("<H", len(m)) + m
    return out


def grads(n, v=0.25):
    return struct.pack("<%df" % n, *[v * (i + 1) for i in range(n)])


def sparse_push(ids, dim, version):
    return struct.pack("<Q", len(ids)) + struct.pack("<%dq" % len(ids), *ids) + grads(len(ids) * dim)


seeds = {}
# dense, each optimizer, async (1 worker) and sync (2 workers)
for kind in (SGD, MOMENTUM, ADAGRAD, ADAM):
    seeds["dense_async_%d" % kind] = conversation(0, [
        req(INIT, 0, 0, 0, init_msg(8, 0, 8, 1, 0, kind)), req(PULL, 0, 0, 0), req(PUSH, 0, 0, 0, grads(8)),
        req(PULL, 0, 0, 1), req(STOP)])
    seeds["dense_sync_%d" % kind] = conversation(1, [
        req(INIT, 0, 0, 0, init_msg(10, 5, 5, 2, 1, kind)), req(INIT, 0, 1, 0, init_msg(10, 5, 5, 2, 1, kind)),
        req(PUSH, 0, 0, 0, grads(5)), req(PULL, 0, 0, 1), req(PUSH, 0, 1, 0, grads(5, -1)), req(PULL, 0, 1, 1),
        req(PUSH, 0, 0, 1, grads(5)), req(STOP, 0, 0), req(STOP, 0, 1)])
# sparse, SGD, Adagrad and Adam, sync and async
for kind in (0, 1, 2):
    dim = 4
    seeds["sparse_async_%d" % kind] = conversation(0, [
        req(SPARSE_INIT, 3, 0, 0, sparse_msg(dim, kind, 1, 0)),
        req(SPARSE_PULL, 3, 0, 0, struct.pack("<3q", 1, 7, 1 << 40)),
        req(SPARSE_PUSH, 3, 0, 0, sparse_push([7, 1 << 40], dim, 0)),
        req(SPARSE_PULL, 3, 0, 1, struct.pack("<q", 7)), req(STOP)])
    seeds["sparse_sync_%d" % kind] = conversation(1, [
        req(SPARSE_INIT, 1, 0, 0, sparse_msg(dim, kind, 2, 1)), req(SPARSE_INIT, 1, 1, 0, sparse_msg(dim, kind, 2, 1)),
        req(SPARSE_PUSH, 1, 0, 0, sparse_push([2, 4], dim, 0)), req(SPARSE_PULL, 1, 1, 1, struct.pack("<q", 2)),
        req(SPARSE_PUSH, 1, 1, 0, sparse_push([4], dim, 0)), req(SPARSE_PULL, 1, 0, 1, struct.pack("<2q", 2, 4)),
        req(SPARSE_PUSH, 1, 0, 0, sparse_push([], dim, 0))])
# geo tables: deltas added, gradients refused
seeds["geo"] = conversation(1, [
    req(INIT, 0, 0, 0, init_msg(6, 0, 6, 2, GEO, ADAM)), req(GEO_PUSH, 0, 1, 0, grads(6)), req(PUSH, 0, 0, 0, grads(6)),
    req(PULL, 0, 0, 0), req(SPARSE_INIT, 2, 0, 0, sparse_msg(3, 1, 2, GEO)), req(SPARSE_PULL, 2, 1, 0, struct.pack("<2q", 5, 6)),
    req(SPARSE_GEO_PUSH, 2, 0, 0, sparse_push([5, 6], 3, 0)), req(SPARSE_PUSH, 2, 0, 0, sparse_push([5], 3, 0)),
    req(GEO_PUSH, 2, 0, 0, grads(3)), req(SPARSE_GEO_PUSH, 0, 0, 0, sparse_push([1], 3, 0))])
# the entry threshold and eviction
seeds["entry_evict"] = conversation(0, [
    req(SPARSE_INIT, 1, 0, 0, sparse_msg(2, 2, 1, ASYNC, entry=2)), req(SPARSE_PULL, 1, 0, 0, struct.pack("<2q", 8, 9)),
    req(SPARSE_PUSH, 1, 0, 0, sparse_push([8, 9], 2, 0)), req(SPARSE_PUSH, 1, 0, 0, sparse_push([8], 2, 0)),
    req(SPARSE_PULL, 1, 0, 0, struct.pack("<2q", 8, 9)), req(EVICT, 0, 0, 1), req(EVICT, 0, 0, 0),
    req(SPARSE_PULL, 1, 0, 0, struct.pack("<q", 8)), req(SAVE, 0, 0, 0, struct.pack("<II", 0, 1) + b"d")])
# a dense and a sparse table saved (the fuzz target writes to a scratch folder whatever the name)
seeds["save"] = conversation(0, [
    req(INIT, 0, 0, 0, init_msg(4, 0, 4, 1, 0, ADAGRAD)), req(SPARSE_INIT, 1, 0, 0, sparse_msg(2, 1, 1, 0)),
    req(SPARSE_PULL, 1, 0, 0, struct.pack("<2q", 3, 9)),
    req(SAVE, 0, 0, 0, struct.pack("<II", 0, 1) + b"anywhere"), req(SAVE, 0, 0, 0, struct.pack("<II", 1, 1) + b"x")])
# near misses, one per check
bad = [
    b"", b"DGPS", req(PULL)[:27], req(PULL, magic=0x12345678), req(PULL, version=9), req(PULL, reserved=1),
    req(PULL, worker=5), req(PULL, table=64), req(99), req(INIT, 0, 0, 0, b"\0" * 50),
    req(INIT, 0, 0, 0, init_msg(8, 4, 8, 1, 0, SGD)),                    # shard past the table
    req(INIT, 0, 0, 0, init_msg(8, 0, 8, 1, 0, SGD)[:-4]),               # values short
    req(INIT, 0, 0, 0, init_msg(8, 0, 8, 3, 0, SGD)),                    # worker count
    req(INIT, 0, 0, 0, init_msg(8, 0, 8, 1, 0, 42)),                     # no such optimizer
    req(PUSH, 0, 0, 0, grads(3)), req(PULL, 2, 0, 0),
    req(SPARSE_INIT, 2, 0, 0, sparse_msg(0, 0, 1, 0)), req(SPARSE_INIT, 2, 0, 0, sparse_msg(4, 9, 1, 0)),
    req(SPARSE_PULL, 2, 0, 0, b"\1\2\3"), req(SPARSE_PUSH, 2, 0, 0, struct.pack("<Q", 1 << 60)),
    req(SAVE, 0, 0, 0, b"\0" * 8 + b"a\0b"), req(SAVE, 0, 0, 0, struct.pack("<II", 3, 2) + b"d"),
]
seeds["refusals"] = conversation(0, [req(INIT, 0, 0, 0, init_msg(8, 0, 8, 1, 0, SGD))] + bad)
seeds["table_kinds_mixed"] = conversation(0, [
    req(INIT, 0, 0, 0, init_msg(8, 0, 8, 1, 0, SGD)), req(SPARSE_INIT, 0, 0, 0, sparse_msg(4, 0, 1, 0)),
    req(SPARSE_PULL, 0, 0, 0, struct.pack("<q", 1)), req(SPARSE_INIT, 1, 0, 0, sparse_msg(4, 0, 1, 0)),
    req(INIT, 1, 0, 0, init_msg(8, 0, 8, 1, 0, SGD)), req(PULL, 1, 0, 0), req(PUSH, 1, 0, 0, grads(8)),
    req(INIT, 0, 0, 0, init_msg(8, 0, 8, 1, 0, ADAM))])

os.makedirs("test/fuzz/corpus/ps_server", exist_ok=True)
for name, data in seeds.items():
    assert len(data) < 4096, (name, len(data))
    with open("test/fuzz/corpus/ps_server/seed_" + name, "wb") as f:
        f.write(data)
print("wrote %d seeds" % len(seeds))
