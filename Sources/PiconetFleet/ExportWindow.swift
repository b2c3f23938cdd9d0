/// The hub's MQTT delivery protocol, apart from the broker and the store it drives: which stored
/// messages go out next, at most `window` unacknowledged at once, and which may be deleted.
///
/// - A message leaves only from the store, in store order, and is deleted only after the
///   broker's acknowledgement (PUBACK): nothing stored is lost to an outage or a restart.
/// - After a reconnect everything unacknowledged goes again from the oldest; what was
///   acknowledged is deleted before that, and never sent twice even when its delete fails.
///   A repeat is possible only for messages in flight when the connection or the hub died.
/// - Refills come in halves of the window and deletes in batches, so a steady flow costs one
///   store read per `window / 2` acknowledgements, not one per message.
public struct ExportWindow {
    public let window: Int
    /// The last store id handed to the broker on this connection (0: none yet).
    public private(set) var cursor: Int64 = 0
    /// Broker message id → store id, for what was sent and not yet acknowledged.
    private var inFlight: [Int32: Int64] = [:]
    /// Acknowledged, not yet deleted from the store.
    private var acknowledged: [Int64] = []
    private var acknowledgedSet: Set<Int64> = []
    private var connected = false
    public private(set) var publishedTotal: UInt64 = 0
    public private(set) var acknowledgedTotal: UInt64 = 0

    public init(window: Int = 256) { self.window = max(1, window) }

    public var inFlightCount: Int { inFlight.count }
    public var pendingDeletes: Int { acknowledged.count }

    /// A new connection: nothing is in flight on it; the store is read again from its oldest.
    public mutating func connect() {
        connected = true
        cursor = 0
        inFlight.removeAll()
    }

    /// The connection is gone: what was in flight goes again on the next one.
    public mutating func disconnect() {
        connected = false
        inFlight.removeAll()
    }

    /// What an acknowledgement asks of the driver.
    public struct AckEffect: Equatable {
        /// A batch of deletes is due (`flush`).
        public var flush: Bool
        /// The window is half empty: send more (`pump`).
        public var refill: Bool
    }

    /// The broker acknowledged message `mid`; nil for an id this connection did not send.
    public mutating func acknowledge(_ mid: Int32) -> AckEffect? {
        guard let id = inFlight.removeValue(forKey: mid) else { return nil }
        acknowledgedTotal += 1
        if acknowledgedSet.insert(id).inserted { acknowledged.append(id) }
        return AckEffect(flush: acknowledged.count >= window, refill: inFlight.count <= window / 2)
    }

    /// Sends stored messages while the window has room: `fetch(after, limit)` reads the store in id
    /// order (nil: the store failed, try later); `publish` hands one to the broker and returns its
    /// message id (nil: the client cannot take it now). Returns how many were published.
    @discardableResult
    public mutating func pump<Row>(fetch: (Int64, Int) -> [Row]?, id: (Row) -> Int64, publish: (Row) -> Int32?) -> Int {
        guard connected else { return 0 }
        var sent = 0
        while inFlight.count < window {
            guard let rows = fetch(cursor, window - inFlight.count), !rows.isEmpty else { return sent }
            for row in rows {
                let rowID = id(row)
                // Acknowledged but its delete has not happened (or failed): it is delivered.
                if acknowledgedSet.contains(rowID) { cursor = rowID; continue }
                guard let mid = publish(row) else { return sent }
                inFlight[mid] = rowID
                cursor = rowID
                publishedTotal += 1
                sent += 1
            }
        }
        return sent
    }

    /// Deletes what was acknowledged: `delete` removes those ids from the store in one write and
    /// says whether it did; on failure they are kept for the next flush.
    public mutating func flush(_ delete: ([Int64]) -> Bool) {
        guard !acknowledged.isEmpty, delete(acknowledged) else { return }
        acknowledged.removeAll(keepingCapacity: true)
        acknowledgedSet.removeAll(keepingCapacity: true)
    }
}
