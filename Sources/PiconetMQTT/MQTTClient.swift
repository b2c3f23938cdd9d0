import CMosquitto
import PiconetLoop
import PiconetPosix

// PiconetMQTT — the hub's MQTT edge (OS edge, hub only: the node never links libmosquitto).
//
//   piconet-hub (FleetExporter: outbox → client)
//        |
//   PiconetMQTT (this module) → libmosquitto (CMosquitto), driven by PiconetPosix's EpollLoop
//
// libmosquitto is used without its thread (no mosquitto_loop_start): its socket is registered
// with the hub's epoll loop, readable → mosquitto_loop_read, writable (while it wants to
// write) → mosquitto_loop_write, and a timer calls mosquitto_loop_misc for keep-alive pings.
// Its callbacks therefore run on the loop thread, inside those calls; they are queued and
// handed to `onEvent` after the call returns, so a handler may publish without re-entering
// the library from its own callback.

/// Where and how to reach the broker: from `--mqtt mqtt[s]://host[:port]` and the TLS/login flags.
public struct MQTTEndpoint: Equatable, Sendable, CustomStringConvertible {
    public var host: String
    public var port: Int
    /// TLS (`mqtts://`): CA file that signs the broker's certificate; optional client certificate and key.
    public var tls: TLS?
    public var username: String?
    public var password: String?
    public var keepAliveSeconds: Int = 30

    public struct TLS: Equatable, Sendable {
        public var caFile: String
        public var certFile: String?
        public var keyFile: String?
        public init(caFile: String, certFile: String? = nil, keyFile: String? = nil) {
            self.caFile = caFile
            self.certFile = certFile
            self.keyFile = keyFile
        }
    }

    public init(host: String, port: Int, tls: TLS? = nil) {
        self.host = host
        self.port = port
        self.tls = tls
    }

    /// Parses `mqtt://host[:port]` (default 1883) or `mqtts://host[:port]` (default 8883; needs `caFile`).
    /// A bracketed IPv6 host (`mqtt://[::1]:1883`) is accepted.
    public static func parse(_ url: String, caFile: String?) -> Result<MQTTEndpoint, MQTTURLError> {
        let secure: Bool
        let rest: Substring
        if url.hasPrefix("mqtt://") { secure = false; rest = url.dropFirst(7) }
        else if url.hasPrefix("mqtts://") { secure = true; rest = url.dropFirst(8) }
        else { return .failure(MQTTURLError(text: url, why: "must start with mqtt:// or mqtts://")) }
        var hostPart = rest
        if let slash = hostPart.firstIndex(of: "/") {
            guard hostPart[slash...] == "/" else { return .failure(MQTTURLError(text: url, why: "has a path; give only host and port")) }
            hostPart = hostPart[..<slash]
        }
        var host = String(hostPart)
        var port = secure ? 8883 : 1883
        if hostPart.hasPrefix("[") {
            guard let close = hostPart.firstIndex(of: "]") else { return .failure(MQTTURLError(text: url, why: "has '[' without ']'")) }
            host = String(hostPart[hostPart.index(after: hostPart.startIndex)..<close])
            let after = hostPart[hostPart.index(after: close)...]
            if !after.isEmpty {
                guard after.hasPrefix(":"), let p = Int(after.dropFirst()), (1...65535).contains(p) else {
                    return .failure(MQTTURLError(text: url, why: "has a port that is not 1-65535"))
                }
                port = p
            }
        } else if let colon = hostPart.lastIndex(of: ":") {
            guard let p = Int(hostPart[hostPart.index(after: colon)...]), (1...65535).contains(p) else {
                return .failure(MQTTURLError(text: url, why: "has a port that is not 1-65535"))
            }
            port = p
            host = String(hostPart[..<colon])
        }
        guard !host.isEmpty else { return .failure(MQTTURLError(text: url, why: "has no host")) }
        var endpoint = MQTTEndpoint(host: host, port: port)
        if secure {
            guard let caFile else { return .failure(MQTTURLError(text: url, why: "is mqtts:// and needs --mqtt-ca FILE")) }
            endpoint.tls = TLS(caFile: caFile)
        } else if caFile != nil {
            return .failure(MQTTURLError(text: url, why: "is plain mqtt://, so --mqtt-ca would be ignored; use mqtts://"))
        }
        return .success(endpoint)
    }

