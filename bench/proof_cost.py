#!/usr/bin/python3
"""What a lease proof at every commit would cost (run with /usr/bin/python3).

    proof_cost.py HOSTS N       medians and 90th percentiles over N rounds

Each round, on one kazoo client (one session), times:
  lock      the ZooKeeper side of a zklock transaction lock: the lock node's
            create and the directory's listing sent back to back, then the
            release's delete (two round trips, two writes)
  proof     a multi of one version-free check on a held node: what the
            lease sends, and what a commit would send to prove its node
  sync+get  a sync and a get-data of that node, sent back to back (no write,
            but proves nothing of the session)
  get       a plain get-data (a follower answers it alone)
The README's section on deleted nodes quotes its figures.
"""
import statistics
import sys
import time

from kazoo.client import KazooClient


def main(hosts, n):
    zk = KazooClient(hosts=hosts, timeout=20.0)
    zk.start()
    zk.ensure_path("/proof-cost")
    res = {"lock": [], "proof": [], "sync+get": [], "get": []}
    held = zk.create("/proof-cost/held-", b"x" * 200, ephemeral=True,
                     sequence=True)
    for _ in range(n):
        t = time.perf_counter()
        c = zk.create_async("/proof-cost/n-", b"x" * 200, ephemeral=True,
                            sequence=True)
        ls = zk.get_children_async("/proof-cost")
        node = c.get()
        ls.get()
        zk.delete(node)
        res["lock"].append(time.perf_counter() - t)
        t = time.perf_counter()
        tx = zk.transaction()
        tx.check(held, -1)
        tx.commit()
        res["proof"].append(time.perf_counter() - t)
        t = time.perf_counter()
        s = zk.sync_async(held)
        g = zk.get_async(held)
        s.get()
        g.get()
        res["sync+get"].append(time.perf_counter() - t)
        t = time.perf_counter()
        zk.get(held)
        res["get"].append(time.perf_counter() - t)
    zk.delete(held)
    zk.stop()
    for k, v in res.items():
        v.sort()
        print("%-9s median %.2f ms  p90 %.2f ms"
              % (k, statistics.median(v) * 1e3, v[int(len(v) * 0.9)] * 1e3))


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.stderr.write(__doc__)
        sys.exit(2)
    main(sys.argv[1], int(sys.argv[2]))
