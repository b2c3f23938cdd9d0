import PiconetTestSupport
import PiconetWire
import Testing

@testable import PiconetSession

/// Inputs the fuzz targets (scripts/fuzz) found, kept as they came: each failed once.
@Suite struct SessionFuzzRegressionTests {
    /// session-packet: a display name of invalid UTF-8 grew on repair (U+FFFD is 3 bytes) past
    /// 63 bytes, so the payload sent on read back as another name.
    @Test func aHandshakeNameOfInvalidUTF8ReadsBackTheSame() throws {
        let input = WireChecks.bytes(hex: "017d6eff4930006e742f067777ff777777777777777777777777ffffffff536574777777777777777780ffffff7777777777777773752b3f03")
        let payload = try HandshakePayload(decoding: input)
        #expect(payload.displayName.utf8.count <= HandshakePayload.maxNameLength)
        #expect(try HandshakePayload(decoding: payload.encoded()) == payload)
    }

    /// encode cut a long name inside a multi-byte character, sending invalid UTF-8.
    @Test func aLongNameIsCutAtACharacterBoundary() throws {
        let name = String(repeating: "é", count: 40)   // 80 bytes
        let payload = HandshakePayload(preference: .required, instance: 1, displayName: name)
        let back = try HandshakePayload(decoding: payload.encoded())
        #expect(back.displayName == String(repeating: "é", count: 31))
        #expect(back.encodedLength == payload.encodedLength)
    }
}

@Suite struct SessionFuzzRegressionCloseTests {
    /// session-packet (in the clean-clone CI run): a close text of invalid UTF-8 grew past
    /// 128 bytes on repair and read back shorter after it was sent on.
    @Test func aCloseTextOfInvalidUTF8ReadsBackTheSame() throws {
        let input = WireChecks.bytes(hex: "015d01f7f7f7f7f7f7f7f7f7f7f7f7f7f7f7f7f7f7f7f7f7f7f7f7f7f7f7f7f7f7f7f7f7f7f7f7f7f7f7f7f7f7f7f7f7f7f7f7f7f7f7f7f7f7f7f7f7f7f7f7f7f7ff00005bfffc0000f7f7f7f7f7f7f7f7f7f7f7f7f7f7f7f7f7f7f7f7f7f7")
        let close = try CloseFrame(decoding: input)
        #expect(close.text.utf8.count <= CloseFrame.maxTextLength)
        #expect(try CloseFrame(decoding: close.encoded()) == close)
    }
}
