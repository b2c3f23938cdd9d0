import PiconetDiscovery
import Testing

/// The static service file Avahi advertises a stopped node from.
@Suite struct AvahiServiceFileTests {
    @Test func theFileNamesTheInstanceTypePortAndEveryTXTString() throws {
        let info = try DiscoveryInfo([("v", "1"), ("id", "00112233445566778899aabbccddeeff"), ("flag", nil)])
        let text = String(decoding: AvahiServiceFile.render(name: try InstanceName("bench-11"), type: try ServiceType("hr-sensor"), port: 7000, info: info),
                          as: UTF8.self)
        let lines = text.split(separator: "\n").map { $0.trimmingPrefix(while: { $0 == " " }) }.map(String.init)
        #expect(lines.first == "<?xml version=\"1.0\" standalone='no'?>")
        #expect(lines.contains("<name replace-wildcards=\"no\">bench-11</name>"))
        #expect(lines.contains("<service protocol=\"ipv4\">"))
        #expect(lines.contains("<type>_hr-sensor._udp</type>"))
        #expect(lines.contains("<port>7000</port>"))
        #expect(lines.filter { $0.hasPrefix("<txt-record>") } == [
            "<txt-record>v=1</txt-record>", "<txt-record>id=00112233445566778899aabbccddeeff</txt-record>", "<txt-record>flag</txt-record>",
        ])
        #expect(lines.last == "</service-group>")
        // XML allows no "--" inside a comment; Avahi's parser refused the whole file over one.
        for line in lines where line.hasPrefix("<!--") {
            #expect(line.hasSuffix("-->") && !line.dropFirst(4).dropLast(3).contains("--"), "a well-formed comment: \(line)")
        }
    }

    @Test func markupInANameOrValueStaysText() throws {
        let info = try DiscoveryInfo([("board", "</txt-record><service>")])
        let text = String(decoding: AvahiServiceFile.render(name: try InstanceName("a<b & \"c\" 'd' é"), type: try ServiceType("hr-sensor"),
                                                            port: 1, info: info), as: UTF8.self)
        #expect(text.contains("<name replace-wildcards=\"no\">a&lt;b &amp; &quot;c&quot; &apos;d&apos; é</name>"))
        #expect(text.contains("<txt-record>board=&lt;/txt-record&gt;&lt;service&gt;</txt-record>"))
        // One service element, one name: nothing the strings said became markup.
        #expect(text.split(separator: "\n").filter { $0.contains("<service ") || $0.contains("<service>") }.count == 1)
        #expect(text.split(separator: "\n").filter { $0.contains("<txt-record>") }.count == 1)
        var out: [UInt8] = []
        AvahiServiceFile.appendEscaped(&out, Array("x\u{7}y\u{7F}z\u{1B}".utf8))
        #expect(out == Array("xyz".utf8))
    }
}
