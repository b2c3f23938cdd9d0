import Glibc
import PiconetPosix
import PiconetRuntime
import Testing

/// Config files: keys are the long flag names, old camelCase keys are aliases, typos get
/// "did you mean", another binary's keys are named as such, the path is printed once.
@Suite struct ConfigFileTests {
    let keys = ConfigKeys(binary: "piconet-node", keys: ["interface", "boards-dir", "motion-hz", "name"],
                          aliases: ["interfaces": "interface", "boardsDirectory": "boards-dir", "motionHz": "motion-hz"],
                          elsewhere: ["http": "piconet-hub"])

    /// Writes `text` to a fresh file, loads it, and removes the file whatever happens.
    func load(_ text: String) throws(ConfigFile.Failure) -> ConfigFile {
        let path = "/tmp/piconet-config-test-\(getpid())-\(UInt32.random(in: 0...UInt32.max)).json"
        try? SecretFile.write(path, Array(text.utf8))
        defer { unlink(path) }
        do { return try ConfigFile.load(path, keys: keys) } catch {
            throw ConfigFile.Failure(path: "CONFIG", key: error.key, why: error.why.replacingPath(path), fix: error.fix)
        }
    }

    @Test func keysAndTheirOldSpellings() throws {
        let new = try load(#"{"interface": ["lo"], "boards-dir": "B", "motion-hz": 25.5}"#)
        #expect(try new.strings("interface") == ["lo"])
        #expect(try new.string("boards-dir") == "B")
        #expect(try new.number("motion-hz", in: 1...200) == 25.5)
        let old = try load(#"{"interfaces": "wlan0", "boardsDirectory": "/etc/piconet/boards", "motionHz": 50}"#)
        #expect(try old.strings("interface") == ["wlan0"])
        #expect(try old.string("boards-dir") == "/etc/piconet/boards")
        #expect(try old.number("motion-hz", in: 1...200) == 50)
    }

    @Test func typoGetsTheClosestKey() {
        #expect(throws: ConfigFile.Failure.self) { try load(#"{"interfce": ["lo"]}"#) }
        do { _ = try load(#"{"interfce": ["lo"]}"#) } catch {
            #expect(error.description == "CONFIG: key 'interfce': unknown key (did you mean 'interface'?)")
        }
        do { _ = try load(#"{"boards_directory": "x"}"#) } catch {
            #expect(error.fix == "did you mean 'boards-dir'?", "an alias suggests the key it stands for")
        }
        do { _ = try load(#"{"zzzzzz": 1}"#) } catch {
            #expect(error.fix?.hasPrefix("known keys: boards-dir, interface") == true)
        }
    }

    @Test func anotherBinarysKeyIsNamedAsSuch() {
        do { _ = try load(#"{"http": "127.0.0.1:8080"}"#); Issue.record("accepted a hub key") } catch {
            #expect(error.description.contains("'http': is a piconet-hub setting, not a piconet-node one"))
        }
    }

    @Test func aKeyAndItsAliasTogetherAreRefused() {
        do { _ = try load(#"{"interface": ["lo"], "interfaces": ["eth0"]}"#); Issue.record("accepted both") } catch {
            #expect(error.why.contains("the same setting as 'interface'"))
        }
    }

    @Test func rangesAndThePathOnce() throws {
        let c = try load(#"{"motion-hz": 500, "name": 3}"#)
        #expect(throws: ConfigFile.Failure.self) { try c.number("motion-hz", in: 1...200) }
        #expect(throws: ConfigFile.Failure.self) { try c.string("name") }
        let missing = "/tmp/piconet-absent-\(getpid()).json"
        do { _ = try ConfigFile.load(missing, keys: keys); Issue.record("loaded a missing file") } catch {
            var count = 0
            var rest = Substring(error.description)
            while let r = rest.firstRange(of: missing) { count += 1; rest = rest[r.upperBound...] }
            #expect(count == 1, "\(error.description)")
        }
    }
}

private extension String {
    func replacingPath(_ path: String) -> String {
        guard let r = firstRange(of: path) else { return self }
        var s = self
        s.replaceSubrange(r, with: "CONFIG")
        return s
    }
}
