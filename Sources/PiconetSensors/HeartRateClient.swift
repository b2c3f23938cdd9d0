import PiconetLoop
import PiconetWire

/// A GATT client for one Bluetooth LE heart-rate sensor (Heart Rate Service 0x180D), as a
/// state machine: the loop opens and closes the ATT channel, carries PDUs and timers;
/// this decides what to send and when.
///
/// Per connection: Exchange MTU → discover primary services (Read By Group Type 0x2800) →
/// characteristics of 0x180D (Read By Type 0x2803) → descriptors of 0x2A37 (Find Information)
/// → write 01 00 to its CCCD → if the device has a Battery service (0x180F), find 0x2A19 and
/// Read it → streaming. Notifications of 0x2A37 are parsed with `HeartRateMeasurement` as soon
/// as the CCCD is written. One ATT request is outstanding at a time (the protocol's rule), each
/// with `requestTimeout`; a silent stream for `silenceLimit` counts as lost.
///
/// Losing the link (or a timeout, or any retryable problem) closes the channel and reconnects
/// after a back-off that doubles from `initialBackoff` to `maximumBackoff` and starts over once
/// a connection reaches streaming. "Not a heart-rate sensor" stops for good (`.stopped`).
///
/// Nothing here reads the clock: every input carries `at`, and `nextDeadline` says when to call
/// `timerFired(at:)`. Handles found are kept per connection only (a sensor may renumber after a
/// firmware update); nothing from the peer grows without bound: discovery keeps only the two
/// services and one characteristic it wants, and each discovery step must move the handle forward.
///
/// `Purpose.readBattery` (`piconet sensors scan`) runs the same connection and discovery steps
/// but only as far as the Battery Level: connect → MTU → services → 0x2A19 → Read → disconnect,
/// one attempt bounded by `batteryReadLimit` as a whole, never retried, ending in one
/// `.finished(BatteryReading)`.
public struct HeartRateClient {
    /// Stream measurements (the node), or read the battery once and hang up (the scan).
    public enum Purpose: Equatable, Sendable {
        case stream
        case readBattery
    }

    public struct Configuration: Sendable {
        /// Our receive MTU offered in Exchange MTU (the kernel's LE ATT default buffer is larger).
        public var mtu: UInt16 = 247
        /// The ATT transaction timeout (Core Vol 3 Part F §3.3.3 says 30 s; straps answer in ms).
        public var requestTimeout: Duration = .seconds(10)
        /// How long opening the channel may take before it is abandoned and retried.
        public var connectTimeout: Duration = .seconds(20)
        /// Streaming with no measurement for this long is a lost strap (straps send about 1/s).
        public var silenceLimit: Duration = .seconds(15)
        public var initialBackoff: Duration = .seconds(1)
        public var maximumBackoff: Duration = .seconds(60)
        /// `.readBattery`: the whole attempt, connect included, ends as `unknown (timeout)` after this.
        public var batteryReadLimit: Duration = .seconds(5)
        public init() {}
    }

    /// What the loop must do.
    public enum Action: Equatable, Sendable {
        /// Open the LE ATT channel to the sensor; answer with `connected(at:)` or `disconnected(_:at:)`.
        case connect
        /// Send one ATT PDU on the channel.
        case send(ATTPDU)
        /// Close the channel (no `disconnected` call is expected afterwards).
        case disconnect
        /// A measurement arrived (bpm, contact, RR intervals), at the time given to `received`.
        case measurement(HeartRateMeasurement)
        /// The battery level in percent (0–100), read once per connection.
        case batteryLevel(UInt8)
        /// Where the strap sits (0x2A38), read once per connection when the service has it.
        case sensorLocation(BodySensorLocation)
        /// Notifications are enabled: measurements follow.
        case streaming
        /// Something went wrong; `retryIn` is the back-off before the next `connect` (nil: stopped).
        case problem(HeartRateClientProblem, retryIn: Duration?)
        /// `.readBattery` only: the answer, once; the channel is already closed (a `.disconnect`
        /// precedes this when it was open). Nothing follows.
        case finished(BatteryReading)
    }

    public enum Phase: Equatable, Sendable {
        case idle
        case connecting
        case exchangingMTU
        case discoveringServices
        case discoveringCharacteristics
        case discoveringDescriptors
        case enablingNotifications
        case readingSensorLocation
        case findingBattery
        case readingBattery
        case streaming
        /// Waiting for the back-off to end before `connect`.
        case backingOff
        /// Stopped for good (not a heart-rate sensor).
        case stopped
        /// `.readBattery`: the reading was reported.
        case finished
    }

