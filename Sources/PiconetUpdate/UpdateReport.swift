import PiconetLoop
import PiconetSession
import PiconetWire

/// What a board tells the hubs it is connected to about an update, so `/api/nodes` and the live
/// page show each board's progress: one small frame (type 0x22) after each change, unreliable,
/// repeated as `UpdateReporter` says (a lost one is made good by the next).
///
/// Layout after the frame header (little-endian): `phase u8 | reserved u8 (0) | done u64 |
/// total u64 | version length u8 | version (UTF-8) | detail length u8 | detail (UTF-8)`.
/// `done`/`total` are the package's bytes verified so far and its size (`receiving`), else 0.
/// Strings are at most `maximumVersion` and `maximumDetail` bytes (longer ones are cut at a
/// character when made), so a report stays one small datagram on any path.
public struct UpdateReport: WireCodable, Equatable, Sendable {
    public static let maximumVersion = 32
    public static let maximumDetail = 120

    public enum Phase: UInt8, Sendable, CaseIterable {
        /// The package arrives (`done` of `total` bytes verified, resumable).
        case receiving = 1
        /// All of it arrived: signature, machine and version are checked.
        case verifying = 2
        /// `version` is written to a slot and on trial: the board restarts into it.
        case installed = 3
        /// `version` runs on trial and waits for a session to confirm it.
        case trial = 4
        /// `version` got its session back and is the board's good binary now.
        case confirmed = 5
        /// `version` did not come back healthy (`detail`: why); the previous binary runs.
        case rolledBack = 6
        /// The package was refused (`detail`: why); nothing was installed.
        case refused = 7

        /// The words `/api/nodes` and the live page show.
        public var word: String {
            switch self {
            case .receiving: return "receiving"
            case .verifying: return "verifying"
            case .installed: return "installed"
            case .trial: return "on trial"
            case .confirmed: return "confirmed"
            case .rolledBack: return "rolled back"
            case .refused: return "refused"
            }
        }

        /// Still under way (the board has more to say); the others are an update's end.
        public var isUnderWay: Bool { self == .receiving || self == .verifying || self == .installed || self == .trial }
    }

    public var phase: Phase
    public var done: UInt64
    public var total: UInt64
    public var version: String
    public var detail: String

    /// `done` is clamped to `total`; the strings are cut to their limits at a character boundary.
    public init(_ phase: Phase, done: UInt64 = 0, total: UInt64 = 0, version: String = "", detail: String = "") {
        self.phase = phase
        self.total = total
        self.done = min(done, total)
        self.version = Self.cut(version, to: Self.maximumVersion)
        self.detail = Self.cut(detail, to: Self.maximumDetail)
    }

    /// 0...100 while bytes are counted; nil when there is no total.
    public var percent: Int? { total == 0 ? nil : Int(done * 100 / total) }

    public init(parsing r: inout ByteReader) throws(WireError) {
        let p = try r.readUInt8()
        guard let phase = Phase(rawValue: p) else { throw .invalidValue(field: "update phase", reason: "\(p) is not 1...7") }
        let reserved = try r.readUInt8()
        guard reserved == 0 else { throw .invalidValue(field: "reserved", reason: "must be 0, got \(reserved)") }
        let done = try r.readUInt64(), total = try r.readUInt64()
        guard done <= total else { throw .invalidValue(field: "done", reason: "\(done) bytes done of \(total)") }
        self.phase = phase
        self.done = done
        self.total = total
        version = try Self.readText(&r, field: "version", limit: Self.maximumVersion)
        detail = try Self.readText(&r, field: "detail", limit: Self.maximumDetail)
    }

    public func encode(into w: inout ByteWriter) {
        w.writeUInt8(phase.rawValue)
        w.writeUInt8(0)
        w.writeUInt64(done)
        w.writeUInt64(total)
        w.writeUInt8(UInt8(version.utf8.count))
        w.writeBytes(version.utf8)
        w.writeUInt8(UInt8(detail.utf8.count))
        w.writeBytes(detail.utf8)
    }

    public var encodedLength: Int { 20 + version.utf8.count + detail.utf8.count }

    /// Header and payload, ready for the session.
    public func frameBytes() -> [UInt8] {
        var w = ByteWriter(capacity: FrameHeader.length + encodedLength)
        FrameHeader(type: .updateReport, payloadLength: UInt16(encodedLength)).encode(into: &w)
        encode(into: &w)
        return w.takeBytes()
    }

