#!/usr/bin/python3
"""Look at a ZooKeeper tree from tests and the demo, with kazoo.

  zkq.py HOSTS ls PATH       children of PATH, sorted, one per line
                             (nothing when PATH does not exist)
  zkq.py HOSTS get PATH      the data of PATH
  zkq.py HOSTS tree PATH     every node below PATH, one path per line

Runs under Debian's /usr/bin/python3, where python3-kazoo is installed.
"""
import sys

from kazoo.client import KazooClient
from kazoo.exceptions import NoNodeError


def walk(zk, path, out):
    try:
        kids = sorted(zk.get_children(path))
    except NoNodeError:
        return
    for kid in kids:
        child = path.rstrip("/") + "/" + kid
        out.append(child)
        walk(zk, child, out)


def main(argv):
    if len(argv) != 4 or argv[2] not in ("ls", "get", "tree"):
        sys.stderr.write(__doc__)
        return 2
    hosts, cmd, path = argv[1], argv[2], argv[3]
    zk = KazooClient(hosts=hosts, timeout=10.0)
    zk.start(timeout=15)
    try:
        if cmd == "ls":
            try:
                for kid in sorted(zk.get_children(path)):
                    print(kid)
            except NoNodeError:
                pass
        elif cmd == "get":
            data, _ = zk.get(path)
            print((data or b"").decode("utf-8", "replace"))
        else:
            out = []
            walk(zk, path, out)
            print("\n".join(out))
    finally:
        zk.stop()
        zk.close()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