    /// Counters for what a peer sent that we did not use (visible in status output).
    public struct Counters: Equatable, Sendable {
        /// PDUs that did not parse as ATT, or measurements that did not parse as 0x2A37.
        public var malformed = 0
        /// Notifications of handles we did not subscribe to, or responses nobody asked for.
        public var ignored = 0
        /// Requests from the server answered with Request Not Supported.
        public var refusedRequests = 0
        /// Connections that reached streaming.
        public var sessions = 0
    }

    public let configuration: Configuration
    public let purpose: Purpose
    public private(set) var phase: Phase = .idle
    public private(set) var counters = Counters()
    /// The ATT_MTU agreed for the current connection.
    public private(set) var mtu: UInt16 = ATTPDU.defaultMTU
    /// Consecutive failed attempts since the last streaming connection (drives the back-off).
    public private(set) var failures = 0

    private var deadline: Instant?
    private var outstanding: UInt8?
    private var heartRate: (start: UInt16, end: UInt16)?
    private var battery: (start: UInt16, end: UInt16)?
    private var measurementHandle: UInt16?
    /// Where descriptors of 0x2A37 end: before the next characteristic declaration, or the service end.
    private var measurementEnd: UInt16 = 0
    private var cccdHandle: UInt16?
    private var batteryHandle: UInt16?
    /// 0x2A38's value handle when the Heart Rate service declares it readable (wherever it sits:
    /// the service's declarations are read to the end).
    private var locationHandle: UInt16?
    private var nextStart: UInt16 = 1
    /// `.readBattery`: when the attempt as a whole gives up.
    private var limit: Instant?

    public init(configuration: Configuration = Configuration(), purpose: Purpose = .stream) {
        self.configuration = configuration
        self.purpose = purpose
    }

    /// When `timerFired(at:)` is due: a request's timeout, the connect timeout, the end of a
    /// back-off, the silence limit while streaming, or the battery read's limit. Nil when
    /// nothing is due (idle, stopped, finished).
    public var nextDeadline: Instant? {
        guard let limit else { return deadline }
        return deadline.map { min($0, limit) } ?? limit
    }

    /// Starts the first connection attempt.
    public mutating func start(at now: Instant) -> [Action] {
        guard phase == .idle || phase == .backingOff else { return [] }
        if purpose == .readBattery { limit = now + configuration.batteryReadLimit }
        return connect(at: now)
    }

    /// The channel could not even be opened for a reason retrying will not fix (permission):
    /// stops (streaming) or finishes the reading as unknown (battery).
    public mutating func refused(_ problem: HeartRateClientProblem, at now: Instant) -> [Action] {
        guard phase == .connecting else { return [] }
        return fail(problem, at: now, close: false)
    }

    /// The channel is open: exchange MTUs.
    public mutating func connected(at now: Instant) -> [Action] {
        guard phase == .connecting else { return [] }
        resetConnection()
        phase = .exchangingMTU
        return request(.exchangeMTURequest(clientMTU: configuration.mtu), at: now)
    }

    /// The channel failed to open or was closed by the peer or the kernel.
    public mutating func disconnected(_ reason: String, at now: Instant) -> [Action] {
        switch phase {
        case .idle, .backingOff, .stopped, .finished: return []
        default: return fail(.disconnected(reason: reason), at: now, close: false)
        }
    }

    /// One ATT PDU from the channel (one datagram).
    public mutating func received(_ bytes: [UInt8], at now: Instant) -> [Action] {
        guard ![.idle, .connecting, .backingOff, .stopped, .finished].contains(phase) else {
            counters.ignored += 1
            return []
        }
        let pdu: ATTPDU
        do {
            pdu = try ATTPDU(decoding: bytes)
        } catch {
            counters.malformed += 1
            return []
        }
        switch pdu {
        case let .handleValueNotification(handle, value):
            return notification(handle: handle, value: value, at: now)
        case let .exchangeMTURequest(clientMTU):
            // The server may ask too; answering is mandatory, and the smaller MTU wins both ways.
            mtu = max(ATTPDU.defaultMTU, min(clientMTU, configuration.mtu))
            return [.send(.exchangeMTUResponse(serverMTU: configuration.mtu))]
        case let .other(opcode, _) where ATTPDU.isRequest(opcode):
            counters.refusedRequests += 1
            return [.send(.errorResponse(requestOpcode: opcode, handle: 0, error: .requestNotSupported))]
        case .other, .exchangeMTUResponse, .errorResponse, .findInformationResponse, .readByTypeResponse,
             .readResponse, .readByGroupTypeResponse, .writeResponse:
            return response(pdu, at: now)
        default:
            // A request opcode Piconet also sends (Read, Write...): we serve no attributes.
            counters.refusedRequests += 1
            return [.send(.errorResponse(requestOpcode: pdu.opcode, handle: 0, error: .requestNotSupported))]
        }
    }

