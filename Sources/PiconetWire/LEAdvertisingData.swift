// Bluetooth LE advertising data (Core Specification Vol 3 Part C §11, Supplement Part A):
// a sequence of AD structures `length(1) type(1) data(length-1)`. Multi-byte fields inside
// AD data are little-endian, like the rest of Piconet's formats.
//
// Piconet's own advertisement is one "Service Data - 128-bit UUID" structure (AD type 0x21)
// under the Piconet service UUID, carrying a version, a 32-bit hash of the service type,
// the L2CAP PSM to connect to and a flags byte. With the 3-byte Flags structure it takes
// 29 of the 31 bytes of a legacy advertisement, so it fits every controller (no extended
// advertising needed). The display name goes in the scan response.

/// One AD structure: an AD type and its data.
public struct AdvertisingStructure: Equatable, Sendable {
    public var type: UInt8
    public var data: [UInt8]

    public init(type: UInt8, data: [UInt8]) {
        self.type = type
        self.data = data
    }

    /// AD types Piconet reads or writes (Bluetooth Assigned Numbers §2.3).
    public static let flags: UInt8 = 0x01
    public static let complete128BitServiceUUIDs: UInt8 = 0x07
    public static let shortenedLocalName: UInt8 = 0x08
    public static let completeLocalName: UInt8 = 0x09
    public static let txPowerLevel: UInt8 = 0x0A
    public static let serviceData128BitUUID: UInt8 = 0x21
    public static let manufacturerSpecificData: UInt8 = 0xFF
}

/// Advertising or scan-response data: a list of AD structures.
///
/// Parsing is lenient where the specification is: a zero length byte ends the significant
/// part and the rest (zero padding) is skipped. A structure whose length runs past the
/// end throws `.truncated`. The parser takes any length, because the kernel hands us
/// advertising data and scan response concatenated (and extended advertising is longer);
/// `maximumLegacyLength` is what one legacy advertisement or scan response can carry.
public struct LEAdvertisingData: WireCodable, Equatable, Sendable {
    /// Bytes in one legacy advertisement or scan response.
    public static let maximumLegacyLength = 31

    public var structures: [AdvertisingStructure]

    public init(_ structures: [AdvertisingStructure] = []) { self.structures = structures }

    public init(parsing r: inout ByteReader) throws(WireError) {
        var list: [AdvertisingStructure] = []
        while !r.isAtEnd {
            let length = Int(try r.readUInt8())
            if length == 0 {
                // Early termination: the remainder is padding, not data.
                _ = r.readRemaining()
                break
            }
            let type = try r.readUInt8()
            list.append(AdvertisingStructure(type: type, data: try r.readBytes(length - 1)))
        }
        structures = list
    }

    /// Structures with more than 254 bytes of data cannot be encoded (one length byte);
    /// `encode` writes at most 254 of them. Builders check sizes before getting here.
    public func encode(into w: inout ByteWriter) {
        for s in structures {
            let data = s.data.prefix(254)
            w.writeUInt8(UInt8(data.count + 1))
            w.writeUInt8(s.type)
            w.writeBytes(data)
        }
    }

    public var encodedLength: Int { structures.reduce(0) { $0 + 2 + min($1.data.count, 254) } }

    /// The data of the first structure of `type`, or nil.
    public func first(_ type: UInt8) -> [UInt8]? { structures.first { $0.type == type }?.data }

    /// The local name and whether it was marked shortened (AD type 0x08), or nil.
    /// Invalid UTF-8 (a name cut mid-character by someone else) is repaired, never refused.
    public var localName: (name: String, isShortened: Bool)? {
        if let full = first(AdvertisingStructure.completeLocalName) {
            return (String(decoding: full, as: UTF8.self), false)
        }
        if let short = first(AdvertisingStructure.shortenedLocalName) {
            return (String(decoding: short, as: UTF8.self), true)
        }
        return nil
    }

