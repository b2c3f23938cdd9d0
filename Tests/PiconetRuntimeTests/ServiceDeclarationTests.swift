import Glibc
import PiconetPosix
import PiconetRuntime
import PiconetSession
import Testing

@Suite struct ServiceDeclarationTests {
    static let nobody = UserAccount(name: "svc", uid: 4242, gid: 4242, home: "/nonexistent")
    static func users(_ name: String) -> UserAccount? { name == "svc" ? nobody : nil }

    /// Writes `text` as `file` in a fresh directory and loads it with the fake user database.
    func load(_ file: String, _ text: String) throws -> Result<ServiceDeclaration, ConfigFile.Failure> {
        let dir = try makeTemporaryDirectory("piconet-services")
        defer { _ = unlink(dir + "/" + file); rmdir(dir) }
        try FileSystem.write(dir + "/" + file, Array(text.utf8))
        do { return .success(try ServiceDeclaration.load(directory: dir, file: file, lookupUser: Self.users)) } catch {
            return .failure(error)
        }
    }

    func refusal(_ file: String, _ text: String) throws -> String {
        guard case let .failure(f) = try load(file, text) else { Issue.record("\(file) loaded"); return "" }
        #expect(!f.description.contains("\n"), "one line")
        #expect(f.description.contains(file), "names the file: \(f)")
        return f.description
    }

    @Test func aGoodDeclarationLoadsWithItsDefaults() throws {
        let d = try load("uname.json", #"{"name": "uname", "command": "/bin/sh", "arguments": ["-c", "uname"], "user": "svc", "consent": "all", "boards": ["pi5"], "idle-seconds": 3}"#).get()
        #expect(d.name == "uname" && d.command == "/bin/sh" && d.arguments == ["-c", "uname"])
        #expect(d.user == Self.nobody && d.consent == .acceptAll && d.idleSeconds == 3 && d.maximumOpenFiles == 1024)
        #expect(d.isOffered(role: "node", board: "pi5") && !d.isOffered(role: "node", board: "pi-zero-2w"))
        let asks = try load("echo.json", #"{"name": "echo", "command": "/bin/cat", "user": "svc"}"#).get()
        #expect(asks.consent == .ask && asks.idleSeconds == 60, "consent defaults to ask: a stranger never starts it")
    }

    @Test func everyRefusalIsOneLineNamingTheFileAndTheProblem() throws {
        #expect(try refusal("Bad_Name.json", #"{"name": "Bad_Name", "command": "/bin/cat", "user": "svc"}"#).contains("not a DNS-SD service name"))
        #expect(try refusal("x.json", #"{"name": "../x", "command": "/bin/cat", "user": "svc"}"#).contains("key 'name'"))
        #expect(try refusal("other.json", #"{"name": "echo", "command": "/bin/cat", "user": "svc"}"#).contains("name the file echo.json"))
        #expect(try refusal("echo.json", #"{"name": "echo", "command": "cat", "user": "svc"}"#).contains("relative path"))
        #expect(try refusal("echo.json", #"{"name": "echo", "command": "/bin/../bin/cat", "user": "svc"}"#).contains(".. component"))
        #expect(try refusal("echo.json", #"{"name": "echo", "command": "/nonexistent/cat", "user": "svc"}"#).contains("not an executable"))
        #expect(try refusal("echo.json", #"{"name": "echo", "command": "/bin/cat", "user": "nosuchuser"}"#).contains("unknown user 'nosuchuser'"))
        #expect(try refusal("echo.json", #"{"name": "echo", "command": "/bin/cat", "user": "svc", "idle-secnds": 3}"#).contains("did you mean 'idle-seconds'?"))
        #expect(try refusal("echo.json", #"{"name": "echo", "command": "/bin/cat", "user": "svc", "idle-seconds": 0}"#).contains("1...86400"))
        #expect(try refusal("echo.json", #"{"name": "echo", "command": "/bin/cat", "user": "svc", "max-open-files": 1}"#).contains("16...65536"))
        #expect(try refusal("echo.json", #"{"name": "echo", "command": "/bin/cat", "user": "svc", "consent": "tofu"}"#).contains("tofu"))
        #expect(try refusal("echo.json", #"{"name": "echo", "command": "/bin/cat", "user": "svc", "consent": "maybe"}"#).contains("not a policy"))
        #expect(try refusal("echo.json", #"{"name": "echo", "command": "/bin/cat", "user": "svc", "instances": "shared"}"#).contains("shared is not supported"))
        #expect(try refusal("echo.json", #"{"name": "echo", "command": "/bin/cat", "user": "svc", "instances": "per-sesion"}"#).contains("did you mean 'per-session'?"))
        #expect(try refusal("echo.json", #"{"name": "echo", "user": "svc"}"#).contains("key 'command': missing"))
        #expect(try refusal("echo.json", #"["echo"]"#).contains("JSON object"))
    }

    @Test func aNameOrALinkThatLeavesTheDirectoryIsRefused() throws {
        let dir = try makeTemporaryDirectory("piconet-services")
        defer { _ = unlink(dir + "/evil.json"); rmdir(dir) }
        #expect(symlink("/etc/passwd", dir + "/evil.json") == 0)
        #expect(throws: ConfigFile.Failure.self) { _ = try ServiceDeclaration.load(directory: dir, file: "evil.json", lookupUser: Self.users) }
        do { _ = try ServiceDeclaration.load(directory: dir, file: "evil.json", lookupUser: Self.users) } catch {
            #expect(error.description.contains("symbolic link"), "\(error)")
        }
        for file in ["../escape.json", "sub/x.json", ".hidden.json"] {
            do { _ = try ServiceDeclaration.load(directory: dir, file: file, lookupUser: Self.users); Issue.record("\(file) loaded") } catch {
                #expect(error.description.contains("leaves the services directory"), "\(error)")
            }
        }
    }
}

@Suite struct ServiceCloseStatusTests {
    @Test func connectExitsWithTheServicesCloseReason() {
        #expect(AppServices.exitStatus(closedBy: nil) == 0)
        #expect(AppServices.exitStatus(closedBy: .serviceExited(status: 3)) == 3)
        #expect(AppServices.exitStatus(closedBy: .serviceKilled(signal: 11)) == 139)
        #expect(AppServices.exitStatus(closedBy: .serviceRefused) == ExitStatus.permission)
        #expect(AppServices.exitStatus(closedBy: .unknownName) == ExitStatus.unavailable)
        #expect(AppServices.exitStatus(closedBy: .serviceUnavailable) == ExitStatus.unavailable)
        #expect(AppServices.exitStatus(closedBy: .serviceIdle) == ExitStatus.tryAgain)
        #expect(AppServices.exitStatus(closedBy: .protocolViolation) == ExitStatus.failure)
    }
}
