import PiconetTestSupport
import PiconetWire
import Testing

/// ATT PDUs (Core Vol 3 Part F §3.4): four-part wire checks. Golden bytes are laid out by the
/// spec's PDU tables, with the values a heart-rate strap and BlueZ's btgatt-server exchange
/// (as btmon prints them).
@Suite struct ATTTests {
    /// Each PDU with its golden bytes (opcode first, little-endian fields).
    static let golden: [(ATTPDU, String)] = [
        // Exchange MTU Request, Client Rx MTU 517; Response, Server Rx MTU 23.
        (.exchangeMTURequest(clientMTU: 517), "02 0502"),
        (.exchangeMTUResponse(serverMTU: 23), "03 1700"),
        // Read By Group Type Request 0x0001–0xFFFF, «Primary Service» 0x2800.
        (.readByGroupTypeRequest(start: 1, end: 0xFFFF, type: .uuid16(0x2800)), "10 0100 ffff 0028"),
        // Response, Length 6: GAP 0x0001–0x0007 (0x1800), Heart Rate 0x0010–0x0017 (0x180D).
        (.readByGroupTypeResponse([ATTGroupValue(handle: 1, endGroupHandle: 7, value: [0x00, 0x18]),
                                   ATTGroupValue(handle: 0x10, endGroupHandle: 0x17, value: [0x0D, 0x18])]),
         "11 06 0100 0700 0018 1000 1700 0d18"),
        // Read By Type Request 0x0010–0x0017, «Characteristic» 0x2803.
        (.readByTypeRequest(start: 0x10, end: 0x17, type: .uuid16(0x2803)), "08 1000 1700 0328"),
        // Response, Length 7: declaration 0x0011 → Notify, value handle 0x0012, UUID 0x2A37.
        (.readByTypeResponse([ATTHandleValue(handle: 0x11, value: [0x10, 0x12, 0x00, 0x37, 0x2A])]),
         "09 07 1100 10 1200 372a"),
        // Find Information Request 0x0013–0x0013; Response Format 1: 0x0013 is a CCCD (0x2902).
        (.findInformationRequest(start: 0x13, end: 0x13), "04 1300 1300"),
        (.findInformationResponse([ATTHandleUUID(handle: 0x13, uuid: .uuid16(0x2902))]), "05 01 1300 0229"),
        // Write Request: 01 00 to the CCCD enables notifications; Write Response.
        (.writeRequest(handle: 0x13, value: [0x01, 0x00]), "12 1300 0100"),
        (.writeResponse, "13"),
        // Read Request / Response: battery level 0x0032 reads 90 %.
        (.readRequest(handle: 0x32), "0a 3200"),
        (.readResponse([90]), "0b 5a"),
        // Handle Value Notification of 0x0012: flags 0x10 (RR present), 72 bpm, RR 0x0354.
        (.handleValueNotification(handle: 0x12, value: [0x10, 72, 0x54, 0x03]), "1b 1200 10 48 5403"),
        // Error Response to Read By Group Type at 0x0018: Attribute Not Found.
        (.errorResponse(requestOpcode: 0x10, handle: 0x18, error: .attributeNotFound), "01 10 1800 0a"),
    ]

    @Test func goldenBytesBothWays() {
        for (pdu, hex) in Self.golden {
            #expect(WireChecks.golden(pdu, WireChecks.bytes(hex: hex)).isEmpty, "\(pdu)")
        }
    }

    /// A 128-bit UUID (as in a Find Information response, Format 2) is kept LSB first and
    /// still answers as its 16-bit value when built on the Base UUID.
    static let uuid128CCCD: [UInt8] = WireChecks.bytes(hex: "fb349b5f80000080 0010000002290000")

    @Test func uuid128OnTheBaseUUIDAnswersAs16Bit() throws {
        let pdu = ATTPDU.findInformationResponse([ATTHandleUUID(handle: 0x13, uuid: .uuid128(Self.uuid128CCCD))])
        #expect(WireChecks.golden(pdu, WireChecks.bytes(hex: "05 02 1300") + Self.uuid128CCCD).isEmpty)
        #expect(ATTUUID.uuid128(Self.uuid128CCCD).uuid16 == 0x2902)
        var other = Self.uuid128CCCD
        other[0] ^= 1
        #expect(ATTUUID.uuid128(other).uuid16 == nil)
        #expect(ATTUUID.uuid16(0x180D).description == "0x180D")
        #expect(ATTUUID.uuid128(Self.uuid128CCCD).description == "00002902000010008000" + "00805F9B34FB")
    }

    static let roundTrips: [ATTPDU] = golden.map { $0.0 } + [
        .readByTypeRequest(start: 1, end: 0xFFFF, type: .uuid128([UInt8](0..<16))),
        .readByGroupTypeResponse([ATTGroupValue(handle: 0x20, endGroupHandle: 0xFFFF, value: [UInt8](0..<16))]),
        .readByTypeResponse([ATTHandleValue(handle: 2, value: []), ATTHandleValue(handle: 3, value: [])]),
        .readResponse([]),
        .readResponse([UInt8](repeating: 0xAB, count: 512)),
        .handleValueNotification(handle: 0xFFFF, value: [UInt8](repeating: 1, count: 514)),
        .exchangeMTURequest(clientMTU: 0xFFFF),
        .errorResponse(requestOpcode: 0x12, handle: 0x13, error: ATTErrorCode(rawValue: 0x80)),
        .other(opcode: 0x1D, parameters: [0x12, 0x00, 0x06, 0x48]),
        .other(opcode: 0x52, parameters: []),
    ]

