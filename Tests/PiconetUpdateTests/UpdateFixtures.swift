import PiconetSession
import PiconetUpdate
import PiconetTestSupport
import Testing

/// Fixtures written by minisign 0.11 (Debian 12): `minisign -G -W`, then
/// `minisign -S -t "piconet-node 1.2.3 x86_64" -m x86` and the like, over two 3,000-byte files
/// that start as ELF executables would (x86_64 and aarch64) and continue with a fixed pattern.
enum UpdateFixtures {
    static func elf(machine: UInt16) -> [UInt8] {
        var h: [UInt8] = [0x7F, 0x45, 0x4C, 0x46, 2, 1, 1] + [UInt8](repeating: 0, count: 9)
        h += [3, 0, UInt8(machine & 0xFF), UInt8(machine >> 8)]
        return h + (0..<(3000 - h.count)).map { UInt8(truncatingIfNeeded: $0 * 13 + 5) }
    }
    static let x86 = elf(machine: 62)
    static let arm = elf(machine: 183)
    static let publicKey = """
        untrusted comment: minisign public key 1CDFF877FDB78C3F
        RWQ/jLf9d/jfHNt1dM5E/I3UW+SOm3rlGWeXcTbBP3yFhAoiN82l2j94
        """
    static let otherKey = """
        untrusted comment: minisign public key 51B8B6A053E89D5C
        RWRcnehToLa4US7rwJhR684jZFY26z37gOMu9qBBx3ViBI7Mcc5ZQGtk
        """
    static let x86v123 = """
        untrusted comment: signature from minisign secret key
        RUQ/jLf9d/jfHPN6rIBKrq5FvxGUTH5LzHsKNRbwK5WDVVEGd5iLp7mqHOKdFmyCueoC5s5KQ37KlbnYiGMVsArrqVQvo26BdAI=
        trusted comment: piconet-node 1.2.3 x86_64
        9awOv6Up9uvrOSdj7mfmGR84rAtA7GTcTwslVrBnkhzcfTeh5rh4m9T8g4iF5oOti/KCL5eW1uLfMU0p6J99CA==
        """
    static let x86v010 = """
        untrusted comment: signature from minisign secret key
        RUQ/jLf9d/jfHPN6rIBKrq5FvxGUTH5LzHsKNRbwK5WDVVEGd5iLp7mqHOKdFmyCueoC5s5KQ37KlbnYiGMVsArrqVQvo26BdAI=
        trusted comment: piconet-node 0.1.0 x86_64
        IKJka7S7bEasPo0SR7R21uxbsYGmsHmqijhjJZJrpNrJ/dKP0pCsAxAFAK6wRBId18qeyqfS+KLeLRYelDl3AA==
        """
    static let x86NoVersion = """
        untrusted comment: signature from minisign secret key
        RUQ/jLf9d/jfHPN6rIBKrq5FvxGUTH5LzHsKNRbwK5WDVVEGd5iLp7mqHOKdFmyCueoC5s5KQ37KlbnYiGMVsArrqVQvo26BdAI=
        trusted comment: a release
        1b+Yh8NH7KQ55f/ULQpJmoZ4wPAkWM9yzmhwlsFv2F0MmcurkwZz4ksIV+NArXT09QCDhGYwJ1GhB7ngLi4KAA==
        """
    static let armv123 = """
        untrusted comment: signature from minisign secret key
        RUQ/jLf9d/jfHGcE5XBSTN8gkz7aRp3XaiZXOIUJa49Ln/lsz1WQjaisDG/c8KBrdhYzUrzwVZGaFGiPDJmH3KoS5eesensMGAc=
        trusted comment: piconet-node 1.2.3 aarch64
        T5sMQS+B/dmBO/z1p1kj5f7vP9czyQBxjM257xLTkKyruGJoOyBK9zOVhcakBykaW0Ame3PbCnB/bwHO8Ue2AQ==
        """
    static let x86ByOther = """
        untrusted comment: signature from minisign secret key
        RURcnehToLa4UZd9mXQm808n+JPQDcHDIhQLA9G1KFz2Gj/eM0QwXpNamRZVIDLk+M3MCXox72EAMOseT5eIbg0dyEXfgjAYFAc=
        trusted comment: piconet-node 1.2.3 x86_64
        AFvuqnHoRq+lTJ/qitLQGdRPwokJ9SXOZn5WMh3qcyk0raJb6ust2rz2kGeMLOXTAexrusSdh0RXMrS1K31nCQ==
        """
}
