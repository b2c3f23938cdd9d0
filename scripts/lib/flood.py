#!/usr/bin/env python3
"""Floods for scripts/stages/37-netns-floods (run inside a test network namespace only).

  flood.py handshake DST PORT SECONDS SRCNET [COUNT]
                                               Noise first messages, each from a fresh random
                                               ephemeral key and sender index, from spoofed
                                               source addresses SRCNET.100-254 (raw socket;
                                               never the hub's or the node's own address);
                                               with COUNT: exactly COUNT distinct ones, built
                                               before the clock starts and paced evenly over
                                               SECONDS (a loaded machine still reaches the
                                               count: only sendto is left in the timed loop)
  flood.py garbage   DST PORT SECONDS SRCNET   random bytes, 1..1400 long, spoofed sources
  flood.py frames    DST PORT SECONDS SRCNET   valid-looking session frames (right version,
                                               type, length) with random contents
  flood.py oversize  DST PORT SECONDS          4..9 KB datagrams (IP-fragmented on a 1500 MTU)
  flood.py mdns      IFADDR SECONDS SERVICE    mDNS PTR queries for SERVICE to 224.0.0.251
  flood.py http      HOST PORT SECONDS         GET floods from 32 threads, oversized requests
                                               and 200 idle connections held open
  flood.py capture   IFACE A B SECONDS FILE    (run where IFACE is a bridge port, e.g. the switch
                                               namespace) records the UDP payloads between the
                                               hosts A and B, both ways, one line each:
                                               "SRC:SPORT DST:DPORT HEX" (a sniffer on the link)
  flood.py spoof     DST PORT SECONDS SRC SPORT RATE FILE
                                               datagrams claiming SRC:SPORT (a real peer's own
                                               address and port, raw socket): garbage, replays of
                                               the frames FILE captured from SRC:SPORT to DST:PORT,
                                               and fresh handshake first messages, RATE per second
Prints "sent N" (datagrams or requests) on its last line.
"""
import os, random, socket, struct, sys, threading, time

# A Noise XX first message as the session sends it (FrameHeader: version 1, type 1 handshake,
# flags 0, reserved 0, payload length LE; stage 1, sender index LE, receiver 0, ephemeral key
# (32 bytes), payload). Sender index and ephemeral key are replaced per datagram.
TEMPLATE = bytes.fromhex(
    "010100003300" "01" "31809ba5" "00000000"
    "4a41f4554e72cd641f7a6647087c046cc584b45376facfb59c9acd83bb016b1f" "02000000000000000000")


def ip_checksum(h):
    s = sum(struct.unpack("!10H", h))
    s = (s >> 16) + (s & 0xFFFF)
    s += s >> 16
    return (~s) & 0xFFFF


def spoofed_datagram(payload, base, dst_b, port):
    """One whole IPv4/UDP datagram carrying PAYLOAD from BASE.x (x random in 100..254), for a raw socket."""
    src = socket.inet_aton("%s.%d" % (base, random.randint(100, 254)))
    sport = random.randint(1024, 65535)
    udp = struct.pack("!HHHH", sport, port, 8 + len(payload), 0) + payload  # checksum 0: none (IPv4)
    hdr = struct.pack("!BBHHHBBH4s4s", 0x45, 0, 20 + len(udp), random.randint(0, 65535), 0, 64, 17, 0, src, dst_b)
    return hdr[:10] + struct.pack("!H", ip_checksum(hdr)) + hdr[12:] + udp


def raw_socket():
    sock = socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_RAW)
    sock.setsockopt(socket.IPPROTO_IP, socket.IP_HDRINCL, 1)
    return sock


def source_base(srcnet):
    return srcnet.rsplit(".", 1)[0] if srcnet.count(".") == 3 else srcnet


def raw_sender(dst, port, srcnet):
    """Sends UDP payloads with a spoofed IPv4 source (SRCNET.x, x random in 100..254) through a raw socket."""
    sock = raw_socket()
    dst_b = socket.inet_aton(dst)
    base = source_base(srcnet)

    def send(payload):
        try:
            sock.sendto(spoofed_datagram(payload, base, dst_b, port), (dst, 0))
            return 1
        except OSError:
            return 0
    return send


def handshake():
    p = bytearray(TEMPLATE)
    p[7:11] = os.urandom(4)
    p[15:47] = os.urandom(32)
    return bytes(p)


