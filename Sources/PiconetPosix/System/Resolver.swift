import CPiconetPosix

extension Sys {
    /// The numeric addresses (IPv4 and IPv6, without repeats, in the resolver's order) of `host`,
    /// or the resolver's reason. Blocks as long as the system resolver does (DNS timeouts and
    /// retries: up to tens of seconds): never call it on the loop thread.
    /// The corresponding C functions are `getaddrinfo` and `getnameinfo(NI_NUMERICHOST)`.
    static func lookUp(_ host: String) -> Result<[String], NameLookupError> {
        var hints = addrinfo()
        hints.ai_family = AF_UNSPEC
        hints.ai_socktype = piconet_sock_stream
        var list: UnsafeMutablePointer<addrinfo>?
        let rc = getaddrinfo(host, nil, &hints, &list)
        guard rc == 0 else { return .failure(NameLookupError(host: host, reason: String(cString: gai_strerror(rc)))) }
        defer { freeaddrinfo(list) }
        var out: [String] = []
        var next = list
        while let ai = next {
            var text = [CChar](repeating: 0, count: 64)
            if getnameinfo(ai.pointee.ai_addr, ai.pointee.ai_addrlen, &text, socklen_t(text.count), nil, 0, NI_NUMERICHOST) == 0 {
                let address = text.withUnsafeBufferPointer { String(cString: $0.baseAddress!) }
                if !out.contains(address) { out.append(address) }
            }
            next = ai.pointee.ai_next
        }
        return out.isEmpty ? .failure(NameLookupError(host: host, reason: "no address")) : .success(out)
    }

    /// Whether `host` is an IPv4 or IPv6 address in numeric form (nothing to look up).
    /// The corresponding C function is `inet_pton`.
    static func isNumericAddress(_ host: String) -> Bool {
        var buffer = [UInt8](repeating: 0, count: 16)
        return inet_pton(AF_INET, host, &buffer) == 1 || inet_pton(AF_INET6, host, &buffer) == 1
    }
}