    /// The data after `uuid` of the first 128-bit-UUID service data structure for it, or nil.
    public func serviceData(for uuid: [UInt8]) -> [UInt8]? {
        for s in structures where s.type == AdvertisingStructure.serviceData128BitUUID && s.data.count >= 16 {
            if Array(s.data[0..<16]) == uuid { return Array(s.data[16...]) }
        }
        return nil
    }

    /// A name structure that fits `room` bytes of AD data: complete (0x09) if the whole
    /// name fits, else shortened (0x08), cut on a UTF-8 character boundary.
    public static func nameStructure(_ name: String, room: Int = maximumLegacyLength) -> AdvertisingStructure {
        let bytes = Array(name.utf8)
        let limit = max(0, room - 2)
        if bytes.count <= limit { return AdvertisingStructure(type: AdvertisingStructure.completeLocalName, data: bytes) }
        var cut = limit
        // Continuation bytes are 0b10xxxxxx: back up to the start of a character.
        while cut > 0 && bytes[cut] & 0xC0 == 0x80 { cut -= 1 }
        return AdvertisingStructure(type: AdvertisingStructure.shortenedLocalName, data: Array(bytes[0..<cut]))
    }
}

/// The payload of Piconet's service data structure (after the 128-bit UUID): 8 or 10 bytes.
///
///     version(1) serviceHash(4, LE) psm(2, LE) flags(1) [peerTag(2, LE) when flags has .hasPeerTag]
///
/// The peer tag is the first two bytes of the advertiser's peer ID (the `peer` value of its
/// Wi-Fi discovery info, SHA-256 of its public key): the room left in a legacy advertisement
/// (Flags 3 + service data 28 = 31 of 31 bytes) has space for no more. A browser uses it to
/// recognise one peer seen over Wi-Fi and Bluetooth (`PeerDirectory`); 16 bits can collide
/// (about 1 in 65,536 per pair of nodes of one service type in range), which only merges two
/// routes in a listing: the Noise handshake still proves who answers.
/// A version this build does not know throws `.unsupportedVersion`, so a future format is
/// ignored rather than misread; bytes after the known fields are ignored (room to grow).
public struct PiconetServiceData: WireCodable, Equatable, Sendable {
    /// The Piconet service UUID 8a3c1f2e-5b6d-4e70-9c21-70696e657400 in on-air
    /// (little-endian) byte order; its last six bytes are "pinet\0" in ASCII, easy to spot in btmon.
    public static let serviceUUID: [UInt8] = [0x00, 0x74, 0x65, 0x6E, 0x69, 0x70, 0x21, 0x9C,
                                              0x70, 0x4E, 0x6D, 0x5B, 0x2E, 0x1F, 0x3C, 0x8A]
    public static let currentVersion: UInt8 = 1
    /// Bytes without the optional peer tag.
    public static let length = 8

    /// What the advertiser offers, one bit each.
    public struct Flags: OptionSet, Hashable, Sendable {
        public let rawValue: UInt8
        public init(rawValue: UInt8) { self.rawValue = rawValue }
        /// The node takes invitations now (not already in a session that is full).
        public static let acceptsInvitations = Flags(rawValue: 1 << 0)
        /// `psm` is a BR/EDR PSM (odd, >= 0x1001) rather than an LE credit-based one.
        public static let psmIsBREDR = Flags(rawValue: 1 << 1)
        /// The node also advertises over Wi-Fi (mDNS): a browser may merge the two routes.
        public static let alsoOnWiFi = Flags(rawValue: 1 << 2)
        /// A 2-byte peer tag follows the flags. Set by the encoder from `peerTag`, never by hand.
        public static let hasPeerTag = Flags(rawValue: 1 << 3)
    }

    public var version: UInt8
    public var serviceHash: UInt32
    public var psm: UInt16
    /// Flags as advertised, without `.hasPeerTag` (that one follows `peerTag`).
    public var flags: Flags
    /// The first two bytes of the advertiser's peer ID, big-endian as printed (`1a2b` of
    /// `1a2b…`), or nil when it advertises none.
    public var peerTag: UInt16?

