/// An Avahi static service file (`/etc/avahi/services/NAME.service`, avahi.service(5)) holding
/// one service: what a node that is not running (started on demand by systemd) leaves the
/// board's Avahi daemon to advertise for it, the same instance, type, port and TXT it would
/// answer with itself.
///
/// Every string from configuration or the network is escaped as XML text, so a name such as
/// `a<b & "c"` stays that name and cannot add elements. Built as bytes: the node (Embedded
/// Swift) writes them as they are.
public enum AvahiServiceFile {
    /// The file: the instance name as is (no `%h` wildcard), IPv4 only (the node's session
    /// socket), the TXT strings in order, each `key=value` or a bare `key`. (No "--" in the
    /// comment: XML forbids it there, and Avahi then ignores the whole file.)
    public static func render(name: InstanceName, type: ServiceType, port: UInt16, info: DiscoveryInfo) -> [UInt8] {
        var out = Array("""
            <?xml version="1.0" standalone='no'?>
            <!DOCTYPE service-group SYSTEM "avahi-service.dtd">
            <!-- Written by piconet-node (its avahi-service option): Avahi advertises the node while it is not running. -->
            <service-group>
              <name replace-wildcards="no">
            """.utf8)
        appendEscaped(&out, Array(name.value.utf8))
        out += Array("</name>\n  <service protocol=\"ipv4\">\n    <type>_".utf8)
        out += Array(type.name.utf8)
        out += Array((type.transport == .udp ? "._udp" : "._tcp").utf8)
        out += Array("</type>\n    <port>".utf8)
        out += Array(String(port).utf8)
        out += Array("</port>\n".utf8)
        for entry in info.entries {
            out += Array("    <txt-record>".utf8)
            var text = Array(entry.key.utf8)
            if let value = entry.value { text += [UInt8(ascii: "=")] + value }
            appendEscaped(&out, text)
            out += Array("</txt-record>\n".utf8)
        }
        out += Array("  </service>\n</service-group>\n".utf8)
        return out
    }

    /// `text` (UTF-8) as XML character data or attribute text: the five markup characters as
    /// entities, and control characters (which XML 1.0 does not allow, bar tab and newline)
    /// left out. Bytes of multi-byte characters are never below 0x80, so they pass as they are.
    public static func appendEscaped(_ out: inout [UInt8], _ text: [UInt8]) {
        for b in text {
            switch b {
            case UInt8(ascii: "&"): out += Array("&amp;".utf8)
            case UInt8(ascii: "<"): out += Array("&lt;".utf8)
            case UInt8(ascii: ">"): out += Array("&gt;".utf8)
            case UInt8(ascii: "\""): out += Array("&quot;".utf8)
            case UInt8(ascii: "'"): out += Array("&apos;".utf8)
            case 0..<0x20, 0x7F: continue
            default: out.append(b)
            }
        }
    }
}