    @Test func roundTrip() {
        for pdu in Self.roundTrips {
            #expect(WireChecks.roundTrip(pdu).isEmpty, "\(pdu)")
        }
    }

    /// Every strict prefix throws, or (PDUs whose value runs to the end, lists of whole
    /// elements) parses as a *different*, shorter PDU that encodes back to exactly the prefix.
    /// It never parses as the original and never traps.
    @Test func everyTruncatedPrefixThrowsOrIsAShorterPDU() {
        for pdu in Self.roundTrips {
            let bytes = pdu.encoded()
            for n in 0..<bytes.count {
                let prefix = Array(bytes[0..<n])
                guard let parsed = try? ATTPDU(decoding: prefix) else { continue }
                #expect(parsed != pdu && parsed.encoded() == prefix, "\(pdu): prefix \(n) parsed as \(parsed)")
            }
        }
        // The fixed-size PDUs have no shorter form: every prefix throws.
        for (pdu, hex) in Self.golden {
            switch pdu {
            case .errorResponse, .exchangeMTURequest, .exchangeMTUResponse, .findInformationRequest,
                 .readRequest, .readByTypeRequest, .readByGroupTypeRequest:
                #expect(WireChecks.truncatedPrefixesThrow(WireChecks.bytes(hex: hex)) { _ = try ATTPDU(decoding: $0) }.isEmpty, "\(pdu)")
            default: break
            }
        }
    }

    @Test func badInputGivesAWireError() {
        let bad: [(String, String)] = [
            ("", "empty"),
            ("02 1600", "MTU 22 below the minimum"),
            ("10 0000 ffff 0028", "range starting at handle 0"),
            ("10 0200 0100 0028", "range ending before it starts"),
            ("10 0100 ffff 00", "1-byte UUID"),
            ("10 0100 ffff 002800", "3-byte UUID"),
            ("11 03 0100 0700", "group length below 4"),
            ("11 06 0100 0700 0018 1000", "group list not whole"),
            ("11 06", "empty group list"),
            ("09 01 0100", "Read By Type length below 2"),
            ("09 07 1100 10 1200 37", "Read By Type list not whole"),
            ("05 03 1300 0229", "Find Information format 3"),
            ("05 01 1300 02", "Find Information list not whole"),
            ("01 10 1800 0a 00", "trailing byte after an error response"),
            ("13 00", "trailing byte after a write response"),
        ]
        for (hex, what) in bad {
            #expect(throws: WireError.self, "\(what)") { _ = try ATTPDU(decoding: WireChecks.bytes(hex: hex)) }
        }
        // Oversized: one byte past the largest ATT_MTU.
        let big = [UInt8(0x1B), 0x12, 0x00] + [UInt8](repeating: 0, count: ATTPDU.maximumLength - 2)
        #expect(throws: WireError.tooLong(field: "ATT PDU", length: ATTPDU.maximumLength + 1, limit: ATTPDU.maximumLength)) {
            _ = try ATTPDU(decoding: big)
        }
        #expect((try? ATTPDU(decoding: Array(big.dropLast()))) != nil)
    }

    @Test func randomBuffersNeverCrash() {
        let seeds = Self.roundTrips.map { $0.encoded() }
        let parsed = WireChecks.randomBuffers(count: 30_000, seed: 16, maxLength: 600, mutating: seeds) {
            _ = try ATTPDU(decoding: $0)
        }
        #expect(parsed < 30_000)
    }

    @Test func characteristicDeclarationFourParts() {
        let decl = GATTCharacteristicDeclaration(properties: 0x10, valueHandle: 0x12, uuid: .uuid16(0x2A37))
        #expect(WireChecks.golden(decl, WireChecks.bytes(hex: "10 1200 372a")).isEmpty)
        #expect(WireChecks.roundTrip(GATTCharacteristicDeclaration(properties: 0x3A, valueHandle: 0xFFFF, uuid: .uuid128([UInt8](0..<16)))).isEmpty)
        #expect(WireChecks.truncatedPrefixesThrow(decl.encoded()) { _ = try GATTCharacteristicDeclaration(decoding: $0) }.isEmpty)
        #expect(throws: WireError.self) { _ = try GATTCharacteristicDeclaration(decoding: WireChecks.bytes(hex: "10 1200 372a00")) }
        let parsed = WireChecks.randomBuffers(count: 5_000, seed: 17, maxLength: 24, mutating: [decl.encoded()]) {
            _ = try GATTCharacteristicDeclaration(decoding: $0)
        }
        #expect(parsed < 5_000)
    }

    @Test func errorCodesNameThemselvesAndSaySecurity() {
        #expect(ATTErrorCode.attributeNotFound.description == "Attribute Not Found")
        #expect(ATTErrorCode(rawValue: 0x80).description == "ATT error 0x80")
        #expect(ATTErrorCode.insufficientEncryption.needsSecurity)
        #expect(!ATTErrorCode.requestNotSupported.needsSecurity)
        #expect(ATTPDU.isRequest(0x0A) && !ATTPDU.isRequest(0x1B) && !ATTPDU.isRequest(0x52))
    }
}
