#!/usr/bin/python3
"""bank.account from Python: generic calls (grain type, message type, raw
bytes) through examples/python/gpubridge_client.py.

    bank.py ENDPOINT [--gen DIR]

Deposits, withdraws and reads a balance, and checks that an overdraft is
refused with its reason. Exit 0 when all hold.
"""
import argparse
import os
import struct
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))
import gpubridge_client as gb  # noqa: E402

DEPOSIT, WITHDRAW, BALANCE = 1, 2, 3


def account(client, key, message_type, amount=None):
    """One request; returns (balance, ops)."""
    payload = b"" if amount is None else struct.pack("<q", amount)
    reply = client.call("bank.account", key, message_type, payload)
    return struct.unpack("<qQ", reply.payload)


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("endpoint")
    gb.add_gen_argument(ap)
    args = ap.parse_args()
    gb.load_protos(args.gen)
    key = 1000 + os.getpid()
    with gb.Client(args.endpoint) as c:
        assert account(c, key, DEPOSIT, 50) == (50, 1)
        assert account(c, key, WITHDRAW, 20) == (30, 2)
        try:
            account(c, key, WITHDRAW, 31)
            raise AssertionError("an overdraft was accepted")
        except gb.BridgeError as e:
            assert e.status_name == "STATUS_HANDLER_ERROR", e
            assert "insufficient funds" in e.error, e.error
        assert account(c, key, BALANCE) == (30, 2)
    print("PASS: bank.account from Python")
    return 0


if __name__ == "__main__":
    sys.exit(main())
