import CBlueZ
import CPiconetPosix
import PiconetLoop
import PiconetWire

/// The receive side: readiness events, batched receive (recvmmsg, GRO), delivery in order and
/// the kernel's drop counter.
extension UDPEndpoint {
    func handle(_ events: Events) {
        if events.contains(.writable), let registration {
            sendStalled = false
            try? loop.modify(registration, interest: .read)
            onWritable?()
        }
        if events.contains(.readable) || events.contains(.error) {
            receiveAll()
        }
    }

    func receiveAll() {
        var taken = 0
        let pool = receivePool
        var loneFirst = options.deliverLoneDatagramFirst && takenLastWakeUp <= 1
        defer { takenLastWakeUp = taken }
        while taken < options.maximumDatagramsPerWakeUp, !socket.isClosed {
            let wanted = loneFirst ? 1 : min(pool.capacity, options.maximumDatagramsPerWakeUp - taken)
            loneFirst = false
            pool.prepareForReceive(wanted)
            let outcome = Result { () throws(IOError) in try Sys.recvmmsg(socket.rawValue, pool.headers, count: wanted) }
            switch outcome {
            case .success(.wouldBlock):
                pool.receiveEnded(received: 0)
                return
            case .failure:
                // ECONNREFUSED and friends from earlier sends: counted, the socket stays usable.
                pool.receiveEnded(received: 0)
                statistics.receiveErrors += 1
                taken += 1
            case let .success(.processed(count)):
                pool.receiveEnded(received: count)
                if count > 0 { statistics.receiveBatches += 1 }
                taken += count
                for i in 0..<count where !socket.isClosed {
                    deliverDatagrams(inSlot: i)
                }
                // A short batch emptied the queue: skip the call that would only say EAGAIN.
                if count < wanted { return }
            }
        }
    }

    /// Hands the datagrams of receive slot `i` to `onDatagram`: the one it holds, or each one a
    /// GRO buffer holds (cut at the UDP_GRO size; the last may be shorter), in order.
    func deliverDatagrams(inSlot i: Int) {
        let pool = receivePool
        // One walk of the control messages for all three, not three walks, and the drop count taken after the delivery, not before it.
        let control = Self.controlInfo(&pool.headers[i].msg_hdr)
        defer { countKernelDrops(control.drops) }
        guard isReceiveOffloadActive, let segment = control.segmentSize,
              pool.headers[i].msg_hdr.msg_flags & CInt(MSG_TRUNC) == 0 else {
            if var d = datagram(inSlot: i, info: control.packetInfo) { deliver(&d, pool.received(i)) }
            return
        }
        let bytes = pool.received(i)
        let pieces = (bytes.count + segment - 1) / segment
        guard segment <= options.maximumDatagramSize else {
            statistics.truncatedDropped += pieces   // each one larger than we accept
            return
        }
        guard var d = datagram(inSlot: i, info: control.packetInfo, whole: false) else { return }
        if pieces > 1 { statistics.coalescedReceives += 1 }
        var start = 0
        while start < bytes.count, !socket.isClosed {
            let end = min(start + segment, bytes.count)
            deliver(&d, UnsafeRawBufferPointer(rebasing: bytes[start..<end]))
            start = end
        }
    }

    /// SO_RXQ_OVFL's running count of the socket's drops, as the kernel last gave it: what it
    /// grew by since last seen (modulo 2^32; never backwards) goes to `kernelDropped`.
    func countKernelDrops(_ total: UInt32?) {
        guard isCountingKernelDrops, let total else { return }
        let grown = total &- kernelDropCount
        if grown < 0x8000_0000 {
            statistics.kernelDropped += Int(grown)
            kernelDropCount = total
        }
    }