    /// Parses one whole frame; another frame type is an error (it is another layer's).
    public init(frameBytes bytes: [UInt8]) throws(WireError) {
        var r = ByteReader(bytes)
        let header = try FrameHeader(parsing: &r)
        guard header.type == .updateReport else {
            throw .invalidValue(field: "frame type", reason: "\(header.type) is not an update report (0x22)")
        }
        var body = try r.readSubReader(Int(header.payloadLength))
        try r.expectEnd()
        self = try UpdateReport(parsing: &body)
        try body.expectEnd()
    }

    static func readText(_ r: inout ByteReader, field: String, limit: Int) throws(WireError) -> String {
        let n = Int(try r.readUInt8())
        guard n <= limit else { throw .tooLong(field: field, length: n, limit: limit) }
        guard let s = String(validating: try r.readBytes(n), as: UTF8.self) else {
            throw .invalidValue(field: field, reason: "not UTF-8")
        }
        return s
    }

    static func cut(_ s: String, to limit: Int) -> String {
        if s.utf8.count <= limit { return s }
        var out = ""
        for c in s where out.utf8.count + c.utf8.count <= limit { out.append(c) }
        return out
    }
}

extension UpdateReport {
    /// A transfer's progress as a report: only while its bytes move. A transfer's last progress
    /// comes after its end (more of the stream is read), and must not undo what the end said.
    public static func progress(_ state: ResourceState, _ progress: ResourceProgress) -> UpdateReport? {
        guard state == .transferring else { return nil }
        return UpdateReport(.receiving, done: progress.verified, total: progress.total)
    }

    /// What a board that starts says about its last update, from its state file: a trial that
    /// this process runs, or the outcome `UpdateGuard` wrote and the sender has not yet been
    /// told (`healthy: V`, `rolled back from V: WHY`); nil when there is nothing to say.
    public init?(state: UpdateState, running: UpdateSlot) {
        if let trial = state.trial, trial == running {
            self.init(.trial, version: state.trialVersion)
            return
        }
        let healthy = "healthy: ", rolled = "rolled back from "
        if state.outcome.hasPrefix(healthy) {
            self.init(.confirmed, version: String(state.outcome.dropFirst(healthy.count)))
        } else if state.outcome.hasPrefix(rolled) {
            let rest = state.outcome.dropFirst(rolled.count)
            guard let colon = rest.firstIndex(of: ":") else { return nil }
            self.init(.rolledBack, version: String(rest[..<colon]), detail: String(rest[rest.index(after: colon)...].drop { $0 == " " }))
        } else {
            return nil
        }
    }
}

/// When a board sends its `UpdateReport` (pure; the node carries it out): at once when the
/// phase changes, at most once per `progressInterval` while it receives, to a hub as it
/// connects, and again with each summary (no timer of its own: an idle node is not woken)
/// while the update is under way and for `repeats` summaries after it ended.
public struct UpdateReporter: Sendable {
    public static let progressInterval: Duration = .seconds(1)
    public static let repeats = 3

    /// The latest report (sent or not yet); nil: nothing to tell.
    public private(set) var current: UpdateReport?
    private var lastSent: Instant?
    private var repeatsLeft = 0

    public init(current: UpdateReport? = nil) {
        self.current = current
        repeatsLeft = current == nil ? 0 : Self.repeats
    }

    /// The board's update moved on: the report to send to every hub now, or nil when it is
    /// progress within `progressInterval` of the last one sent (kept for the next send).
    public mutating func changed(_ report: UpdateReport, at now: Instant) -> UpdateReport? {
        defer { current = report }
        if let c = current, c.phase == report.phase, c.version == report.version, c.detail == report.detail {
            if c == report { return nil }
            // The last bytes of a transfer go out at once: "100 %" is not held back a second.
            if let t = lastSent, now - t < Self.progressInterval, report.done < report.total { return nil }
        }
        lastSent = now
        repeatsLeft = Self.repeats
        return report
    }

    /// A hub connected: what to send it.
    public mutating func hubConnected() -> UpdateReport? {
        guard let current else { return nil }
        repeatsLeft = max(repeatsLeft, Self.repeats)
        return current
    }

    /// The node's summary tick: the report to send to every hub with it, or nil.
    public mutating func summaryTick(at now: Instant) -> UpdateReport? {
        guard let current else { return nil }
        if !current.phase.isUnderWay {
            guard repeatsLeft > 0 else { return nil }
            repeatsLeft -= 1
        }
        lastSent = now
        return current
    }
}