    public var description: String { "\(tls == nil ? "mqtt" : "mqtts")://\(host.contains(":") ? "[\(host)]" : host):\(port)" }
}

/// A broker URL that cannot be used, and why.
public struct MQTTURLError: Error, Equatable, Sendable, CustomStringConvertible {
    public var text: String
    public var why: String
    public var description: String { "--mqtt '\(text)' \(why) (e.g. mqtt://127.0.0.1:1883)" }
}

/// The retained message the broker publishes for us if we vanish (MQTT Last Will), and its
/// counterpart that we publish ourselves once connected.
public struct MQTTStatusTopic: Equatable, Sendable {
    public var topic: String
    public var online: String
    public var offline: String
    public init(topic: String, online: String = "online", offline: String = "offline") {
        self.topic = topic
        self.online = online
        self.offline = offline
    }
}

/// What the client reports to its owner, on the loop thread.
public enum MQTTClientEvent: Equatable, Sendable {
    /// CONNACK accepted; the status topic now says online. Unacknowledged messages are the
    /// owner's to send again (each connection starts clean).
    case connected
    /// The connection failed or was lost (or the broker refused it); a retry is scheduled after `retryIn`.
    case disconnected(reason: String, retryIn: Duration)
    /// The broker acknowledged (PUBACK) the QoS 1 message with this id.
    case acknowledged(messageID: Int32)
    /// A message on a subscribed topic.
    case message(topic: String, payload: [UInt8])
}

/// An MQTT 3.1.1 client on the hub's epoll loop (libmosquitto without its thread).
///
/// - QoS 1 for everything the owner publishes; `publish` returns the message id whose
///   `.acknowledged` event means the broker has it.
/// - Last Will on `status.topic` = offline (retained), and online (retained) published on each CONNACK.
/// - Reconnects by itself with back-off (0.5 s doubling to `maximumBackOff`); every attempt
///   uses a fresh libmosquitto instance, so nothing the library queued on a dead connection is
///   sent again behind the owner's back: the owner (the outbox) decides what to resend, in order.
/// - `inFlightLimit` bounds the library's own queue: the owner keeps at most that many
///   unacknowledged messages (libmosquitto's max in-flight is set to the same).
///
/// Loop-bound: not `Sendable`. Close it before dropping it.
public final class MQTTClient {
    public let endpoint: MQTTEndpoint
    public let clientID: String
    public let status: MQTTStatusTopic
    public let maximumBackOff: Duration
    public let inFlightLimit: Int
    public var onEvent: ((MQTTClientEvent) -> Void)?
    public private(set) var isConnected = false
    /// Connection attempts and losses, for the hub's stats.
    public private(set) var connects = 0
    public private(set) var disconnects = 0
    /// Attempts that ended before the broker accepted us (unreachable, TLS refused, login refused):
    /// with the back-off they grow by about one per `maximumBackOff`, never faster.
    public private(set) var connectFailures = 0
    public private(set) var lastError: String?

    private let loop: EpollLoop
    private var mosq: OpaquePointer?
    private var registration: Registration?
    private var miscTimer: RepeatingTimer?
    private var retryTimer: TimerID?
    private var backOff: Duration = .milliseconds(500)
    private var pending: [MQTTClientEvent] = []
    private var subscriptions: [String] = []
    /// The status message's id on this connection: its PUBACK is ours, not the owner's.
    private var ownMessageIDs: Set<Int32> = []
    private var closed = false
    /// The library's last error-level log line on this attempt (OpenSSL's reason for a TLS
    /// failure is only said there): appended to the reason the attempt failed with.
    private var libraryError: String?
    /// How long the broker's host name may take to look up; past it the attempt fails and backs off.
    public var lookupLimit: Duration = .seconds(5)
    private var lookup: NameLookup?
    /// Which of the looked-up addresses the next plain attempt uses (it moves on after a failure).
    private var addressIndex = 0
    private lazy var handle = OwnerHandle(self)

    private static let libraryReady: Bool = { mosquitto_lib_init() == 0 }()

    public init(loop: EpollLoop, endpoint: MQTTEndpoint, clientID: String, status: MQTTStatusTopic,
                maximumBackOff: Duration = .seconds(5), inFlightLimit: Int = 64) {
        self.loop = loop
        self.endpoint = endpoint
        self.clientID = clientID
        self.status = status
        self.maximumBackOff = maximumBackOff
        self.inFlightLimit = max(1, min(inFlightLimit, 65_535))
        _ = Self.libraryReady
    }

