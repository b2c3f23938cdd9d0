// What Embedded Swift's standard library expects the platform to provide. The ordinary Swift
// runtime has these itself, so they exist only in the Embedded build (the node).
#if hasFeature(Embedded)
import CPiconetPosix

/// `Double(String)` calls this to parse text in the C locale. The node never calls
/// `setlocale`, so plain `strtod` is in the C locale. Returns where parsing stopped (the
/// standard library accepts the text only if that is its end). The corresponding C function is `strtod`.
@_cdecl("_swift_stdlib_strtod_clocale")
func swiftStdlibStrtodCLocale(_ text: UnsafePointer<CChar>?, _ result: UnsafeMutablePointer<Double>?) -> UnsafePointer<CChar>? {
    guard let text else { return nil }
    var end: UnsafeMutablePointer<CChar>?
    let value = strtod(text, &end)
    result?.pointee = value
    return UnsafePointer(end)
}
#endif
