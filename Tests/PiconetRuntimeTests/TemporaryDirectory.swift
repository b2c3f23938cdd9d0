import Glibc
import Testing

/// A fresh directory under /tmp for one test (mkdtemp); the test removes it.
func makeTemporaryDirectory(_ prefix: String) throws -> String {
    var template = Array("/tmp/\(prefix)-XXXXXX".utf8CString)
    let made = template.withUnsafeMutableBufferPointer { mkdtemp($0.baseAddress!) }
    try #require(made != nil, "mkdtemp failed: errno \(errno)")
    return String(cString: made!)
}