    deinit {
        handle.sever()
        if let mosq { mosquitto_destroy(mosq) }
    }

    /// Starts connecting (and keeps reconnecting until `close`).
    public func start() {
        guard !closed else { return }
        attempt()
    }

    /// Subscribes (QoS 1) on every connection from now on.
    public func subscribe(_ topic: String) {
        subscriptions.append(topic)
        if isConnected, let mosq { _ = mosquitto_subscribe(mosq, nil, topic, 1) }
        afterCall()
    }

    /// Publishes at QoS 1; returns the message id, or nil when not connected (or the library
    /// refused it: the reason is in `lastError`).
    public func publish(topic: String, payload: [UInt8], retain: Bool) -> Int32? {
        guard isConnected, let mosq else { return nil }
        var mid: Int32 = 0
        let rc = payload.withUnsafeBytes { raw in
            mosquitto_publish(mosq, &mid, topic, Int32(raw.count), raw.baseAddress, 1, retain)
        }
        if rc != MOSQ_ERR_SUCCESS.rawValue {
            lastError = "publish on \(topic): \(Self.text(rc))"
            if rc == MOSQ_ERR_NO_CONN.rawValue || rc == MOSQ_ERR_CONN_LOST.rawValue { lost(Self.text(rc)) }
            return nil
        }
        afterCall()
        return mid
    }

    /// Says offline (retained) if connected, disconnects cleanly and stops retrying.
    public func close() {
        guard !closed else { return }
        closed = true
        if let retryTimer { loop.cancel(retryTimer) }
        retryTimer = nil
        lookup?.cancel()
        if isConnected, let mosq {
            let bytes = Array(status.offline.utf8)
            _ = bytes.withUnsafeBytes { mosquitto_publish(mosq, nil, status.topic, Int32($0.count), $0.baseAddress, 1, true) }
            // Best effort: the DISCONNECT follows the status message on the socket.
            _ = mosquitto_disconnect(mosq)
            _ = mosquitto_loop_write(mosq, 1)
        }
        tearDown()
        pending.removeAll()
    }

    // MARK: connection

    /// A connection attempt starts with the broker's address: libmosquitto would look a name up
    /// itself, blocking the loop for as long as DNS takes, so a name is looked up first off the
    /// loop within `lookupLimit` (`NameLookup`); at most one lookup runs at a time.
    private func attempt() {
        retryTimer = nil
        guard !closed else { return }
        tearDown()
        connects += 1
        if NameLookup.isNumeric(endpoint.host) { open(endpoint.host); return }
        if let lookup, lookup.inFlight {
            scheduleRetry("cannot connect to \(endpoint): the lookup of \(endpoint.host) has not ended yet")
            return
        }
        lookup = NameLookup(endpoint.host, on: loop, limit: lookupLimit) { [handle] result in
            guard let self = handle.owner, !self.closed else { return }
            switch result {
            case let .success(addresses):
                // TLS checks the broker's certificate against the name libmosquitto is given, so
                // it gets the name (its own lookup of a name just answered is normally quick: see
                // README); plain MQTT gets an address, and libmosquitto looks nothing up.
                self.open(self.endpoint.tls == nil ? addresses[self.addressIndex % addresses.count] : self.endpoint.host)
            case let .failure(e):
                self.scheduleRetry("cannot connect to \(self.endpoint): \(e)")
            }
        }
    }

