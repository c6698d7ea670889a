"""The workload shared by the SIGKILL and network-cut tests: four apps over one input topic, so that every fate
the ledger knows occurs in bulk: routed by priority (both dialects), filtered, pending, dead-lettered (expired).
"""

from __future__ import annotations

import time
from collections.abc import Iterator

from tests.reliability.support import Message, props_headers

APPS = ("orders", "big", "later", "audit")

CONFIG = """
apps:
  orders:                     # bmq; the filter drops Kind == "skip" (10% of the stream): filtered, nothing written
    inputs: [INPUT]
    properties: {N: int, Kind: string, Amount: int}
    filter: ['Kind != "skip"']
    groups:
      even: {subscriptions: [{expression: 'N % 2 == 0', priority: 5}]}
      odd: {subscriptions: [{expression: 'N % 2 == 1', priority: 5}]}
      first: {subscriptions: [{expression: 'N < 100', priority: 9}]}
  big:                        # sql92; priorities decide between overlapping subscriptions
    inputs: [INPUT]
    dialect: sql92
    properties: {Amount: int, Kind: string}
    filter: ["Amount >= 100"]
    groups:
      vip: {subscriptions: [{expression: "Amount >= 900", priority: 10}]}
      bulk: {subscriptions: [{expression: "Kind IN ('bulk', 'express')", priority: 5}]}
      rest: {subscriptions: [{expression: "Amount >= 100", priority: 1}]}
  later:                      # a pending share (N % 7 in 5..6 has no subscription) and an expiration
    inputs: [INPUT]
    properties: {N: int}
    expiration: 1h
    groups:
      sevens: {subscriptions: [{expression: 'N % 7 < 5'}]}
  audit:                      # a group without subscription takes everything
    inputs: [INPUT]
    groups:
      all: {}
"""

KINDS = ("std", "bulk", "express", "skip", "std", "std", "bulk", "std", "express", "std")


def orders(count: int, start: int = 0) -> Iterator[Message]:
    """``count`` order messages. Every 50th is two hours old (dead-lettered by ``later``, routed elsewhere);
    every 97th has an Amount that is not an int (a property decode error: a missing property)."""
    old = int(time.time() * 1000) - 2 * 3_600_000
    for i in range(start, start + count):
        amount: object = (i * 37) % 1000 if i % 97 != 5 else f"{i}x"
        headers = props_headers({"N": i, "Kind": KINDS[i % 10], "Amount": amount})
        timestamp = old if i % 50 == 7 else None
        yield (f"k{i % 100}".encode(), f"m{i}".encode(), headers, timestamp)
