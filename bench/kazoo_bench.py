"""kazoo's Lock recipe in the zklock benchmark (run with /usr/bin/python3).

    kazoo_bench.py cycle    HOSTS WARM N OUT        one client, one lock
    kazoo_bench.py handoff  HOSTS CLIENTS SECS OUT  one lock; one process and
                                                    client (session) per client
    kazoo_bench.py distinct HOSTS CLIENTS SECS OUT  one lock per client, one
                                                    process and client each
    kazoo_bench.py latency  HOSTS WARM N SETTLE_US OUT
                                                    hand-off latency: from the
                                                    holder's release to the
                                                    waiter's acquire returning
                                                    (two clients, two threads)
    kazoo_bench.py herd     HOSTS WAITERS OUT       one shared client, a holder
                                                    and WAITERS threads

Processes, not threads, for the multi-client figures: the GIL would
otherwise cap kazoo at one core.  Writes OUT.lat (microseconds per line: the
cycle, or for handoff the acquire) and OUT.sum (key=value).  herd writes
OUT.ready once every waiter is queued and waits (bounded) for OUT.go.
A Lock object is reused across cycles, as applications do.
"""
import os
import sys
import threading
import time

from kazoo.client import KazooClient

ROOT = "/bench-kazoo"
WAIT_S = 30


def client(hosts):
    c = KazooClient(hosts=hosts, timeout=30.0)
    c.start(timeout=WAIT_S)
    return c


def acquire(lock):
    if not lock.acquire(timeout=WAIT_S):
        raise RuntimeError("acquire timed out")


def write(out, lats, cycles, seconds, clients, extra=""):
    with open(out + ".lat", "w") as f:
        f.write("".join("%d\n" % v for v in lats))
    with open(out + ".sum", "w") as f:
        f.write("cycles=%d\nseconds=%.6f\nclients=%d\n%s"
                % (cycles, seconds, clients, extra))


def cycle(hosts, warm, n, out):
    c = client(hosts)
    lock = c.Lock(ROOT + "/u")
    lats = []
    t_all = time.perf_counter()
    for i in range(warm + n):
        if i == warm:
            t_all = time.perf_counter()
        t0 = time.perf_counter()
        acquire(lock)
        lock.release()
        if i >= warm:
            lats.append(round((time.perf_counter() - t0) * 1e6))
    write(out, lats, n, time.perf_counter() - t_all, 1)
    c.stop()
    c.close()


def child(hosts, idx, handoff, secs, ready_w, go_r, out):
    """One client process: connect, warm up, wait for go, loop, report."""
    c = client(hosts)
    warm = c.Lock("%s/warm%d" % (ROOT, idx))
    for _ in range(10):
        acquire(warm)
        warm.release()
    lock = c.Lock(ROOT + ("/h" if handoff else "/d%d" % idx))
    os.write(ready_w, b"r")
    start = float(os.read(go_r, 64).decode().split()[0])
    end = start + secs
    lats = []
    cycles = 0
    while time.time() < end:
        t0 = time.perf_counter()
        acquire(lock)
        t1 = time.perf_counter()
        lock.release()
        lats.append(round(((t1 if handoff else time.perf_counter()) - t0) * 1e6))
        cycles += 1
    finish = time.time()
    with open("%s.c%d" % (out, idx), "w") as f:
        f.write("%d %.6f\n" % (cycles, finish))
        f.write("".join("%d\n" % v for v in lats))
    c.stop()
    c.close()


def multi(hosts, clients, secs, out, handoff):
    ready_r, ready_w = os.pipe()
    gos = []
    pids = []
    for i in range(clients):
        go_r, go_w = os.pipe()
        pid = os.fork()
        if pid == 0:
            code = 1
            try:
                os.close(ready_r)
                os.close(go_w)
                child(hosts, i, handoff, secs, ready_w, go_r, out)
                code = 0
            except BaseException as e:  # report, never return into the parent's code
                sys.stderr.write("kazoo client %d: %r\n" % (i, e))
            finally:
                os._exit(code)
        os.close(go_r)
        gos.append(go_w)
        pids.append(pid)
    os.close(ready_w)
    deadline = time.time() + 120
    got = 0
    while got < clients and time.time() < deadline:
        b = os.read(ready_r, clients)
        if not b:
            break
        got += len(b)
    if got < clients:
        for p in pids:
            try:
                os.kill(p, 9)
            except OSError:
                pass
        raise RuntimeError("only %d of %d clients ready" % (got, clients))
    start = time.time() + 0.05
    for g in gos:
        os.write(g, ("%.6f\n" % start).encode())
        os.close(g)
    failed = 0
    for p in pids:
        _, st = os.waitpid(p, 0)
        if st != 0:
            failed += 1
    if failed:
        raise RuntimeError("%d clients failed" % failed)
    lats = []
    total = 0
    last = start
    for i in range(clients):
        with open("%s.c%d" % (out, i)) as f:
            cyc, fin = f.readline().split()
            total += int(cyc)
            last = max(last, float(fin))
            lats.extend(int(x) for x in f)
        os.unlink("%s.c%d" % (out, i))
    write(out, lats, total, last - start, clients)


