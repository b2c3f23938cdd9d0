import CPiconetPosix

/// The `sendmmsg` vector for a send pool's filled slots, each entry either one datagram or a
/// UDP GSO run: consecutive slots to the same destination with the same size (the run's last
/// may be shorter), handed to the kernel as one `msghdr` whose `iovec`s are the slots' own and
/// whose UDP_SEGMENT control message tells the kernel where to cut them again.
///
/// Why runs inside `sendmmsg` rather than one `sendmsg` per run: a flush that spans two peers
/// (or mixes sizes) stays one syscall, and a partial send still resumes at an entry boundary,
/// which is a slot boundary. The kernel takes a GSO entry whole or not at all (UDP_SEGMENT is
/// all-or-nothing), so the counts stay exact.
///
/// Limits, from the kernel: at most `maximumSegments` datagrams per run (UDP_MAX_SEGMENTS; 64
/// before Linux 6.6 raised it to 128), and the run's bytes within one IPv4 datagram's length
/// (`maximumRunBytes`), else `sendmsg` answers EMSGSIZE or EINVAL. A segment larger than the
/// path MTU allows makes the kernel answer EINVAL: the endpoint then stops segmenting (see
/// `UDPEndpoint.Options.segmentationOffload`). Fixed memory, made once per send pool.
final class SendRuns {
    static let maximumSegments = 64
    /// 65535 minus the IPv4 and UDP headers: the kernel's `ip_make_skb` length check.
    static let maximumRunBytes = 65_507

    let capacity: Int
    /// Entry `e` of the vector; the first `plan` returned are ready for `sendmmsg`.
    let entries: UnsafeMutablePointer<piconet_mmsghdr>
    /// How many pool slots entry `e` carries (1: a plain datagram).
    private let counts: UnsafeMutablePointer<Int>
    private let control: UnsafeMutableRawPointer
    private let controlSize: Int

    init(capacity: Int) {
        self.capacity = max(1, capacity)
        entries = .allocate(capacity: self.capacity)
        entries.initialize(repeating: piconet_mmsghdr(), count: self.capacity)
        counts = .allocate(capacity: self.capacity)
        counts.initialize(repeating: 0, count: self.capacity)
        controlSize = Int(piconet_cmsg_space(MemoryLayout<UInt16>.size))
        control = UnsafeMutableRawPointer.allocate(byteCount: self.capacity * controlSize, alignment: 16)
        control.initializeMemory(as: UInt8.self, repeating: 0, count: self.capacity * controlSize)
    }

    deinit {
        entries.deallocate()
        counts.deallocate()
        control.deallocate()
    }

    /// How many pool slots entry `e` carries.
    func slotCount(_ e: Int) -> Int { counts[e] }

    /// Fills the vector for `pool`'s slots `start..<end` (prepared with `prepareForSend`) and
    /// returns the number of entries. Slots before `segmentFrom` go one per entry (a refused
    /// run being retried datagram by datagram, or segmentation off: `segmentFrom >= end`).
    func plan(_ pool: DatagramBatch, from start: Int, to end: Int, segmentFrom: Int) -> Int {
        var e = 0
        var s = start
        while s < end, e < capacity {
            var k = 1
            let size = pool.iovecs[s].iov_len
            if s >= segmentFrom, size > 0 {
                var bytes = size
                while s + k < end, k < Self.maximumSegments, bytes + pool.iovecs[s + k].iov_len <= Self.maximumRunBytes,
                      pool.iovecs[s + k].iov_len > 0, pool.iovecs[s + k].iov_len <= size,
                      Self.sameDestination(pool, s, s + k) {
                    bytes += pool.iovecs[s + k].iov_len
                    k += 1
                    if pool.iovecs[s + k - 1].iov_len < size { break }   // a shorter one ends the run
                }
            }
            fill(e, pool, slot: s, count: k, segmentSize: size)
            counts[e] = k
            e += 1
            s += k
        }
        return e
    }

    private func fill(_ e: Int, _ pool: DatagramBatch, slot s: Int, count k: Int, segmentSize: Int) {
        var h = pool.headers[s].msg_hdr   // the slot's destination
        h.msg_iov = pool.iovecs + s
        h.msg_iovlen = k
        h.msg_flags = 0
        if k > 1 {
            h.msg_control = control + e * controlSize
            h.msg_controllen = controlSize
            if let c = piconet_cmsg_firsthdr(&h), let data = piconet_cmsg_data(c) {
                c.pointee.cmsg_level = piconet_sol_udp
                c.pointee.cmsg_type = piconet_udp_segment
                c.pointee.cmsg_len = piconet_cmsg_len(MemoryLayout<UInt16>.size)
                UnsafeMutableRawPointer(data).storeBytes(of: UInt16(segmentSize), as: UInt16.self)
            }
        } else {
            h.msg_control = nil
            h.msg_controllen = 0
        }
        entries[e].msg_hdr = h
        entries[e].msg_len = 0
    }

    /// Whether slots `a` and `b` go to the same address (the `sockaddr` bytes the kernel reads).
    private static func sameDestination(_ pool: DatagramBatch, _ a: Int, _ b: Int) -> Bool {
        let length = Int(pool.headers[a].msg_hdr.msg_namelen)
        guard length == Int(pool.headers[b].msg_hdr.msg_namelen) else { return false }
        let x = UnsafeRawPointer(pool.names + a), y = UnsafeRawPointer(pool.names + b)
        for i in 0..<length where x.load(fromByteOffset: i, as: UInt8.self) != y.load(fromByteOffset: i, as: UInt8.self) {
            return false
        }
        return true
    }
}
