#!/usr/bin/python3
"""A DNS server that never answers: binds UDP and TCP port PORT on ADDR,
reads what comes and says nothing, so a resolver pointed at it waits for
its full timeout.  Writes READY once bound.  For test/dns_jail.sh.

    silent_dns.py ADDR PORT READY
"""
import select
import socket
import sys


def main(argv):
    addr, port, ready = argv[1], int(argv[2]), argv[3]
    udp = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    udp.bind((addr, port))
    tcp = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    tcp.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    tcp.bind((addr, port))
    tcp.listen(64)
    with open(ready, "w") as f:
        f.write("ready\n")
    held = []
    while True:
        r, _, _ = select.select([udp, tcp] + held, [], [])
        for s in r:
            if s is udp:
                udp.recvfrom(4096)
            elif s is tcp:
                conn, _ = tcp.accept()
                held.append(conn)
            elif not s.recv(4096):
                held.remove(s)
                s.close()


if __name__ == "__main__":
    sys.exit(main(sys.argv))
