import PiconetDiscovery
import PiconetPosix
import PiconetRuntime
import PiconetSensors
import PiconetSession
import PiconetUpdate

/// Why the node could not start or stopped: the failure as its layer reported it, the line
/// `main` prints, and the exit status (69 for a missing interface or adapter, 77 for a key
/// file refused as too open, 1 otherwise). Typed, because Embedded Swift has no `any Error`.
enum NodeFailure: Error, CustomStringConvertible {
    case session(SessionRuntimeError)
    case discovery(DiscoveryRuntimeError)
    case system(IOError)
    /// Board profile, Bluetooth adapter, LE advertising, trust store: printed as their own text.
    case other(description: String, unavailable: Bool)
    /// The OS refused for lack of privileges (a Bluetooth socket, an IIO device): exit 77.
    case denied(description: String)

    var description: String {
        switch self {
        case let .session(e): return e.description
        case let .discovery(e): return e.description
        case let .system(e): return e.description
        case let .other(text, _): return text
        case let .denied(text): return text
        }
    }

    var exitStatus: Int32 {
        switch self {
        case .discovery: return ExitStatus.unavailable
        case let .session(e):
            if case .keyFile(.tooOpen) = e { return ExitStatus.permission }
            return e.isUnavailable ? ExitStatus.unavailable : ExitStatus.failure
        case let .other(_, unavailable): return unavailable ? ExitStatus.unavailable : ExitStatus.failure
        case .system: return ExitStatus.failure
        case .denied: return ExitStatus.permission
        }
    }
}

/// An error a node step can fail with, as a `NodeFailure`.
protocol NodeFailureConvertible: Error { var nodeFailure: NodeFailure { get } }

extension SessionRuntimeError: NodeFailureConvertible { var nodeFailure: NodeFailure { .session(self) } }
extension DiscoveryRuntimeError: NodeFailureConvertible { var nodeFailure: NodeFailure { .discovery(self) } }
extension IOError: NodeFailureConvertible { var nodeFailure: NodeFailure { .system(self) } }
extension BoardProfileError: NodeFailureConvertible { var nodeFailure: NodeFailure { .other(description: description, unavailable: false) } }
extension IIODeviceError: NodeFailureConvertible {
    var nodeFailure: NodeFailure {
        if case .permission = self { return .denied(description: "--motion: \(description)") }
        return .other(description: "--motion: \(description)", unavailable: isUnavailable)
    }
}
extension BluetoothError: NodeFailureConvertible {
    var nodeFailure: NodeFailure {
        if case .permissionDenied = self { return .denied(description: description) }
        return .other(description: description, unavailable: isUnavailable)
    }
}
extension SessionHostError: NodeFailureConvertible {
    var nodeFailure: NodeFailure {
        switch self {
        case let .session(e): return .session(e)
        case let .bluetooth(e): return e.nodeFailure
        case let .trustStore(e): return e.nodeFailure
        }
    }
}
extension BluetoothSessionError: NodeFailureConvertible { var nodeFailure: NodeFailure { .other(description: description, unavailable: false) } }
extension TrustStoreFile.Failure: NodeFailureConvertible { var nodeFailure: NodeFailure { .other(description: description, unavailable: false) } }
extension UpdateRefusal: NodeFailureConvertible { var nodeFailure: NodeFailure { .other(description: "updates: \(description)", unavailable: false) } }
extension SocketActivation.Refusal: NodeFailureConvertible {
    var nodeFailure: NodeFailure { .other(description: "socket activation: \(description)", unavailable: false) }
}
extension DiscoveryError: NodeFailureConvertible { var nodeFailure: NodeFailure { .other(description: description, unavailable: false) } }
extension NodeSettings.Invalid: NodeFailureConvertible {
    var nodeFailure: NodeFailure { .other(description: description, unavailable: false) }
}

/// Runs one step of starting or running the node; its typed error becomes a `NodeFailure`.
func attempt<T, E: NodeFailureConvertible>(_ body: () throws(E) -> T) throws(NodeFailure) -> T {
    do { return try body() } catch { throw error.nodeFailure }
}