    /// Creates the libmosquitto instance and starts its non-blocking connect to `host` (an address,
    /// or the name for TLS).
    private func open(_ host: String) {
        guard let m = mosquitto_new(clientID, true, Unmanaged.passUnretained(self).toOpaque()) else {
            scheduleRetry("mosquitto_new failed (out of memory)")
            return
        }
        mosq = m
        _ = mosquitto_int_option(m, MOSQ_OPT_PROTOCOL_VERSION, Int32(MQTT_PROTOCOL_V311))
        _ = mosquitto_max_inflight_messages_set(m, UInt32(inFlightLimit))
        mosquitto_connect_callback_set(m) { _, obj, rc in MQTTClient.from(obj)?.connected(rc) }
        mosquitto_disconnect_callback_set(m) { _, obj, rc in MQTTClient.from(obj)?.pending.append(.disconnected(reason: "broker closed (\(rc))", retryIn: .zero)) }
        libraryError = nil
        mosquitto_log_callback_set(m) { _, obj, level, text in
            guard level == MOSQ_LOG_ERR, let text, let client = MQTTClient.from(obj) else { return }
            let line = MQTTClient.libraryLogLine(String(cString: text))
            if !line.isEmpty { client.libraryError = line }
        }
        mosquitto_publish_callback_set(m) { _, obj, mid in MQTTClient.from(obj)?.pending.append(.acknowledged(messageID: mid)) }
        mosquitto_message_callback_set(m) { _, obj, message in
            guard let client = MQTTClient.from(obj), let message else { return }
            let topic = String(cString: message.pointee.topic)
            let count = Int(max(0, message.pointee.payloadlen))
            let payload: [UInt8] = count == 0 || message.pointee.payload == nil ? [] :
                Array(UnsafeRawBufferPointer(start: message.pointee.payload, count: count))
            client.pending.append(.message(topic: topic, payload: payload))
        }
        let offline = Array(status.offline.utf8)
        var rc = offline.withUnsafeBytes { mosquitto_will_set(m, status.topic, Int32($0.count), $0.baseAddress, 1, true) }
        if rc == MOSQ_ERR_SUCCESS.rawValue, let user = endpoint.username {
            rc = mosquitto_username_pw_set(m, user, endpoint.password)
        }
        if rc == MOSQ_ERR_SUCCESS.rawValue, let tls = endpoint.tls {
            rc = mosquitto_tls_set(m, tls.caFile, nil, tls.certFile, tls.keyFile, nil)
        }
        if rc != MOSQ_ERR_SUCCESS.rawValue {
            scheduleRetry("cannot set up the connection: \(Self.text(rc))")
            return
        }
        // Non-blocking TCP connect.
        rc = mosquitto_connect_async(m, host, Int32(endpoint.port), Int32(endpoint.keepAliveSeconds))
        let fd = mosquitto_socket(m)
        guard rc == MOSQ_ERR_SUCCESS.rawValue || rc == MOSQ_ERR_CONN_PENDING.rawValue, fd >= 0 else {
            scheduleRetry("cannot connect to \(endpoint): \(Self.text(rc))")
            return
        }
        do {
            // Writable is watched until the CONNECT has gone out (a pending TCP connect completes as writable).
            registration = try loop.register(FileDescriptor(rawValue: fd), interest: [.read, .write]) { [handle] events in
                handle.owner?.ready(events)
            }
        } catch {
            scheduleRetry("cannot watch the MQTT socket: \(error)")
            return
        }
        miscTimer = loop.scheduleRepeating(every: .seconds(1)) { [handle] in
            guard let self = handle.owner, let mosq = self.mosq else { return }
            let rc = mosquitto_loop_misc(mosq)
            if rc != MOSQ_ERR_SUCCESS.rawValue { self.lost(Self.text(rc)) } else { self.afterCall() }
        }
    }

    private func ready(_ events: Events) {
        guard let mosq else { return }
        if events.contains(.writable) || events.contains(.error) {
            let rc = mosquitto_loop_write(mosq, 1)
            if rc != MOSQ_ERR_SUCCESS.rawValue { lost(Self.text(rc)); return }
        }
        if events.contains(.readable) || events.contains(.hangup) || events.contains(.error) {
            let rc = mosquitto_loop_read(mosq, 1)
            if rc != MOSQ_ERR_SUCCESS.rawValue { lost(Self.text(rc)); return }
        }
        afterCall()
    }

    /// Runs inside libmosquitto's read: CONNACK.
    private func connected(_ rc: Int32) {
        guard rc == 0 else {
            var why = String(cString: mosquitto_connack_string(rc))
            if why.hasSuffix(".") { why.removeLast() }
            pending.append(.disconnected(reason: "broker refused the connection: \(why)", retryIn: .zero))
            return
        }
        isConnected = true
        backOff = .milliseconds(500)
        lastError = nil
        if let mosq {
            let online = Array(status.online.utf8)
            var mid: Int32 = 0
            _ = online.withUnsafeBytes { mosquitto_publish(mosq, &mid, status.topic, Int32($0.count), $0.baseAddress, 1, true) }
            ownMessageIDs = [mid]
            for topic in subscriptions { _ = mosquitto_subscribe(mosq, nil, topic, 1) }
        }
        pending.append(.connected)
    }

