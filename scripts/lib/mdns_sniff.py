"""Prints each mDNS packet arriving on an interface as "EPOCH_MS TEXT", for benchmarks that
start a clock at a packet on the wire rather than at a process launch.

  python3 mdns_sniff.py IFACE     (root: an AF_PACKET socket; run it inside the namespace)

EPOCH_MS is the kernel's receive time (SO_TIMESTAMPNS, CLOCK_REALTIME, as `date +%s%3N`), so the
sniffer's own wake-up delay is not counted. TEXT is the UDP payload with every byte outside
printable ASCII shown as ".": a DNS label "run 1" reads ".run 1." whatever follows it.
Only IPv4 UDP packets to or from port 5353 that came in (not ones this namespace sent).
"""
import socket
import struct
import sys

ETH_P_ALL = 3
SO_TIMESTAMPNS = 35
PACKET_OUTGOING = 4


def main():
    if len(sys.argv) != 2:
        sys.stderr.write("mdns_sniff.py: error: expected one interface name (mdns_sniff.py IFACE)\n")
        sys.exit(64)
    s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(ETH_P_ALL))
    s.bind((sys.argv[1], 0))
    s.setsockopt(socket.SOL_SOCKET, SO_TIMESTAMPNS, 1)
    printable = bytes(b if 32 <= b < 127 else ord(".") for b in range(256))
    while True:
        data, ancillary, _, address = s.recvmsg(65536, 64)
        if address[2] == PACKET_OUTGOING or len(data) < 14 + 20 + 8:
            continue
        if data[12:14] != b"\x08\x00":   # IPv4 only: the namespaces have IPv6 off
            continue
        ip = data[14:]
        header = (ip[0] & 0x0F) * 4
        if ip[9] != 17 or len(ip) < header + 8:
            continue
        source_port, destination_port = struct.unpack("!HH", ip[header:header + 4])
        if 5353 not in (source_port, destination_port):
            continue
        ms = None
        for level, kind, value in ancillary:
            if level == socket.SOL_SOCKET and kind == SO_TIMESTAMPNS and len(value) >= 16:
                seconds, nanoseconds = struct.unpack("qq", value[:16])
                ms = seconds * 1000 + nanoseconds // 1_000_000
        if ms is None:
            continue
        text = ip[header + 8:].translate(printable).decode("ascii")
        print(ms, text, flush=True)


if __name__ == "__main__":
    try:
        main()
    except KeyboardInterrupt:
        pass
