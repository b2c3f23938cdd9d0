import PiconetPosix
import Testing

/// `CurrentProcess.arguments` reads /proc/self/cmdline (Embedded Swift has no `CommandLine`);
/// in ordinary Swift it must agree with the standard library's view.
@Suite struct CurrentProcessArgumentsTests {
    @Test func argumentsMatchCommandLine() {
        #expect(CurrentProcess.arguments == CommandLine.arguments)
        #expect(!CurrentProcess.arguments.isEmpty)
    }
}
