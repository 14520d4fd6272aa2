#!/usr/bin/python3
"""Look at a ZooKeeper tree from tests and the demo, with kazoo.

  zkq.py HOSTS ls PATH       children of PATH, sorted, one per line
                             (nothing when PATH does not exist)
  zkq.py HOSTS get PATH      the data of PATH
  zkq.py HOSTS tree PATH     every node below PATH, one path per line
  zkq.py HOSTS delete PATH   delete PATH; prints "deleted" or the error's
                             class name (NoAuthError, NoNodeError, ...)
  zkq.py HOSTS create PATH   create PATH and its parents with an open ACL;
                             prints "created" or the error's class name
  zkq.py HOSTS put PATH HEX  create PATH (parents too) holding the bytes
                             HEX spells; prints "created" or the class name
  zkq.py HOSTS acl PATH      the ACL of PATH, one "scheme:id perms" a line
  zkq.py HOSTS chmod PATH N  set the ACL of PATH to world:anyone with the
                             permission bits N (31: all); prints "set" or
                             the error's class name

Optional first arguments: --auth USER:PASSWORD authenticates with digest;
--sasl USER:PASSWORD with SASL DIGEST-MD5 (python3-pure-sasl); --tls
CA,CERT,KEY connects over TLS with that client certificate.

Runs under Debian's /usr/bin/python3, where python3-kazoo is installed.
"""
import sys

from kazoo.client import KazooClient
from kazoo.exceptions import KazooException, NoNodeError
from kazoo.security import make_acl


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
    auth = []
    tls = {}
    sasl = {}
    while len(argv) > 2 and argv[1] in ("--auth", "--sasl", "--tls"):
        if argv[1] == "--auth":
            auth = [("digest", argv[2])]
        elif argv[1] == "--sasl":
            user, password = argv[2].split(":", 1)
            sasl = dict(sasl_options=dict(mechanism="DIGEST-MD5",
                                          username=user, password=password))
        else:
            ca, cert, key = argv[2].split(",")
            tls = dict(use_ssl=True, ca=ca, certfile=cert, keyfile=key,
                       verify_certs=True)
        argv = argv[:1] + argv[3:]
    perms = None
    if argv[2:3] == ["put"] and len(argv) == 5:
        data = bytes.fromhex(argv[4])
        argv = argv[:4]
    elif argv[2:3] == ["chmod"] and len(argv) == 5:
        perms = int(argv[4])
        data = b""
        argv = argv[:4]
    elif len(argv) != 4 or argv[2] not in ("ls", "get", "tree", "delete", "create", "acl"):
        sys.stderr.write(__doc__)
        return 2
    else:
        data = b""
    hosts, cmd, path = argv[1], argv[2], argv[3]
    zk = KazooClient(hosts=hosts, timeout=10.0, auth_data=auth, **tls, **sasl)
    zk.start(timeout=15)
    try:
        if cmd == "ls":
            try:
                for kid in sorted(zk.get_children(path)):
                    print(kid)
            except NoNodeError:
                pass
        elif cmd == "delete":
            try:
                zk.delete(path)
                print("deleted")
            except KazooException as e:
                print(type(e).__name__)
        elif cmd in ("create", "put"):
            try:
                zk.create(path, data, makepath=True)
                print("created")
            except KazooException as e:
                print(type(e).__name__)
        elif cmd == "chmod":
            try:
                zk.set_acls(path, [make_acl("world", "anyone", all=False)._replace(perms=perms)])
                print("set")
            except KazooException as e:
                print(type(e).__name__)
        elif cmd == "acl":
            acls, _ = zk.get_acls(path)
            for a in acls:
                print("%s:%s %d" % (a.id.scheme, a.id.id, a.perms))
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
