"""Spark's `xxhash64`, bit for bit, for the evaluators that run outside Spark: the
simulator's `hash(...)` must give the value `evita run` computes on Spark.

Spark hashes each argument in turn, the previous hash the seed of the next (the first
seed 42): a string by its UTF-8 bytes, a whole number as a 64-bit long, a double by its
bits (-0.0 as 0.0), a boolean as the int 1 or 0; a null leaves the hash as it was.

>>> xxhash64("abc"), xxhash64(5), xxhash64("a", "b")
(1423657621850124518, 6251837290343458373, -7357372313250070212)
"""
from __future__ import annotations

import struct

_M = (1 << 64) - 1
P1, P2, P3, P4, P5 = (0x9E3779B185EBCA87, 0xC2B2AE3D27D4EB4F, 0x165667B19E3779F9, 0x85EBCA77C2B2AE63,
                      0x27D4EB2F165667C5)


def _rotl(x: int, r: int) -> int:
    return ((x << r) | (x >> (64 - r))) & _M


def _fmix(h: int) -> int:
    h ^= h >> 33
    h = (h * P2) & _M
    h ^= h >> 29
    h = (h * P3) & _M
    h ^= h >> 32
    return h


def _round(acc: int, lane: int) -> int:
    return (_rotl((acc + lane * P2) & _M, 31) * P1) & _M


def _int(value: int, seed: int) -> int:
    h = (seed + P5 + 4) & _M
    h ^= ((value & 0xFFFFFFFF) * P1) & _M
    h = (_rotl(h, 23) * P2 + P3) & _M
    return _fmix(h)


def _long(value: int, seed: int) -> int:
    h = (seed + P5 + 8) & _M
    h ^= (_rotl((value * P2) & _M, 31) * P1) & _M
    h = (_rotl(h, 27) * P1 + P4) & _M
    return _fmix(h)


def _bytes(data: bytes, seed: int) -> int:
    n, i = len(data), 0
    if n >= 32:
        v = [(seed + P1 + P2) & _M, (seed + P2) & _M, seed & _M, (seed - P1) & _M]
        while i <= n - 32:
            for j in range(4):
                v[j] = _round(v[j], struct.unpack_from("<Q", data, i)[0])
                i += 8
        h = (_rotl(v[0], 1) + _rotl(v[1], 7) + _rotl(v[2], 12) + _rotl(v[3], 18)) & _M
        for x in v:
            h ^= _round(0, x)
            h = (h * P1 + P4) & _M
    else:
        h = (seed + P5) & _M
    h = (h + n) & _M
    while i <= n - 8:
        h ^= _round(0, struct.unpack_from("<Q", data, i)[0])
        h = (_rotl(h, 27) * P1 + P4) & _M
        i += 8
    if i <= n - 4:
        h ^= (struct.unpack_from("<I", data, i)[0] * P1) & _M
        h = (_rotl(h, 23) * P2 + P3) & _M
        i += 4
    while i < n:
        h ^= (data[i] * P5) & _M
        h = (_rotl(h, 11) * P1) & _M
        i += 1
    return _fmix(h)


def xxhash64(*values) -> int:
    h = 42
    for v in values:
        if v is None:
            continue
        if isinstance(v, bool):
            h = _int(int(v), h)
        elif isinstance(v, int):
            h = _long(v & _M, h)
        elif isinstance(v, float):
            h = _long(struct.unpack("<q", struct.pack("<d", 0.0 if v == 0 else v))[0] & _M, h)
        elif isinstance(v, str):
            h = _bytes(v.encode("utf-8"), h)
        else:
            raise TypeError(f"xxhash64 of {type(v).__name__}")
    return h - (1 << 64) if h >= 1 << 63 else h