    /// Calls `onDatagram` with `bytes` in `d`, copied into an array this endpoint lends for the
    /// call and takes back after it: no allocation per datagram while handlers only read it
    /// (as a session does). A handler that keeps the array keeps a valid copy: the next
    /// datagram then finds the buffer shared and copy-on-write gives it a fresh one.
    func deliver(_ d: inout Datagram, _ bytes: UnsafeRawBufferPointer) {
        swap(&d.bytes, &lentBuffer)
        d.bytes.overwrite(with: bytes)
        statistics.received += 1
        onDatagram?(d)
        swap(&d.bytes, &lentBuffer)
    }

    /// The datagram in receive slot `i` without its bytes (`deliver` lends them), or nil
    /// (counted) when it was cut, came from an address we cannot represent or arrived on an
    /// interface we do not accept. With `whole: false` (a GRO buffer, judged by its segment
    /// size) the length is not checked here.
    func datagram(inSlot i: Int, info: (index: Int, destination: IPv4Address)?, whole: Bool = true) -> Datagram? {
        let pool = receivePool
        let count = Int(pool.headers[i].msg_len)
        if whole, pool.headers[i].msg_hdr.msg_flags & CInt(MSG_TRUNC) != 0 || count > options.maximumDatagramSize {
            statistics.truncatedDropped += 1
            return nil
        }
        guard let from = SocketAddress(pool.names[i])?.endpoint else {
            statistics.unknownSourceDropped += 1
            return nil
        }
        if let accepted = options.acceptedInterfaces, !accepted.contains(info?.index ?? -1) {
            statistics.foreignInterfaceDropped += 1
            return nil
        }
        // Made whole in one initialiser: built and then filled in, the compiler made a second
        // Datagram and copied it (retains, releases and outlined copies).
        guard let info else { return Datagram(bytes: [], source: from) }
        return Datagram(bytes: [], source: from, interfaceIndex: info.index,
                        destination: info.destination.endpoint(port: localAddress.port))
    }

    /// What the kernel put beside a datagram, from one walk of its control messages: UDP_GRO's
    /// segment size (present only when the kernel coalesced several datagrams into the buffer;
    /// nil for a nonsensical 0), IP_PKTINFO's interface and destination address, SO_RXQ_OVFL's
    /// count of the socket's drops so far. A header whose length does not cover its data (a
    /// control buffer the kernel had to cut, MSG_CTRUNC) is skipped: reading past it would read
    /// the next slot's bytes.
    private static func controlInfo(_ msg: inout msghdr)
        -> (segmentSize: Int?, packetInfo: (index: Int, destination: IPv4Address)?, drops: UInt32?) {
        var segmentSize: Int?, packetInfo: (index: Int, destination: IPv4Address)?, drops: UInt32?
        var c = piconet_cmsg_firsthdr(&msg)
        while let h = c {
            let level = h.pointee.cmsg_level, type = h.pointee.cmsg_type, length = Int(h.pointee.cmsg_len)
            func data(_ size: Int) -> UnsafeRawPointer? {
                guard length >= piconet_cmsg_len(size), let d = piconet_cmsg_data(h) else { return nil }
                return UnsafeRawPointer(d)
            }
            if level == piconet_sol_udp, type == piconet_udp_gro, let d = data(MemoryLayout<CInt>.size) {
                let size = Int(d.loadUnaligned(as: CInt.self))
                segmentSize = size > 0 ? size : nil
            } else if level == CInt(IPPROTO_IP), type == IP_PKTINFO, let d = data(MemoryLayout<in_pktinfo>.size) {
                let info = d.loadUnaligned(as: in_pktinfo.self)
                packetInfo = (Int(info.ipi_ifindex), IPv4Address(info.ipi_addr))
            } else if level == SOL_SOCKET, type == SO_RXQ_OVFL, let d = data(MemoryLayout<UInt32>.size) {
                drops = d.loadUnaligned(as: UInt32.self)
            }
            c = piconet_cmsg_nxthdr(&msg, h)
        }
        return (segmentSize, packetInfo, drops)
    }
}