def garbage():
    return os.urandom(random.randint(1, 1400))


def frame():
    body = os.urandom(random.randint(9, 1200))
    ftype = random.choice([1, 2, 3, 4, 5, 6, 7, 8])
    return bytes([1, ftype, random.randint(0, 3), 0]) + struct.pack("<H", len(body)) + body


def counted_flood(kind, dst, port, seconds, srcnet, count):
    """COUNT distinct datagrams built first, then sent paced evenly over SECONDS (or as fast as the
    machine allows when it falls behind); returns how many the kernel took and the seconds it took."""
    make = {"handshake": handshake, "garbage": garbage, "frames": frame}[kind]
    dst_b, base = socket.inet_aton(dst), source_base(srcnet)
    packets = [spoofed_datagram(make(), base, dst_b, port) for _ in range(count)]
    sock = raw_socket()
    target = (dst, 0)
    start = time.monotonic()
    sent = 0
    for i, p in enumerate(packets):
        if i % 64 == 0:
            ahead = start + seconds * i / count - time.monotonic()
            if ahead > 0:
                time.sleep(ahead)
        try:
            sock.sendto(p, target)
            sent += 1
        except OSError:
            pass
    return sent, time.monotonic() - start


def datagram_flood(kind, dst, port, seconds, srcnet):
    make = {"handshake": handshake, "garbage": garbage, "frames": frame}[kind]
    send = raw_sender(dst, port, srcnet)
    end = time.monotonic() + seconds
    sent = 0
    while time.monotonic() < end:
        for _ in range(64):
            sent += send(make())
    return sent


def oversize(dst, port, seconds):
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    end = time.monotonic() + seconds
    sent = 0
    while time.monotonic() < end:
        for _ in range(16):
            try:
                s.sendto(bytes([1, 2, 0, 0]) + os.urandom(random.randint(4000, 9000)), (dst, port))
                sent += 1
            except OSError:
                time.sleep(0.001)
    return sent


def dns_name(name):
    out = b""
    for label in name.rstrip(".").split("."):
        out += bytes([len(label)]) + label.encode()
    return out + b"\0"


def mdns(ifaddr, seconds, service):
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.setsockopt(socket.IPPROTO_IP, socket.IP_MULTICAST_IF, socket.inet_aton(ifaddr))
    s.setsockopt(socket.IPPROTO_IP, socket.IP_MULTICAST_TTL, 255)
    s.bind((ifaddr, 5353))
    q = dns_name("_%s._udp.local" % service) + struct.pack("!HH", 12, 1)
    end = time.monotonic() + seconds
    sent = 0
    while time.monotonic() < end:
        msg = struct.pack("!HHHHHH", random.randint(0, 65535), 0, 1, 0, 0, 0) + q
        try:
            s.sendto(msg, ("224.0.0.251", 5353))
            sent += 1
        except OSError:
            time.sleep(0.001)
    return sent


def http(host, port, seconds):
    end = time.monotonic() + seconds
    count = [0]
    lock = threading.Lock()
    idle = []
    for _ in range(200):  # connections held open without a request
        try:
            idle.append(socket.create_connection((host, port), timeout=2))
        except OSError:
            break

    def worker(i):
        n = 0
        while time.monotonic() < end:
            try:
                c = socket.create_connection((host, port), timeout=2)
                if i % 8 == 0:   # oversized: a 1 MB header, then a 64 KB path
                    req = b"GET /api/nodes HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Big: " + b"a" * (1 << 20) + b"\r\n\r\n"
                elif i % 8 == 1:
                    req = b"GET /" + b"x" * 65536 + b" HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"
                else:
                    req = b"GET /api/nodes HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n"
                c.sendall(req)
                c.recv(4096)
                c.close()
                n += 1
            except OSError:
                n += 1
        with lock:
            count[0] += n
    threads = [threading.Thread(target=worker, args=(i,)) for i in range(32)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for c in idle:
        c.close()
    return count[0]


def capture(iface, a, b, seconds, path):
    """Sniffs IPv4/UDP between A and B on IFACE (both directions: ETH_P_ALL sees sent frames too)."""
    s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(0x0003))
    s.bind((iface, 0))
    s.settimeout(0.2)
    hosts = {socket.inet_aton(a), socket.inet_aton(b)}
    end = time.monotonic() + seconds
    seen = set()
    lines = []
    while time.monotonic() < end:
        try:
            f = s.recv(65535)
        except socket.timeout:
            continue
        if len(f) < 42 or f[12:14] != b"\x08\x00" or f[23] != 17:
            continue
        ihl = (f[14] & 0x0F) * 4
        src, dst = f[26:30], f[30:34]
        if src not in hosts or dst not in hosts or src == dst:
            continue
        u = 14 + ihl
        sport, dport, ulen = struct.unpack("!HHH", f[u:u + 6])
        if sport == 5353 or dport == 5353:
            continue
        payload = bytes(f[u + 8:u + ulen])
        if payload in seen:   # a frame seen on its way in and out of the bridge port once
            continue
        seen.add(payload)
        lines.append("%s:%d %s:%d %s" % (socket.inet_ntoa(src), sport, socket.inet_ntoa(dst), dport, payload.hex()))
    with open(path, "w") as out:
        out.write("\n".join(lines) + ("\n" if lines else ""))
    return len(lines)