    /// A deadline passed (call when `now >= nextDeadline`).
    public mutating func timerFired(at now: Instant) -> [Action] {
        if let limit, now >= limit, phase != .finished {
            deadline = nil
            return fail(.timeout(during: step), at: now, close: true)
        }
        guard let d = deadline, now >= d else { return [] }
        deadline = nil
        switch phase {
        case .backingOff:
            return connect(at: now)
        case .connecting:
            return fail(.timeout(during: "connect"), at: now, close: true)
        case .streaming:
            return fail(.silent(seconds: Int(configuration.silenceLimit.components.seconds)), at: now, close: true)
        case .idle, .stopped, .finished:
            return []
        default:
            return fail(.timeout(during: step), at: now, close: true)
        }
    }

    // MARK: steps

    /// The current step in words, for problems.
    private var step: String {
        switch phase {
        case .exchangingMTU: return "exchange MTU"
        case .discoveringServices: return "discover services"
        case .discoveringCharacteristics: return "discover heart-rate characteristics"
        case .discoveringDescriptors: return "discover the measurement's CCCD"
        case .enablingNotifications: return "enable notifications"
        case .readingSensorLocation: return "read the body sensor location"
        case .findingBattery: return "find the battery level"
        case .readingBattery: return "read the battery level"
        default: return "connect"
        }
    }

    private mutating func connect(at now: Instant) -> [Action] {
        phase = .connecting
        deadline = now + configuration.connectTimeout
        return [.connect]
    }

    private mutating func resetConnection() {
        mtu = ATTPDU.defaultMTU
        outstanding = nil
        heartRate = nil
        battery = nil
        measurementHandle = nil
        measurementEnd = 0
        cccdHandle = nil
        batteryHandle = nil
        locationHandle = nil
        nextStart = 1
    }

    private mutating func request(_ pdu: ATTPDU, at now: Instant) -> [Action] {
        outstanding = pdu.opcode
        deadline = now + configuration.requestTimeout
        return [.send(pdu)]
    }

    private mutating func fail(_ problem: HeartRateClientProblem, at now: Instant, close: Bool) -> [Action] {
        var out: [Action] = close ? [.disconnect] : []
        resetConnection()
        if purpose == .readBattery { return finish(.unknown(problem), close: close) }
        guard problem.isRetryable else {
            phase = .stopped
            deadline = nil
            out.append(.problem(problem, retryIn: nil))
            return out
        }
        let backoff = backoffDuration(failures)
        failures += 1
        phase = .backingOff
        deadline = now + backoff
        out.append(.problem(problem, retryIn: backoff))
        return out
    }

    /// `.readBattery`: reports the one answer and stops (closing the channel first when asked).
    private mutating func finish(_ reading: BatteryReading, close: Bool) -> [Action] {
        resetConnection()
        phase = .finished
        deadline = nil
        limit = nil
        return (close ? [.disconnect] : []) + [.finished(reading)]
    }

    /// initialBackoff × 2^failures, capped at maximumBackoff.
    private func backoffDuration(_ n: Int) -> Duration {
        var d = configuration.initialBackoff
        for _ in 0..<min(n, 30) {
            d = d * 2
            if d >= configuration.maximumBackoff { return configuration.maximumBackoff }
        }
        return min(d, configuration.maximumBackoff)
    }

    private mutating func notification(handle: UInt16, value: [UInt8], at now: Instant) -> [Action] {
        guard let measurementHandle, handle == measurementHandle, cccdHandle != nil,
              [.enablingNotifications, .readingSensorLocation, .findingBattery, .readingBattery, .streaming].contains(phase) else {
            counters.ignored += 1
            return []
        }
        let m: HeartRateMeasurement
        do {
            m = try HeartRateMeasurement(decoding: value)
        } catch {
            counters.malformed += 1
            return []
        }
        if phase == .streaming { deadline = now + configuration.silenceLimit }
        return [.measurement(m)]
    }

