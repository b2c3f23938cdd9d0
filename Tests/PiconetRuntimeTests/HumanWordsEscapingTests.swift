import PiconetDiscovery
import PiconetLoop
import PiconetRuntime
import PiconetSession
import PiconetWire
import Testing

/// The lines `piconet browse` and `piconet listen` print: names, TXT values and message text
/// come from whoever sends them, so none may reach the terminal raw.
@Suite struct HumanWordsEscapingTests {
    /// A record whose name, host and TXT value carry a screen clear, a cursor move, a bidi
    /// override and a Unicode line separator.
    static func hostileService() throws -> DiscoveredService {
        DiscoveredService(name: "node\u{1B}[2J\u{202E}A", service: try ServiceType("hr-sensor"),
                          info: try DiscoveryInfo([("bpm", "72\r\u{2028}fake: found \"hub\"")]),
                          host: "pi\u{9B}1m.local.", port: 5000, addresses: [])
    }

    static func hasRawControl(_ line: String) -> Bool {
        line.unicodeScalars.contains { !TerminalText.isPlain(String($0)) && $0 != "\\" }
    }

    @Test func browseLinesEscapeNameHostAndDiscoveryInfo() throws {
        let line = HumanWords.discovery(.found(try Self.hostileService()))
        #expect(!Self.hasRawControl(line), "raw control characters in: \(line.debugDescription)")
        #expect(line == "found \"node\\e[2J\\u{202e}A\" hr-sensor host pi\\x9b1m.local. port 5000 addresses  info bpm=72\\r\\u{2028}fake: found \"hub\"")
    }

    @Test func peerLinesEscapeTheName() throws {
        let s = try Self.hostileService()
        let line = HumanWords.peer(.found(DiscoveredPeer(service: s.service, wifi: s)))
        #expect(!Self.hasRawControl(line), "raw control characters in: \(line.debugDescription)")
        #expect(line.hasPrefix("found \"node\\e[2J\\u{202e}A\" hr-sensor via wifi"))
    }

    @Test func listenMessageLinesEscapeTheText() {
        let peer = PeerID(publicKey: Array(repeating: 7, count: 32))
        let line = HumanWords.message(Array("hi\u{1B}]0;pwned\u{07}\u{2029}x".utf8), from: peer)
        #expect(line == "\(peer) hi\\e]0;pwned\\x07\\u{2029}x")
        #expect(HumanWords.message(Array("plain text".utf8), from: peer) == "\(peer) plain text")
    }
}
