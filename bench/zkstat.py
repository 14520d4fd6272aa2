"""Four-letter-word counters of a ZooKeeper ensemble, summed over servers.

    zkstat.py HOSTS          prints  watches=N notifications=M children=C
    zkstat.py HOSTS version  prints  the server version
    zkstat.py HOSTS reset    resets every server's statistics (srst)
    zkstat.py HOSTS maxlat   prints  zk_max_latency=N zk_max_server=HOST:PORT, the
                             slowest request any server answered since the
                             reset, in ms, as the server measured it

watches: "Total watches" of wchs (one per watching session and path).
notifications: watchers fired so far, from mntr's zk_sum_node_*_watch_count
(created, deleted, changed, children): a delete that fires 1 watch adds 1.
children: the child watches among them (zk_sum_node_children_watch_count).
"""
import socket
import sys


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
    for hp in hosts.split("/")[0].split(","):
        h, p = hp.rsplit(":", 1)
        yield h, int(p)


def main():
    hosts = sys.argv[1]
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