    private mutating func response(_ pdu: ATTPDU, at now: Instant) -> [Action] {
        guard let asked = outstanding else {
            counters.ignored += 1
            return []
        }
        // An error answers the request it names; any other response must match what we asked.
        if case let .errorResponse(req, _, error) = pdu {
            guard req == asked else {
                counters.ignored += 1
                return []
            }
            outstanding = nil
            return errorResponse(error, at: now)
        }
        guard pdu.opcode == asked + 1 else {
            counters.ignored += 1
            return []
        }
        outstanding = nil
        switch (phase, pdu) {
        case let (.exchangingMTU, .exchangeMTUResponse(serverMTU)):
            mtu = max(ATTPDU.defaultMTU, min(serverMTU, configuration.mtu))
            return discoverServices(from: 1, at: now)
        case let (.discoveringServices, .readByGroupTypeResponse(groups)):
            var last: UInt16 = 0
            for g in groups {
                guard g.handle >= nextStart, g.endGroupHandle >= g.handle, g.handle > last else {
                    return fail(.protocolViolation("service handles out of order"), at: now, close: true)
                }
                last = g.endGroupHandle
                var r = ByteReader(g.value)
                switch (try? ATTUUID(parsing: &r, length: g.value.count))?.uuid16 {
                case GATTNumber.heartRateService: heartRate = (g.handle, g.endGroupHandle)
                case GATTNumber.batteryService: battery = (g.handle, g.endGroupHandle)
                default: break
                }
            }
            return last == 0xFFFF ? servicesDone(at: now) : discoverServices(from: last + 1, at: now)
        case let (.discoveringCharacteristics, .readByTypeResponse(items)),
             let (.findingBattery, .readByTypeResponse(items)):
            return characteristics(items, at: now)
        case let (.discoveringDescriptors, .findInformationResponse(items)):
            var last: UInt16 = 0
            for item in items {
                guard item.handle >= nextStart, item.handle > last else {
                    return fail(.protocolViolation("descriptor handles out of order"), at: now, close: true)
                }
                last = item.handle
                if item.uuid.uuid16 == GATTNumber.clientCharacteristicConfiguration, cccdHandle == nil { cccdHandle = item.handle }
            }
            if cccdHandle == nil, last < measurementEnd { return discoverDescriptors(from: last + 1, at: now) }
            return descriptorsDone(at: now)
        case (.enablingNotifications, .writeResponse):
            return locationOrBattery(at: now)
        case let (.readingSensorLocation, .readResponse(value)):
            var out: [Action] = []
            if let l = BodySensorLocation(value: value) { out.append(.sensorLocation(l)) } else { counters.malformed += 1 }
            return out + batteryOrStream(at: now)
        case let (.readingBattery, .readResponse(value)):
            guard let level = value.first, level <= 100 else {
                counters.malformed += 1
                return batteryDone(.unknown(.protocolViolation("battery level not 0-100 %")), at: now)
            }
            return batteryDone(.level(level), at: now)
        default:
            counters.ignored += 1
            return []
        }
    }

    private mutating func errorResponse(_ error: ATTErrorCode, at now: Instant) -> [Action] {
        let done = error == .attributeNotFound
        switch phase {
        case .exchangingMTU where error == .requestNotSupported:
            // A server that cannot exchange MTUs keeps the default 23: fine for 0x2A37.
            return discoverServices(from: 1, at: now)
        case .discoveringServices where done:
            return servicesDone(at: now)
        case .discoveringCharacteristics where done:
            return characteristicsDone(at: now)
        case .discoveringDescriptors where done:
            return descriptorsDone(at: now)
        case .readingSensorLocation:
            // Like the battery: not worth losing the heart rate for.
            return batteryOrStream(at: now)
        case .findingBattery where done:
            return batteryDone(.absent, at: now)
        case .readingBattery:
            // A battery level we may not read is not worth losing the heart rate for.
            return batteryDone(.unknown(.attError(during: step, error)), at: now)
        default:
            return fail(.attError(during: step, error), at: now, close: true)
        }
    }

    private mutating func discoverServices(from start: UInt16, at now: Instant) -> [Action] {
        phase = .discoveringServices
        nextStart = start
        return request(.readByGroupTypeRequest(start: start, end: 0xFFFF, type: .uuid16(GATTNumber.primaryService)), at: now)
    }

    private mutating func servicesDone(at now: Instant) -> [Action] {
        // The battery alone: whether the device is a heart-rate sensor is the scan's business.
        if purpose == .readBattery { return batteryOrStream(at: now) }
        guard let hr = heartRate else { return fail(.notHeartRateSensor, at: now, close: true) }
        phase = .discoveringCharacteristics
        nextStart = hr.start
        return request(.readByTypeRequest(start: hr.start, end: hr.end, type: .uuid16(GATTNumber.characteristic)), at: now)
    }

