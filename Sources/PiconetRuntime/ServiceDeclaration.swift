import PiconetDiscovery
import PiconetPosix
import PiconetSession
import PiconetWire

/// One application service declared on a board: a file `NAME.json` in the services directory
/// (`--services-dir`, `/etc/piconet/services.d` by convention), one JSON object:
///
///     {"name": "uname", "command": "/usr/bin/uname", "arguments": ["-a"], "user": "nobody",
///      "consent": "all", "roles": ["node"], "boards": ["pi5"], "idle-seconds": 30,
///      "instances": "per-session"}
///
/// `name` is a DNS-SD service name (RFC 6335: 1–15 lowercase letters, digits, hyphens) and the
/// file's own name; a peer reaches it by opening the stream `piconet.service/NAME`. `consent`
/// takes the node's policy words for who may start it (`all`, `ask`: the keys in the node's
/// trust store, `none`, or peer IDs); `roles`/`boards` say which nodes offer it (this node's
/// role and board must be listed, when the key is given). `instances`: `per-session` only (one
/// program per stream, its stdin/stdout the stream's bytes: two peers' bytes in one program's
/// stdin would interleave, so `shared` has no meaning for a stdio program and is refused).
public struct ServiceDeclaration: Equatable, Sendable {
    public var name: String
    public var command: String
    public var arguments: [String]
    public var user: UserAccount
    public var consent: InvitationPolicy
    public var roles: [String]
    public var boards: [String]
    public var idleSeconds: Int
    /// RLIMIT_NOFILE of the program.
    public var maximumOpenFiles: Int
    /// RLIMIT_AS of the program in MiB; 0: as inherited.
    public var maximumMemoryMiB: Int

    /// The stream name that reaches a service; the rest of the name is the service's.
    public static let streamPrefix = "piconet.service/"

    public static let keys = ConfigKeys(
        binary: "a service declaration",
        keys: ["name", "command", "arguments", "user", "consent", "roles", "boards", "idle-seconds", "instances",
               "max-open-files", "max-memory-mb"])

    public static let idleRange: ClosedRange<Int64> = 1...86_400

    /// Whether a node of `role` on `board` offers the service.
    public func isOffered(role: String, board: String) -> Bool {
        (roles.isEmpty || roles.contains(role)) && (boards.isEmpty || boards.contains(board))
    }

    /// Reads and checks `directory/file`: every refusal is one `ConfigFile.Failure` naming the
    /// file and what is wrong. `lookupUser` finds a user by name (the system's by default).
    public static func load(directory: String, file: String,
                            lookupUser: (String) -> UserAccount? = { UserAccount.named($0) },
                            isExecutable: (String) -> Bool = { FileSystem.isExecutable($0) }) throws(ConfigFile.Failure) -> ServiceDeclaration {
        let path = directory + "/" + file
        guard !file.contains("/"), file != "..", file != ".", !file.hasPrefix(".") else {
            throw ConfigFile.Failure(path: path, key: nil, why: "the name leaves the services directory", fix: "a file NAME.json directly inside \(directory)")
        }
        guard file.hasSuffix(".json") else {
            throw ConfigFile.Failure(path: path, key: nil, why: "not a service declaration", fix: "name it NAME.json")
        }
        let stem = String(file.dropLast(5))
        // O_NOFOLLOW (SecretFile): a symbolic link, which could point anywhere, is refused.
        let config = try ConfigFile.load(path, keys: keys)
        guard let name = try config.string("name") else {
            throw ConfigFile.Failure(path: path, key: "name", why: "missing", fix: "\"name\": \"\(stem)\"")
        }
        do { _ = try ServiceType(name) } catch {
            throw ConfigFile.Failure(path: path, key: "name", why: "'\(TerminalText.escaped(name))' is not a DNS-SD service name",
                                     fix: "1-15 lowercase letters, digits and inner hyphens, at least one letter")
        }
        guard name == stem else {
            throw ConfigFile.Failure(path: path, key: "name", why: "is '\(name)' in a file named \(file)", fix: "name the file \(name).json")
        }
        guard let command = try config.string("command") else {
            throw ConfigFile.Failure(path: path, key: "command", why: "missing", fix: "the program's absolute path")
        }
        guard command.hasPrefix("/") else {
            throw ConfigFile.Failure(path: path, key: "command", why: "'\(command)' is a relative path", fix: "give the absolute path, e.g. /usr/bin/\(command)")
        }
        guard !command.split(separator: "/").contains(where: { $0 == ".." || $0 == "." }) else {
            throw ConfigFile.Failure(path: path, key: "command", why: "'\(command)' has a . or .. component", fix: "give the program's own absolute path")
        }
        guard isExecutable(command) else {
            throw ConfigFile.Failure(path: path, key: "command", why: "\(command) is not an executable file")
        }
        let arguments = try config.strings("arguments") ?? []
        guard arguments.count <= 64, arguments.allSatisfy({ $0.utf8.count <= 4096 }) else {
            throw ConfigFile.Failure(path: path, key: "arguments", why: "at most 64 arguments of at most 4096 bytes")
        }
        guard let userName = try config.string("user") else {
            throw ConfigFile.Failure(path: path, key: "user", why: "missing", fix: "the user the program runs as, e.g. \"nobody\"")
        }
        guard let user = lookupUser(userName) else {
            throw ConfigFile.Failure(path: path, key: "user", why: "unknown user '\(TerminalText.escaped(userName))'", fix: "a user in /etc/passwd")
        }
        let consentText = try config.string("consent") ?? "ask"
        let consent: InvitationPolicy
        do { consent = try InvitationPolicy(option: consentText) } catch {
            throw ConfigFile.Failure(path: path, key: "consent", why: "'\(TerminalText.escaped(consentText))' is not a policy",
                                     fix: "all, ask, none or comma-separated peer IDs")
        }
        if consent == .trustOnFirstUse {
            throw ConfigFile.Failure(path: path, key: "consent", why: "tofu pins the node's first hub, it does not fit a service",
                                     fix: "all, ask (the node's trusted keys), none or peer IDs")
        }
        let instances = try config.string("instances") ?? "per-session"
        switch instances {
        case "per-session": break
        case "shared":
            throw ConfigFile.Failure(path: path, key: "instances", why: "shared is not supported: a program's stdin cannot take two peers' bytes",
                                     fix: "per-session (one program per stream)")
        default:
            throw ConfigFile.Failure(path: path, key: "instances", why: "'\(TerminalText.escaped(instances))' is not per-session",
                                     fix: closestName(to: instances, among: ["per-session", "shared"]).map { "did you mean '\($0)'?" } ?? "per-session")
        }
        return ServiceDeclaration(
            name: name, command: command, arguments: arguments, user: user, consent: consent,
            roles: try config.strings("roles") ?? [], boards: try config.strings("boards") ?? [],
            idleSeconds: Int(try config.integer("idle-seconds", in: idleRange) ?? 60),
            maximumOpenFiles: Int(try config.integer("max-open-files", in: 16...65_536) ?? 1024),
            maximumMemoryMiB: Int(try config.integer("max-memory-mb", in: 0...65_536) ?? 0))
    }
}