def herd(hosts, waiters, out):
    c = client(hosts)
    path = ROOT + "/herd"
    holder = c.Lock(path)
    acquire(holder)
    done = threading.Semaphore(0)
    errors = []

    def waiter():
        try:
            lk = c.Lock(path)
            if not lk.acquire(timeout=180):
                raise RuntimeError("herd waiter timed out")
            lk.release()
        except Exception as e:  # counted below
            errors.append(e)
        done.release()

    t_conn = time.perf_counter()
    for _ in range(waiters):
        threading.Thread(target=waiter, daemon=True).start()
    deadline = time.time() + 180
    queued = 0
    while time.time() < deadline:
        queued = len(c.get_children(path)) - 1
        if queued >= waiters:
            break
        time.sleep(0.1)
    if queued < waiters:
        raise RuntimeError("only %d waiters queued" % queued)
    time.sleep(0.5)  # the last ones set their watch after their create
    conn_s = time.perf_counter() - t_conn
    open(out + ".ready", "w").close()
    deadline = time.time() + 120
    while not os.path.exists(out + ".go") and time.time() < deadline:
        time.sleep(0.02)
    if not os.path.exists(out + ".go"):
        raise RuntimeError("no go signal")
    t0 = time.perf_counter()
    holder.release()
    got = 0
    deadline = time.time() + 120
    while got < waiters:
        if not done.acquire(timeout=max(0.0, deadline - time.time())):
            break
        got += 1
    secs = time.perf_counter() - t0
    with open(out + ".sum", "w") as f:
        f.write("waiters=%d\nacquired=%d\nseconds=%.6f\nconnect_seconds=%.3f\n"
                % (waiters, got - len(errors), secs, conn_s))
    if got < waiters or errors:
        raise RuntimeError("herd incomplete: %d done, %d errors" % (got, len(errors)))
    c.stop()
    c.close()


def latency(hosts, warm, n, settle_us, out):
    import queue
    ca, cb = client(hosts), client(hosts)
    path = ROOT + "/l"
    la, lb = ca.Lock(path), cb.Lock(path)
    cmd, acquired, released = queue.Queue(), queue.Queue(), queue.Queue()
    failure = []

    def waiter():
        try:
            while cmd.get():
                acquire(lb)
                acquired.put(time.perf_counter())
                cmd.get()
                lb.release()
                released.put(True)
        except BaseException as e:
            failure.append(e)
            acquired.put(None)
            released.put(False)

    w = threading.Thread(target=waiter, daemon=True)
    w.start()
    lats = []
    t_all = time.perf_counter()
    for i in range(warm + n):
        if i == warm:
            t_all = time.perf_counter()
        acquire(la)
        cmd.put(True)
        limit = time.perf_counter() + 10
        while len(ca.get_children(path)) != 2:
            if time.perf_counter() > limit or failure:
                raise RuntimeError("waiter did not queue: %r" % failure)
            time.sleep(0.0002)
        time.sleep(settle_us / 1e6)
        t0 = time.perf_counter()
        la.release()
        t1 = acquired.get(timeout=WAIT_S)
        if t1 is None:
            raise RuntimeError("waiter failed: %r" % failure)
        if i >= warm:
            lats.append(round((t1 - t0) * 1e6))
        cmd.put(True)
        if not released.get(timeout=WAIT_S):
            raise RuntimeError("waiter did not release: %r" % failure)
    cmd.put(False)
    write(out, lats, n, time.perf_counter() - t_all, 2)
    for c in (ca, cb):
        c.stop()
        c.close()


def main():
    a = sys.argv
    if a[1] == "cycle":
        cycle(a[2], int(a[3]), int(a[4]), a[5])
    elif a[1] in ("handoff", "distinct"):
        multi(a[2], int(a[3]), float(a[4]), a[5], a[1] == "handoff")
    elif a[1] == "herd":
        herd(a[2], int(a[3]), a[4])
    elif a[1] == "latency":
        latency(a[2], int(a[3]), int(a[4]), int(a[5]), a[6])
    else:
        sys.exit("unknown mode " + a[1])


if __name__ == "__main__":
    # kazoo's threads must not keep a failed or finished run alive: leave
    # through os._exit either way.
    status = 0
    try:
        main()
    except BaseException:
        import traceback
        traceback.print_exc()
        status = 1
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(status)