    private mutating func characteristics(_ items: [ATTHandleValue], at now: Instant) -> [Action] {
        guard let range = phase == .findingBattery ? battery : heartRate else { return [] }
        var last: UInt16 = 0
        for item in items {
            guard item.handle >= nextStart, item.handle > last, item.handle <= range.end else {
                return fail(.protocolViolation("characteristic handles out of order"), at: now, close: true)
            }
            last = item.handle
            guard let decl = try? GATTCharacteristicDeclaration(decoding: item.value) else {
                counters.malformed += 1
                continue
            }
            if phase != .findingBattery, decl.uuid.uuid16 == BodySensorLocation.uuid,
               decl.properties & GATTCharacteristicDeclaration.Property.read != 0, locationHandle == nil {
                locationHandle = decl.valueHandle
            }
            if phase == .findingBattery {
                if decl.uuid.uuid16 == GATTNumber.batteryLevel, decl.properties & GATTCharacteristicDeclaration.Property.read != 0 {
                    batteryHandle = decl.valueHandle
                }
            } else if measurementHandle != nil, measurementEnd == range.end {
                // The declaration after 0x2A37 bounds its descriptors.
                measurementEnd = item.handle - 1
            } else if decl.uuid.uuid16 == GATTNumber.heartRateMeasurement,
                      decl.properties & GATTCharacteristicDeclaration.Property.notify != 0, measurementHandle == nil {
                measurementHandle = decl.valueHandle
                measurementEnd = range.end
            }
        }
        // The Heart Rate service is read to its end: 0x2A38 may sit anywhere in it (before 0x2A37,
        // or after the declaration that bounds 0x2A37's descriptors, on a later page).
        let found = phase == .findingBattery && batteryHandle != nil
        if found || last >= range.end { return phase == .findingBattery ? readBattery(at: now) : characteristicsDone(at: now) }
        nextStart = last + 1
        return request(.readByTypeRequest(start: last + 1, end: range.end, type: .uuid16(GATTNumber.characteristic)), at: now)
    }

    private mutating func characteristicsDone(at now: Instant) -> [Action] {
        if phase == .findingBattery { return readBattery(at: now) }
        guard let handle = measurementHandle, handle < measurementEnd else {
            return fail(.noMeasurementCharacteristic, at: now, close: true)
        }
        return discoverDescriptors(from: handle + 1, at: now)
    }

    private mutating func discoverDescriptors(from start: UInt16, at now: Instant) -> [Action] {
        phase = .discoveringDescriptors
        nextStart = start
        return request(.findInformationRequest(start: start, end: measurementEnd), at: now)
    }

    private mutating func descriptorsDone(at now: Instant) -> [Action] {
        guard let cccd = cccdHandle else { return fail(.noMeasurementCharacteristic, at: now, close: true) }
        phase = .enablingNotifications
        return request(.writeRequest(handle: cccd, value: [0x01, 0x00]), at: now)
    }

    private mutating func locationOrBattery(at now: Instant) -> [Action] {
        guard let handle = locationHandle else { return batteryOrStream(at: now) }
        phase = .readingSensorLocation
        return request(.readRequest(handle: handle), at: now)
    }

    private mutating func batteryOrStream(at now: Instant) -> [Action] {
        guard let b = battery else { return batteryDone(.absent, at: now) }
        phase = .findingBattery
        nextStart = b.start
        return request(.readByTypeRequest(start: b.start, end: b.end, type: .uuid16(GATTNumber.characteristic)), at: now)
    }

    private mutating func readBattery(at now: Instant) -> [Action] {
        guard let handle = batteryHandle else { return batteryDone(.absent, at: now) }
        phase = .readingBattery
        return request(.readRequest(handle: handle), at: now)
    }

    /// The battery step is over: stream (a level read is reported on the way), or hang up with it.
    private mutating func batteryDone(_ reading: BatteryReading, at now: Instant) -> [Action] {
        if purpose == .readBattery { return finish(reading, close: true) }
        return (reading.level.map { [.batteryLevel($0)] } ?? []) + startStreaming(at: now)
    }

    private mutating func startStreaming(at now: Instant) -> [Action] {
        phase = .streaming
        failures = 0
        counters.sessions += 1
        deadline = now + configuration.silenceLimit
        return [.streaming]
    }
}
