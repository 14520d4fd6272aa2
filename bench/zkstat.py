"""Four-letter-word counters of a ZooKeeper ensemble, summed over servers.

    zkstat.py HOSTS          prints  watches=N notifications=M children=C
    zkstat.py HOSTS version  prints  the server version
    zkstat.py HOSTS reset    resets every server's statistics (srst)
    zkstat.py HOSTS maxlat   prints  zk_max_latency=N zk_max_server=HOST:PORT, the
                             slowest request any server answered since the
                             reset, in ms, as the server measured it
    zkstat.py HOSTS packets CMD [ARG...]
                             runs CMD (its output goes to stderr) and prints
                             packets=N, the requests the servers received
                             from clients meanwhile (mntr's
                             zk_packets_received, summed over the servers)

watches: "Total watches" of wchs (one per watching session and path).
notifications: watchers fired so far, from mntr's zk_sum_node_*_watch_count
(created, deleted, changed, children): a delete that fires 1 watch adds 1.
children: the child watches among them (zk_sum_node_children_watch_count).

packets: before CMD and after it, waits (30 s at most) until no server has a
client connection but the one asking (zk_num_alive_connections 1), so that
the closes of earlier clients fall before the count and CMD's own after it,
and reads every server's counter.  A server counts each four-letter word as
a packet received (its own mntr included); the count leaves out those this
command sent after its first reading.  A server that does not answer, or
whose mntr lacks the counters (not serving, mntr not allowed), ends it with
status 1; CMD's failure too.
"""
import socket
import subprocess
import sys
import time


def four_letter(host, port, cmd, timeout=3.0):
    with socket.create_connection((host, port), timeout=timeout) as s:
        s.sendall(cmd.encode())
        chunks = []
        while True:
            b = s.recv(65536)
            if not b:
                break
            chunks.append(b)
    return b"".join(chunks).decode(errors="replace")


def servers(hosts):
    """host:port pairs of a connect string as ZooKeeper's clients read it:
    blanks around entries and empty entries skipped, a chroot dropped, port
    2181 when none is given, an IPv6 address in brackets."""
    for hp in hosts.split("/")[0].split(","):
        hp = hp.strip()
        if not hp:
            continue
        if hp.startswith("["):
            h, _, rest = hp[1:].partition("]")
            p = rest[1:] if rest.startswith(":") else ""
        elif hp.count(":") == 1:
            h, p = hp.split(":")
        else:
            h, p = hp, ""
        yield h, int(p) if p else 2181


def fail(msg):
    sys.stderr.write("zkstat.py: %s\n" % msg)
    sys.exit(1)


def mntr(h, p):
    try:
        text = four_letter(h, p, "mntr", timeout=10.0)
    except OSError as e:
        fail("%s:%d did not answer mntr: %s" % (h, p, e))
    d = dict(l.split("\t", 1) for l in text.splitlines() if "\t" in l)
    for k in ("zk_packets_received", "zk_num_alive_connections"):
        if k not in d:
            fail("%s:%d: no %s in its mntr: %s" % (h, p, k, text.strip()[:200]))
    return d


def packets(hosts, cmd):
    srv = list(servers(hosts))
    sent = 0                    # four-letter words since the first reading

    def quiet_sum():
        nonlocal sent
        deadline = time.monotonic() + 30.0
        while True:
            ds = [mntr(h, p) for h, p in srv]
            sent += len(srv)
            busy = ["%s:%d" % hp for hp, d in zip(srv, ds)
                    if int(d["zk_num_alive_connections"]) != 1]
            if not busy:
                return sum(int(d["zk_packets_received"]) for d in ds)
            if time.monotonic() > deadline:
                fail("clients still connected after 30 s: %s" % " ".join(busy))
            time.sleep(0.05)

    before = quiet_sum()
    sent = 0
    rc = subprocess.call(cmd, stdout=sys.stderr)
    if rc != 0:
        fail("%s exited with status %d" % (cmd[0], rc))
    after = quiet_sum()
    print("packets=%d" % (after - before - sent))


def main():
    hosts = sys.argv[1]
    if len(sys.argv) > 2 and sys.argv[2] == "packets":
        if len(sys.argv) == 3:
            sys.stderr.write("usage: zkstat.py HOSTS packets CMD [ARG...]\n")
            sys.exit(2)
        packets(hosts, sys.argv[3:])
        return
    if len(sys.argv) > 2 and sys.argv[2] == "version":
        for h, p in servers(hosts):
            for line in four_letter(h, p, "srvr").splitlines():
                if line.startswith("Zookeeper version:"):
                    print(line.split(":", 1)[1].strip().split(",")[0])
                    return
        return
    if len(sys.argv) > 2 and sys.argv[2] == "reset":
        for h, p in servers(hosts):
            four_letter(h, p, "srst")
        return
    if len(sys.argv) > 2 and sys.argv[2] == "maxlat":
        worst, where = -1, "-"
        for h, p in servers(hosts):
            for line in four_letter(h, p, "mntr").splitlines():
                k, _, v = line.partition("\t")
                if k == "zk_max_latency" and int(float(v)) > worst:
                    worst, where = int(float(v)), "%s:%d" % (h, p)
        print("zk_max_latency=%d\nzk_max_server=%s" % (worst, where))
        return
    watches = notes = children = 0
    for h, p in servers(hosts):
        for line in four_letter(h, p, "wchs").splitlines():
            if "Total watches:" in line:
                watches += int(line.split(":")[1])
        for line in four_letter(h, p, "mntr").splitlines():
            k, _, v = line.partition("\t")
            if k.startswith("zk_sum_node_") and k.endswith("_watch_count"):
                notes += int(float(v))
            if k == "zk_sum_node_children_watch_count":
                children += int(float(v))
    print("watches=%d notifications=%d children=%d" % (watches, notes, children))


if __name__ == "__main__":
    main()
