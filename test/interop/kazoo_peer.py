#!/usr/bin/python3
"""One kazoo lock contender, driven line by line from stdin, for zklock's
interoperability test (test/t/080_interop.pl).

  kazoo_peer.py HOSTS LOCKPATH MODE ID

MODE:
  lock    kazoo's Lock, with extra_lock_patterns=["-lock-"] so that it sees
          the exclusive nodes of zklock and Curator (_c_<uuid>-lock-<seq>)
  read    kazoo's ReadLock, seeing the "-lock-" and "__WRIT__" nodes of
          zklock and Curator as writers
  write   kazoo's WriteLock, seeing those and "__READ__" nodes (zklock's
          and Curator's shared nodes) as contenders
  admin   no lock; only the node commands below
ID is the data of the lock node (kazoo's identifier), so the test can tell
this peer's node from the others.

Prints "ready" once connected, then one reply per command:
  acquire          wait (at most 60 s): "acquired <epoch_ms>" or "timeout"
  try <ms>         the same, waiting at most <ms>: "acquired ..." or "busy"
  release          "released <epoch_ms>" (time taken before the delete)
  contenders       "contenders <id>,<id>,..." in kazoo's order
  create <path>    create an ephemeral node named exactly <path> (not
                   sequential): "created <path>"
  delete <path>    "deleted <path>"
  quit             "bye", closes the session and exits
Errors print "error <text>".  End of stdin closes the session and exits,
also while an acquire waits.  Every line is flushed at once.

Runs under Debian's /usr/bin/python3, where python3-kazoo is installed.
"""
import os
import queue
import sys
import threading
import time

from kazoo.client import KazooClient
from kazoo.exceptions import LockTimeout

SESSION_TIMEOUT_S = 20.0
ACQUIRE_WAIT_S = 60.0

PATTERNS = {
    "lock": ["-lock-"],
    "read": ["-lock-", "__WRIT__"],
    "write": ["-lock-", "__WRIT__", "__READ__"],
}


def say(line):
    sys.stdout.write(line + "\n")
    sys.stdout.flush()


def now_ms():
    return int(time.time() * 1000)


def make_lock(zk, path, mode, ident):
    if mode == "admin":
        return None
    cls = {"lock": zk.Lock, "read": zk.ReadLock, "write": zk.WriteLock}[mode]
    return cls(path, ident, extra_lock_patterns=PATTERNS[mode])


def acquire(lock, wait_s, on_timeout):
    try:
        got = lock.acquire(blocking=True, timeout=wait_s)
    except LockTimeout:
        got = False
    return "acquired %d" % now_ms() if got else on_timeout


def run(zk, lock, line):
    cmd, _, arg = line.partition(" ")
    if cmd == "acquire":
        return acquire(lock, ACQUIRE_WAIT_S, "timeout")
    if cmd == "try":
        return acquire(lock, int(arg) / 1000.0, "busy")
    if cmd == "release":
        t = now_ms()
        lock.release()
        return "released %d" % t
    if cmd == "contenders":
        return "contenders " + ",".join(lock.contenders())
    if cmd == "create":
        zk.create(arg, b"", ephemeral=True)
        return "created " + arg
    if cmd == "delete":
        zk.delete(arg)
        return "deleted " + arg
    return "error unknown command " + line


def main(argv):
    if len(argv) != 5 or argv[3] not in ("lock", "read", "write", "admin"):
        sys.stderr.write(__doc__)
        return 2
    hosts, path, mode, ident = argv[1:5]
    zk = KazooClient(hosts=hosts, timeout=SESSION_TIMEOUT_S)
    zk.start(timeout=30)
    lock = make_lock(zk, path, mode, ident)

    # Commands run on a worker thread, so that the end of stdin ends the
    # peer even while an acquire waits.
    commands = queue.Queue()

    def worker():
        while True:
            line = commands.get()
            if line is None:
                return
            if line == "quit":
                say("bye")
                commands.put(None)
                return
            try:
                say(run(zk, lock, line))
            except Exception as e:  # reported to the test, which decides
                say("error %s: %s" % (type(e).__name__, str(e).replace("\n", " ")))

    t = threading.Thread(target=worker, daemon=True)
    t.start()
    say("ready")
    for line in sys.stdin:
        line = line.strip()
        if line:
            commands.put(line)
        if line == "quit":
            break
    commands.put(None)
    t.join(5)
    # Close the session so its ephemeral nodes go at once; do not hang on a
    # worker that still waits.
    closer = threading.Thread(target=lambda: (zk.stop(), zk.close()), daemon=True)
    closer.start()
    closer.join(10)
    sys.stdout.flush()
    os._exit(0)


if __name__ == "__main__":
    sys.exit(main(sys.argv))
