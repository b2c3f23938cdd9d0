import ArgumentParser
import PiconetPosix
import PiconetRuntime
import PiconetWire

// Output of every `piconet` subcommand: lines straight to a descriptor, one-line errors,
// JSON lines through PiconetWire.JSON (the one JSON path: no hand-built strings).

/// Writes one line straight to a descriptor (no stdio buffer: a pipe sees it at once).
func emitLine(_ s: String) { Console.out(s + "\n") }
func errorLine(_ s: String) { Console.err(s + "\n") }

/// One JSON object on one line of stdout (`--json`: a line per event, keys in this order).
func emitJSON(_ pairs: KeyValuePairs<String, JSON>) { emitLine(JSON.object(pairs).text) }

/// Prints `piconet COMMAND: error: MESSAGE` on stderr; the caller throws the result (exit
/// `code`; 2, the old "bad arguments", is the usage status 64 as everywhere).
func cliFailure(_ command: String, _ message: String, code: Int32) -> ExitCode {
    errorLine("piconet \(command): error: \(message)")
    return ExitCode(code == 2 ? ExitStatus.usage : code)
}

/// A usage error: one line, exit 64.
func usageFailure(_ command: String, _ message: String) -> ExitCode { cliFailure(command, message, code: ExitStatus.usage) }

/// The exit status of a failure while starting: 69 for what this machine does not offer (an
/// interface, an adapter, a port), 77 for a key file readable by others or a Bluetooth socket
/// refused for lack of privileges, else `code`.
func exitStatus(_ error: any Error, else code: Int32 = ExitStatus.failure) -> Int32 {
    if error is DiscoveryRuntimeError { return ExitStatus.unavailable }
    if let e = error as? SessionHostError { return e.exitStatus }
    if let e = error as? BluetoothError, e.exitStatus != ExitStatus.failure { return e.exitStatus }
    if let e = error as? SessionRuntimeError, e.isUnavailable { return ExitStatus.unavailable }
    return code
}

/// `v` with `decimals` digits after the point (no Foundation formatting here).
func fixed(_ decimals: Int, _ v: Double) -> String {
    guard v.isFinite else { return "nan" }
    var scale = 1.0
    for _ in 0..<decimals { scale *= 10 }
    let r = (v * scale).rounded() / scale
    if decimals == 0 { return String(Int64(r)) }
    let whole = Int64(r.magnitude)
    var frac = String(Int64(((r.magnitude - Double(whole)) * scale).rounded()))
    while frac.count < decimals { frac = "0" + frac }
    return (r < 0 ? "-" : "") + String(whole) + "." + frac
}

/// This machine's name, the default `--name`.
func localHostName() -> String { CurrentProcess.hostName() ?? "piconet" }