    /// After every call into the library: watch writability only while it has bytes queued,
    /// turn a refusal/close reported by a callback into a retry, and hand the queued events over.
    private func afterCall() {
        if let mosq, let registration {
            let want: Interest = mosquitto_want_write(mosq) || !isConnected ? [.read, .write] : [.read]
            do { try loop.modify(registration, interest: want) } catch { lost("cannot watch the MQTT socket: \(error)"); return }
        }
        deliver()
    }

    private func deliver() {
        while !pending.isEmpty {
            let events = pending
            pending.removeAll()
            for event in events {
                if case let .disconnected(reason, _) = event, mosq != nil {
                    // From a callback (refused CONNACK, broker DISCONNECT): tear down and retry.
                    lost(reason)
                    continue
                }
                if case let .acknowledged(mid) = event, !isConnected || ownMessageIDs.remove(mid) != nil { continue }
                onEvent?(event)
            }
        }
    }

    private func lost(_ reason: String) {
        let wasConnected = isConnected
        tearDown()
        if wasConnected { disconnects += 1 }
        scheduleRetry(wasConnected || reason.hasPrefix("broker refused") ? reason : "cannot connect to \(endpoint): \(reason)",
                      failedAttempt: !wasConnected)
    }

    private func scheduleRetry(_ given: String, failedAttempt: Bool = true) {
        tearDown()
        if failedAttempt {
            connectFailures += 1
            addressIndex &+= 1
        }
        var reason = given
        if let detail = libraryError, !reason.contains(detail) { reason += " (\(detail))" }
        // A broker that wants a client certificate ends the handshake with an alert that often
        // arrives as a bare reset instead (during the connect or after it): say what may be missing.
        if failedAttempt, let tls = endpoint.tls, tls.certFile == nil, !reason.contains("look up"), !reason.contains("certificate") {
            reason += "; if the broker requires a client certificate, give --mqtt-cert and --mqtt-key"
        }
        libraryError = nil
        lastError = reason
        guard !closed else { return }
        let delay = backOff
        backOff = min(backOff * 2, maximumBackOff)
        if let retryTimer { loop.cancel(retryTimer) }
        retryTimer = loop.schedule(after: delay) { [handle] in handle.owner?.attempt() }
        // Whatever the dead connection's callbacks queued (acks, its own close notice) is moot:
        // the owner resends everything unacknowledged on the next connection.
        pending.removeAll()
        onEvent?(.disconnected(reason: reason, retryIn: delay))
    }

    private func tearDown() {
        isConnected = false
        miscTimer?.cancel()
        miscTimer = nil
        if let registration {
            // libmosquitto closes its socket itself when a read or write fails (and after a
            // DISCONNECT): then the close already took it out of epoll.
            if let mosq, mosquitto_socket(mosq) >= 0 { loop.deregister(registration) } else { loop.forget(registration) }
        }
        registration = nil
        if let mosq { mosquitto_destroy(mosq) }   // closes the socket
        mosq = nil
    }

    private static func from(_ obj: UnsafeMutableRawPointer?) -> MQTTClient? {
        guard let obj else { return nil }
        return Unmanaged<MQTTClient>.fromOpaque(obj).takeUnretainedValue()
    }

    /// OpenSSL's error as libmosquitto logs it (`OpenSSL Error[0]: error:0A000086:SSL routines::certificate
    /// verify failed`), cut to its reason (`certificate verify failed`) and to one line.
    static func libraryLogLine(_ line: String) -> String {
        var text = Substring(line)
        if text.hasPrefix("OpenSSL Error"), let colon = text.firstIndex(of: ":") { text = text[text.index(after: colon)...] }
        if let r = text.ranges(of: "::").last { text = text[r.upperBound...] }
        let one = text.split(whereSeparator: { $0 == "\n" || $0 == "\r" }).joined(separator: " ")
        return String(one.trimmingPrefix(" ").prefix(200))
    }

    static func text(_ rc: Int32) -> String {
        // errno is not ours to read here (PiconetPosix owns libc); the usual causes instead.
        if rc == MOSQ_ERR_ERRNO.rawValue { return "refused, unreachable or reset (a system error)" }
        var text = String(cString: mosquitto_strerror(rc))
        if text.hasSuffix(".") { text.removeLast() }   // it goes inside our own sentences
        return text
    }
}
