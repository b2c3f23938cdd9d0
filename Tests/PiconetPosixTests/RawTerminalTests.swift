import PiconetPosix
import Testing

/// What can be checked without a terminal; the raw mode itself and its restoration on a real
/// terminal are checked by the netns-appsvc stage (`piconet pick` in a tmux pane, `stty -g`
/// before and after).
@Suite struct RawTerminalTests {
    @Test func aPipeIsNoTerminalAndIsLeftAlone() throws {
        let pipe = try Pipe()
        let mock = SyscallMock()
        let outcome = SyscallMock.$current.withValue(mock) {
            Result { () throws(IOError) -> RawTerminal in try RawTerminal(descriptor: pipe.readEnd.descriptor) }
        }
        var refused: IOError?
        if case let .failure(e) = outcome { refused = e }
        #expect(refused?.errno == Errno.notATerminal.rawValue, "ENOTTY, got \(String(describing: refused))")
        #expect(mock.calls(named: "tcsetattr").count == 1, "one attempt, nothing to restore")
        #expect(RawTerminal.size(of: pipe.readEnd.descriptor) == nil)
    }
}