    public init(serviceHash: UInt32, psm: UInt16, flags: Flags = [], peerTag: UInt16? = nil,
                version: UInt8 = PiconetServiceData.currentVersion) {
        self.version = version
        self.serviceHash = serviceHash
        self.psm = psm
        self.flags = flags.subtracting(.hasPeerTag)
        self.peerTag = peerTag
    }

    public init(parsing r: inout ByteReader) throws(WireError) {
        try r.require(Self.length)
        version = try r.readUInt8()
        guard version == Self.currentVersion else { throw .unsupportedVersion(version) }
        serviceHash = try r.readUInt32()
        psm = try r.readUInt16()
        let raw = Flags(rawValue: try r.readUInt8())
        flags = raw.subtracting(.hasPeerTag)
        peerTag = try raw.contains(.hasPeerTag) ? r.readUInt16() : nil
    }

    public func encode(into w: inout ByteWriter) {
        w.writeUInt8(version)
        w.writeUInt32(serviceHash)
        w.writeUInt16(psm)
        w.writeUInt8(peerTag == nil ? flags.rawValue : flags.union(.hasPeerTag).rawValue)
        if let peerTag { w.writeUInt16(peerTag) }
    }

    public var encodedLength: Int { Self.length + (peerTag == nil ? 0 : 2) }

    /// The peer tag of a peer ID printed as hex (its first four hex digits); nil if `hex` does
    /// not start with four hex digits.
    public static func peerTag(peerIDHex hex: String) -> UInt16? {
        let digits = Array(hex.utf8.prefix(4))
        guard digits.count == 4 else { return nil }
        var v: UInt16 = 0
        for c in digits {
            let n: UInt8
            switch c {
            case UInt8(ascii: "0")...UInt8(ascii: "9"): n = c - UInt8(ascii: "0")
            case UInt8(ascii: "a")...UInt8(ascii: "f"): n = c - UInt8(ascii: "a") + 10
            case UInt8(ascii: "A")...UInt8(ascii: "F"): n = c - UInt8(ascii: "A") + 10
            default: return nil
            }
            v = v << 4 | UInt16(n)
        }
        return v
    }

    /// The 32-bit FNV-1a hash of a service type's name (its UTF-8 bytes, e.g. "hr-sensor").
    ///
    /// Short on purpose: 4 bytes is what fits beside the UUID and PSM. Collisions only cost
    /// a connection attempt to a node of another type, which the session handshake refuses.
    public static func serviceHash(_ serviceName: String) -> UInt32 {
        var h: UInt32 = 0x811C_9DC5
        for b in serviceName.utf8 {
            h ^= UInt32(b)
            h = h &* 0x0100_0193
        }
        return h
    }

    /// Flags AD value: LE General Discoverable, BR/EDR not supported on the advertising
    /// bearer (bits 1 and 2). Scanners that honour it will not try BR/EDR paging for us.
    public static let leFlags: UInt8 = 0x06

    /// The advertising data for this payload: Flags + 128-bit-UUID service data (29 bytes,
    /// 31 with a peer tag: a full legacy advertisement).
    public var advertisingData: LEAdvertisingData {
        LEAdvertisingData([
            AdvertisingStructure(type: AdvertisingStructure.flags, data: [Self.leFlags]),
            AdvertisingStructure(type: AdvertisingStructure.serviceData128BitUUID, data: Self.serviceUUID + encoded()),
        ])
    }

    /// Finds and parses Piconet's service data in advertising data; nil if it is not there.
    /// Throws if it is there but malformed or of an unknown version.
    public init?(in data: LEAdvertisingData) throws(WireError) {
        guard let payload = data.serviceData(for: Self.serviceUUID) else { return nil }
        var r = ByteReader(payload)
        self = try Self(parsing: &r)
    }
}
