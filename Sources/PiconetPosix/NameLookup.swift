import CPiconetPosix
import PiconetLoop

/// A host name that could not be looked up, and why (the resolver's words, or the time limit).
public struct NameLookupError: Error, Equatable, Sendable, CustomStringConvertible {
    public var host: String
    public var reason: String
    public init(host: String, reason: String) {
        self.host = host
        self.reason = reason
    }
    public var description: String { "cannot look up \(host): \(reason)" }
}

/// Looks a host name up without blocking the loop, within a time limit.
///
/// The system resolver (`getaddrinfo`: /etc/hosts, DNS) only blocks, for as long as its
/// timeouts and retries take (5 s per server and attempt by default), and a library that
/// connects by name (libmosquitto) would block the whole hub loop that long. So the lookup
/// runs on a thread of its own, and its answer comes back to the loop through `execute`
/// (the loop's eventfd): nothing polls. When `limit` passes first, `done` gets a time-out
/// error at once and the late answer is dropped; the thread ends by itself (and is joined)
/// when the resolver gives up. `inFlight` says whether that thread still runs: an owner that
/// retries starts no second one meanwhile, so at most one thread per owner waits on DNS.
///
/// A numeric address (`10.0.0.5`, `::1`) is answered at once (in this loop turn), on no thread.
/// The owner keeps the lookup while it waits: dropped, it answers nothing (its thread still
/// ends by itself). Loop-bound: create and use it on the loop thread.
public final class NameLookup {
    public let host: String
    /// The lookup thread has not ended yet (even if `done` already got its time-out).
    public private(set) var inFlight = false
    private let loop: EpollLoop
    private var done: ((Result<[String], NameLookupError>) -> Void)?
    private var timer: TimerID?
    private var thread: pthread_t?
    private lazy var handle = OwnerHandle(self)

    deinit { handle.sever() }

    /// Whether `host` is a numeric IPv4/IPv6 address.
    public static func isNumeric(_ host: String) -> Bool { Sys.isNumericAddress(host) }

    /// Starts looking `host` up; `done` runs once, on the loop, with the addresses or the reason.
    /// `resolver` replaces the system's (`getaddrinfo`) in tests: it runs on the lookup thread.
    public init(_ host: String, on loop: EpollLoop, limit: Duration,
                resolver: (@Sendable (String) -> Result<[String], NameLookupError>)? = nil,
                _ done: @escaping (Result<[String], NameLookupError>) -> Void) {
        self.host = host
        self.loop = loop
        self.done = done
        if Sys.isNumericAddress(host) {
            loop.schedule(at: loop.now) { [handle] in handle.owner?.finish(.success([host])) }
            return
        }
        // The thread keeps this object alive (a retained pointer, passed as a number) until its
        // answer is back on the loop.
        let me = UInt(bitPattern: Unmanaged.passRetained(self).toOpaque())
        let remote = loop.remote
        do {
            thread = try Sys.startThread {
                let result = resolver?(host) ?? Sys.lookUp(host)
                remote.execute {
                    guard let pointer = UnsafeMutableRawPointer(bitPattern: me) else { return }
                    Unmanaged<NameLookup>.fromOpaque(pointer).takeRetainedValue().threadEnded(result)
                }
            }
            inFlight = true
            timer = loop.schedule(after: limit) { [handle] in
                handle.owner?.finish(.failure(NameLookupError(host: host, reason: "no answer within \(limit)")))
            }
        } catch {
            Unmanaged<NameLookup>.fromOpaque(UnsafeMutableRawPointer(bitPattern: me)!).release()
            loop.schedule(at: loop.now) { [handle] in
                handle.owner?.finish(.failure(NameLookupError(host: host, reason: "cannot start a lookup thread (\(error))")))
            }
        }
    }

    /// Drops the answer (`done` is not called); a running thread still ends by itself.
    public func cancel() {
        done = nil
        if let timer { loop.cancel(timer) }
        timer = nil
    }

    private func threadEnded(_ result: Result<[String], NameLookupError>) {
        if let thread { Sys.joinThread(thread) }   // it has posted its answer: it is ending
        thread = nil
        inFlight = false
        finish(result)
    }

    private func finish(_ result: Result<[String], NameLookupError>) {
        if let timer { loop.cancel(timer) }
        timer = nil
        let done = self.done
        self.done = nil
        done?(result)
    }
}
