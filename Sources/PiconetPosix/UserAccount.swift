/// A local user a service runs as: found by name in the user database (NSS: /etc/passwd, …).
public struct UserAccount: Equatable, Sendable {
    public var name: String
    public var uid: UInt32
    public var gid: UInt32
    public var home: String

    public init(name: String, uid: UInt32, gid: UInt32, home: String) {
        self.name = name
        self.uid = uid
        self.gid = gid
        self.home = home
    }

    /// The user called `name`, nil when there is none (a lookup that fails is nil too: it names no user).
    public static func named(_ name: String) -> UserAccount? {
        guard !name.isEmpty, let found = try? Sys.user(named: name) else { return nil }
        return UserAccount(name: name, uid: found.uid, gid: found.gid, home: found.home)
    }

    /// The user this process runs as (its effective uid).
    public static var currentUID: UInt32 { Sys.effectiveUserID() }
}
