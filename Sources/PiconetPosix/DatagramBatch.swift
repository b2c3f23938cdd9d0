import CPiconetPosix

/// Fixed memory for one `recvmmsg` / `sendmmsg` batch, allocated once per endpoint and reused
/// for every batch: `capacity` slots, each with a payload buffer of `slotSize` bytes, a
/// `sockaddr_storage`, a control buffer (IP_PKTINFO), an `iovec` and an `mmsghdr` entry.
///
/// The payload area is one allocation of `capacity × slotSize` bytes that is never zeroed:
/// the kernel maps its pages only when a datagram is written into them, so 32 slots of 64 KiB
/// cost 2 MiB of address space but only the pages real datagrams touch (100-byte datagrams:
/// one page per slot). Nothing here is `Sendable`: it belongs to its endpoint's loop.
final class DatagramBatch {
    let capacity: Int
    let slotSize: Int
    /// Room for every control message a receive can carry, on 64-bit Linux: UDP_GRO's segment
    /// size (CMSG_SPACE(int) = 24, written first), IP_PKTINFO (CMSG_SPACE(in_pktinfo) = 32) and
    /// SO_RXQ_OVFL's drop count (CMSG_SPACE(uint32) = 24) make 80; a cut buffer (MSG_CTRUNC)
    /// would silently lose the later ones, so round up with room to spare.
    static let controlSize = 128

    private let payload: UnsafeMutableRawPointer
    let names: UnsafeMutablePointer<sockaddr_storage>
    private let control: UnsafeMutableRawPointer
    let iovecs: UnsafeMutablePointer<iovec>
    let headers: UnsafeMutablePointer<piconet_mmsghdr>

    init(capacity: Int, slotSize: Int) {
        // At least one slot of one byte: a batch size or datagram size of 0 from options means 1, not a trap.
        let capacity = max(1, capacity), slotSize = max(1, slotSize)
        self.capacity = capacity
        self.slotSize = slotSize
        slotsToArm = capacity
        payload = UnsafeMutableRawPointer.allocate(byteCount: capacity * slotSize, alignment: 16)
        names = .allocate(capacity: capacity)
        names.initialize(repeating: sockaddr_storage(), count: capacity)
        control = UnsafeMutableRawPointer.allocate(byteCount: capacity * Self.controlSize, alignment: 16)
        control.initializeMemory(as: UInt8.self, repeating: 0, count: capacity * Self.controlSize)
        iovecs = .allocate(capacity: capacity)
        headers = .allocate(capacity: capacity)
        for i in 0..<capacity {
            iovecs[i] = iovec(iov_base: payload + i * slotSize, iov_len: slotSize)
            var h = piconet_mmsghdr()
            h.msg_hdr.msg_iov = iovecs + i
            h.msg_hdr.msg_iovlen = 1
            headers[i] = h
        }
    }

    deinit {
        payload.deallocate()
        names.deallocate()
        control.deallocate()
        iovecs.deallocate()
        headers.deallocate()
    }

    /// The payload buffer of slot `i`.
    func slot(_ i: Int) -> UnsafeMutableRawPointer { payload + i * slotSize }

    /// The bytes the kernel wrote into slot `i` (after a receive), capped at the slot size.
    func received(_ i: Int) -> UnsafeRawBufferPointer {
        UnsafeRawBufferPointer(start: slot(i), count: min(Int(headers[i].msg_len), slotSize))
    }

    /// How many slots, from the first, `prepareForReceive` must (re-)arm: all at first (never
    /// armed), then those the last receives may have written (`receiveEnded`).
    private var slotsToArm: Int

    /// Arms the first `count` slots for `recvmmsg`, writing only those not armed since the kernel
    /// last wrote their lengths and flags: a lone datagram re-arms one slot, not all 32.
    func prepareForReceive(_ count: Int) {
        let armed = min(slotsToArm, count, capacity)
        if slotsToArm <= count { slotsToArm = 0 }   // else the slots past `count` still wait their turn
        for i in 0..<armed {
            iovecs[i].iov_len = slotSize
            headers[i].msg_hdr.msg_name = UnsafeMutableRawPointer(names + i)
            headers[i].msg_hdr.msg_namelen = socklen_t(MemoryLayout<sockaddr_storage>.size)
            headers[i].msg_hdr.msg_control = control + i * Self.controlSize
            headers[i].msg_hdr.msg_controllen = Self.controlSize
            headers[i].msg_hdr.msg_flags = 0
            headers[i].msg_len = 0
        }
    }

    /// A `recvmmsg` ended with `received` datagrams (0 when it failed or found none): the
    /// kernel wrote the headers of those, and may have begun the one after.
    func receiveEnded(received: Int) {
        slotsToArm = max(slotsToArm, min(received + 1, capacity))
    }

    /// Fills slot `i` for `sendmmsg`: copies `bytes` (at most `slotSize`) and the destination.
    func prepareForSend(_ i: Int, bytes: [UInt8], to address: SocketAddress) {
        let n = min(bytes.count, slotSize)
        bytes.withUnsafeBytes { if n > 0, let base = $0.baseAddress { slot(i).copyMemory(from: base, byteCount: n) } }
        iovecs[i].iov_len = n
        names[i] = address.storage
        headers[i].msg_hdr.msg_name = UnsafeMutableRawPointer(names + i)
        headers[i].msg_hdr.msg_namelen = address.length
        headers[i].msg_hdr.msg_control = nil
        headers[i].msg_hdr.msg_controllen = 0
        headers[i].msg_hdr.msg_flags = 0
        headers[i].msg_len = 0
    }
}