def spoof(dst, port, seconds, src, sport, rate, path):
    """Sends as SRC:SPORT (the victim's own address and port) to DST:PORT: a third each of
    garbage, replayed captured frames of that flow and fresh handshake first messages."""
    replays = []
    with open(path) as f:
        for line in f:
            parts = line.split()
            if len(parts) == 3 and parts[0] == "%s:%d" % (src, sport) and parts[1] == "%s:%d" % (dst, port):
                replays.append(bytes.fromhex(parts[2]))
    if not replays:
        print("flood.py: error: %s has no frames from %s:%d to %s:%d to replay" % (path, src, sport, dst, port), file=sys.stderr)
        return -1
    sock = socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_RAW)
    sock.setsockopt(socket.IPPROTO_IP, socket.IP_HDRINCL, 1)
    src_b, dst_b = socket.inet_aton(src), socket.inet_aton(dst)
    makers = [garbage, lambda: random.choice(replays), handshake]
    end = time.monotonic() + seconds
    start = time.monotonic()
    sent = 0
    while time.monotonic() < end:
        # Paced: the point is who the datagrams claim to be, not their number.
        ahead = sent - (time.monotonic() - start) * rate
        if ahead > 0:
            time.sleep(ahead / rate)
        payload = makers[sent % 3]()
        udp = struct.pack("!HHHH", sport, port, 8 + len(payload), 0) + payload
        hdr = struct.pack("!BBHHHBBH4s4s", 0x45, 0, 20 + len(udp), random.randint(0, 65535), 0, 64, 17, 0, src_b, dst_b)
        hdr = hdr[:10] + struct.pack("!H", ip_checksum(hdr)) + hdr[12:]
        try:
            sock.sendto(hdr + udp, (dst, 0))
            sent += 1
        except OSError:
            time.sleep(0.001)
    print("replayable frames %d" % len(replays))
    return sent


def main(argv):
    if len(argv) < 2:
        print(__doc__, file=sys.stderr)
        return 64
    kind = argv[1]
    if kind in ("handshake", "garbage", "frames") and len(argv) > 6:
        n, took = counted_flood(kind, argv[2], int(argv[3]), float(argv[4]), argv[5], int(argv[6]))
        print("sent %d in %.2f s" % (n, took))
        return 0
    elif kind in ("handshake", "garbage", "frames"):
        n = datagram_flood(kind, argv[2], int(argv[3]), float(argv[4]), argv[5])
    elif kind == "oversize":
        n = oversize(argv[2], int(argv[3]), float(argv[4]))
    elif kind == "mdns":
        n = mdns(argv[2], float(argv[3]), argv[4])
    elif kind == "http":
        n = http(argv[2], int(argv[3]), float(argv[4]))
    elif kind == "capture":
        n = capture(argv[2], argv[3], argv[4], float(argv[5]), argv[6])
    elif kind == "spoof":
        n = spoof(argv[2], int(argv[3]), float(argv[4]), argv[5], int(argv[6]), float(argv[7]), argv[8])
        if n < 0:
            return 1
    else:
        print("flood.py: error: unknown flood '%s' (handshake, garbage, frames, oversize, mdns, http, capture, spoof)" % kind, file=sys.stderr)
        return 64
    print("sent %d" % n)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
