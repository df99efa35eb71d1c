#!/usr/bin/python3
"""The pipeline example from Python: text to pipeline.parse, the answer from
pipeline.sum three grains later (pipeline_grains.c), through
examples/python/gpubridge_client.py.

    pipeline.py ENDPOINT [--gen DIR]

Exit 0 when the sums, the running total and a parse error are as expected.
"""
import argparse
import os
import struct
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))
import gpubridge_client as gb  # noqa: E402

TEXT = 1


def run(client, key, text):
    """One request; returns (sum of squares, the key's running total)."""
    reply = client.call("pipeline.parse", key, TEXT, text.encode())
    return struct.unpack("<qq", reply.payload)


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("endpoint")
    gb.add_gen_argument(ap)
    args = ap.parse_args()
    gb.load_protos(args.gen)
    key = 7000 + os.getpid()
    with gb.Client(args.endpoint) as c:
        assert run(c, key, "1 2 3") == (14, 14)
        assert run(c, key, "5") == (25, 39)
        try:
            run(c, key, "1 two")
            raise AssertionError("bad text was accepted")
        except gb.BridgeError as e:
            assert e.status_name == "STATUS_HANDLER_ERROR" and "not a number at offset 2" in e.error, e
        # pipeline.square takes whole int64s: 3 bytes are refused for their size.
        try:
            c.call("pipeline.square", key, 1, b"\1\2\3")
            raise AssertionError("a 3-byte record was accepted")
        except gb.BridgeError as e:
            assert e.status_name == "STATUS_TOO_LARGE" and "for its size" in e.error, e
    print("PASS: pipeline from Python")
    return 0


if __name__ == "__main__":
    sys.exit(main())
