// PiconetSession — peer core: invitations, Noise XX, reliable/unreliable channels.
//
//   executables / runtime      PeerSession over a UDP / TCP / L2CAP endpoint
//          |
//   PiconetSession   PeerSession (driver) → SessionMachine (pure state machine: API, inputs)
//                    ├─ SessionPacket / SealedMessage  (datagrams parsed once at the edge)
//                    ├─ SessionHandshake → HandshakeAdmission (token buckets, cookies)
//                    │    └─ NoiseHandshake / CipherState  (Noise_XX_25519_ChaChaPoly_SHA256)
//                    │         └─ Sodium / SecretBytes     (libsodium through CSodium: the only C calls)
//                    ├─ SessionInvitations (decisions, crossings, establish / resume)
//                    ├─ SessionChannels → RecordLayer (seal/open: AEAD, rekey, ReplayWindow)
//                    │    └─ ReliableSender / ReliableReceiver
//                    ├─ SessionTimers (retries, expiries, keep-alive, lost, nextDeadline)
//                    ├─ LinkTable (links by index, by peer, by origin)
//                    ├─ SessionFrames (wire types 0x01–0x08)
//                    └─ ResourceSender / ResourceReceiver (files over a stream, resumed from the last
//                         verified chunk) → ResourceFrame, ResourceStore, ResourceSource
//          |
//   PiconetWire (bytes)   PiconetLoop (time, endpoints)
//
// Pure: no Glibc, no Foundation; C only for libsodium, which builds in Embedded mode too.
// Time comes in as `Instant`; the driver arms one loop timer at `SessionMachine.nextDeadline`.
