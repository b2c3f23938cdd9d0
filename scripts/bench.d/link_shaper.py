#!/usr/bin/env python3
"""A user-space link emulator for scripts/bench.d/88-update-link: this kernel has no netem, so
delay cannot be added with tc. Relays one client's traffic from --listen to --to, each direction
through its own queue: serialised at --rate bits/s (payload + 28 bytes of IP/UDP header, so a
datagram's time on the link is its size over the rate), then held --delay ms before it is sent on.

  link_shaper.py udp --listen 10.0.0.1:7300 --to 10.0.0.2:7100 --rate 1000000 --delay 20
  link_shaper.py tcp --listen 10.0.0.1:2300 --to 10.0.0.2:2222 --rate 1000000 --delay 20

udp: datagrams, drop-tail beyond --queue bytes waiting to be serialised (counted, printed at
exit); the client is whoever sent last to --listen. tcp: each accepted connection is relayed to
--to in chunks of at most 1,024 bytes shaped the same way, never dropped: a full queue stops
reading from that side (the sender's TCP window does the rest). Prints "ready" once listening;
SIGTERM ends it, printing what it relayed and dropped."""
import heapq, selectors, signal, socket, sys, time

OVERHEAD = 28


class Direction:
    """One direction's queue: when each piece leaves the wire, and when it is delivered."""
    def __init__(self, rate, delay, limit):
        self.rate, self.delay, self.limit = rate, delay, limit
        self.free_at = 0.0      # when the wire is free again
        self.backlog = []       # (serialised_at, size) not yet off the wire: the queue
        self.relayed = self.dropped = 0

    def queued(self, now):
        while self.backlog and self.backlog[0][0] <= now:
            self.backlog.pop(0)
        return sum(size for _, size in self.backlog)

    def admit(self, size, now, drop=True):
        """The delivery time of a piece of `size` bytes arriving now, or None (dropped)."""
        if drop and self.queued(now) + size > self.limit:
            self.dropped += 1
            return None
        start = max(now, self.free_at)
        self.free_at = start + (size + OVERHEAD) * 8 / self.rate
        self.backlog.append((self.free_at, size))
        self.relayed += 1
        return self.free_at + self.delay


def address(text):
    host, port = text.rsplit(":", 1)
    return host, int(port)


def main():
    mode = sys.argv[1]
    args = dict(zip(sys.argv[2::2], sys.argv[3::2]))
    listen, to = address(args["--listen"]), address(args["--to"])
    rate, delay = float(args.get("--rate", 1_000_000)), float(args.get("--delay", 20)) / 1000
    limit = int(args.get("--queue", 32768))
    up, down = Direction(rate, delay, limit), Direction(rate, delay, limit)
    timers = []   # (due, seq, sock, payload)
    seq = 0
    sel = selectors.DefaultSelector()
    stopping = []
    signal.signal(signal.SIGTERM, lambda *_: stopping.append(1))
    signal.signal(signal.SIGINT, lambda *_: stopping.append(1))

    if mode == "udp":
        front = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        front.bind(listen)
        back = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        back.connect(to)
        client = [None]
        sel.register(front, selectors.EVENT_READ, "front")
        sel.register(back, selectors.EVENT_READ, "back")
        print("ready", flush=True)
        while not stopping:
            now = time.monotonic()
            while timers and timers[0][0] <= now:
                _, _, target, payload = heapq.heappop(timers)
                try:
                    if target == "back":
                        back.send(payload)
                    elif client[0]:
                        front.sendto(payload, client[0])
                except OSError:
                    pass
            wait = max(0.0, timers[0][0] - time.monotonic()) if timers else 0.5
            for key, _ in sel.select(wait):
                now = time.monotonic()
                if key.data == "front":
                    payload, source = front.recvfrom(65536)
                    client[0] = source
                    due, target = up.admit(len(payload), now), "back"
                else:
                    try:
                        payload = back.recv(65536)
                    except OSError:
                        continue
                    due, target = down.admit(len(payload), now), "front"
                if due is not None:
                    seq += 1
                    heapq.heappush(timers, (due, seq, target, payload))
    else:
        server = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        server.bind(listen)
        server.listen(4)
        sel.register(server, selectors.EVENT_READ, "accept")
        pending = {}   # socket -> bytes in the delay line towards it
        feeds = {}     # socket -> (the socket it feeds, its direction)
        parked = set() # sockets not read while the queue they feed is full
        print("ready", flush=True)
        while not stopping:
            now = time.monotonic()
            while timers and timers[0][0] <= now:
                _, _, (target, source), payload = heapq.heappop(timers)
                pending[target] -= len(payload)
                try:
                    if payload:
                        target.sendall(payload)
                    else:
                        target.shutdown(socket.SHUT_WR)   # the other side's EOF, delayed as data is
                except OSError:
                    pass
                if source in parked and pending[target] < limit:
                    parked.discard(source)
                    sel.register(source, selectors.EVENT_READ, "data")
            wait = max(0.0, timers[0][0] - time.monotonic()) if timers else 0.5
            for key, _ in sel.select(wait):
                if key.data == "accept":
                    c, _ = server.accept()
                    u = socket.create_connection(to)
                    for sock in (c, u):
                        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
                        sel.register(sock, selectors.EVENT_READ, "data")
                    feeds[c], feeds[u] = (u, up), (c, down)
                    pending[c] = pending[u] = 0
                    continue
                sock = key.fileobj
                peer, direction = feeds[sock]
                try:
                    data = sock.recv(1024)
                except OSError:
                    data = b""
                due = direction.admit(len(data), time.monotonic(), drop=False)
                seq += 1
                pending[peer] += len(data)
                heapq.heappush(timers, (due, seq, (peer, sock), data))
                if not data:
                    sel.unregister(sock)
                elif pending[peer] >= limit:
                    sel.unregister(sock)
                    parked.add(sock)
    print(f"relayed {up.relayed} up, {down.relayed} down; dropped {up.dropped} up, {down.dropped} down", flush=True)


if __name__ == "__main__":
    main()
