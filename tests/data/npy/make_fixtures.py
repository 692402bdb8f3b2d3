#!/usr/bin/python3
"""Writes the .npy fixtures of tests/unit/npy_test.cpp with numpy (np.save).

Run from this folder: /usr/bin/python3 make_fixtures.py
"""
import numpy as np

# bfloat16 bits: 1.5, -2, inf, the smallest subnormal, a NaN with payload, 1.0078125
BFLOAT16_BITS = [0x3FC0, 0xC000, 0x7F80, 0x0001, 0x7FC1, 0x3F81]

FIXTURES = {
    "str_1d": np.array(["ab", "cé"]),  # '<U2'
    "str_2d": np.array([["a", "bb"], ["€", "😀x"]]),  # '<U2', 4-byte UTF-8 included
    "str_0d": np.array("héllo"),  # 0-d '<U5'
    "str_empty": np.array(["", "a\x00b", ""]),  # '<U3': empty strings, an inner NUL
    "str_none": np.zeros((2, 0), dtype="<U1"),  # no elements
    "str_big_endian": np.array(["ab", "cé"], dtype=">U2"),
    "bytes_1d": np.array([b"ab", b"c\x00d", b""]),  # '|S3'
    "bytes_not_utf8": np.array([b"\xff", b"ab"]),  # '|S2'
    "bfloat16_u2": np.array(BFLOAT16_BITS, dtype="<u2"),
    "bfloat16_v2": np.array(BFLOAT16_BITS, dtype="<u2").view("V2"),
}

for name, array in FIXTURES.items():
    np.save(name + ".npy", array)
