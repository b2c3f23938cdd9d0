// swift-tools-version: 6.0
// Piconet: a Swift peer stack for Linux single-board computers.
//
// One target per layer of DESIGN.md; dependencies point down only:
//
//   executables:  piconet-hub   piconet-node   piconet (CLI)   [piconet-fuzz: PICONET_FUZZ=1]
//                 PiconetCLI (ArgumentParser runner: one usage-error convention)
//                        |
//   runtime:      PiconetRuntime (wiring, SessionHost, config; picks the OS adapters)
//                 PiconetGroupRuntime (GroupNode over PeerSession, key proof, journal; CLI and hub)
//                   |                                        |
//   features:     PiconetHub  PiconetSensors  PiconetFleet (pure; Fleet: MQTT payloads, hub only)
//                 PiconetNodeCore (pure: the node's consent, sample queues, summaries; over Sensors, Session, Indicators)
//                 PiconetGroup (pure: the Raft-replicated group log; Wire + Loop only)
//                 PiconetUpdate (pure: board updates, their checks and A/B slot state)
//                 PiconetAppServices (pure: a service program's life per stream, start admission)
//                 PiconetPicker (pure: `piconet pick`'s device list, keys and lines; CLI only)
//                                                          OS edge (the only code that
//   peer core:    PiconetDiscovery  PiconetSession         touches the kernel):
//                 (pure state machines)                    PiconetPosix (epoll, sockets,
//                   |                                       syscall layer in System/)
//                   |                                      PiconetLights (libgpiod)
//                   |                                      PiconetMQTT (libmosquitto; hub only)
//                   |                                      C modules: CPiconetPosix CBlueZ
//                   |                                      CGPIOD CSodium CMath CMosquitto
//                   |                                        |
//   base:         PiconetWire  PiconetLoop  (pure: bytes, time, loop API; both columns use them)
//                 (PiconetWire uses PiconetLoop's address types: mgmt packets name peers)
//
// Two modes from one source (as smoltcp builds with and without `std`):
// - ordinary Swift (the default): every target, tests, hub, CLI;
// - PICONET_EMBEDDED=1: only piconet-node's module graph, in Embedded Swift
//   (no Swift runtime, no reflection metadata, whole-module), linked against libc only
//   (CNodeLibm: the seven libm functions it calls, built in; no .eh_frame).
//   Use its own scratch folder: `PICONET_EMBEDDED=1 swift build -c release
//   --product piconet-node --scratch-path .build-embedded` (scripts/build-release does).
import PackageDescription

let swift6: [SwiftSetting] = [.swiftLanguageMode(.v6)]

// Release executables on Linux are linked with lld: no exported dynamic symbol
// table (nothing dlopens these programs; SwiftPM's default --export-dynamic put
// ~0.9 MB of .dynsym/.dynstr/.gnu.hash into a static binary) and packed
// relative relocations (DT_RELR, glibc >= 2.36 as on Debian 12 / Raspberry Pi OS
// bookworm: ~1 MB less .rela.dyn). Measured on piconet-node, stripped, static
// stdlib: 20.3 MB -> 17.6 MB. scripts/bench.d/65-hub-footprint reports the hub's size.
let smallBinary: [LinkerSetting] = [
    .unsafeFlags(["-use-ld=lld", "-Xlinker", "--no-export-dynamic", "-Xlinker", "-z", "-Xlinker", "pack-relative-relocs"],
                 .when(platforms: [.linux], configuration: .release)),
]

let package = Package(
    name: "Piconet",
    platforms: [.macOS(.v15)],
    products: [
        .library(name: "PiconetWire", targets: ["PiconetWire"]),
        .library(name: "PiconetLoop", targets: ["PiconetLoop"]),
        .library(name: "PiconetIndicators", targets: ["PiconetIndicators"]),
        .library(name: "PiconetLights", targets: ["PiconetLights"]),
        .library(name: "PiconetPosix", targets: ["PiconetPosix"]),
        .library(name: "PiconetDiscovery", targets: ["PiconetDiscovery"]),
        .library(name: "PiconetSession", targets: ["PiconetSession"]),
        .library(name: "PiconetSensors", targets: ["PiconetSensors"]),
        .library(name: "PiconetRuntime", targets: ["PiconetRuntime"]),
        .executable(name: "piconet", targets: ["piconet"]),
        .executable(name: "piconet-node", targets: ["piconet-node"]),
        .executable(name: "piconet-hub", targets: ["piconet-hub"]),
    ],
    dependencies: [
        .package(url: "https://github.com/apple/swift-argument-parser.git", from: "1.8.2"),
        .package(url: "https://github.com/groue/GRDB.swift.git", from: "7.10.0"),
        .package(url: "https://github.com/hummingbird-project/hummingbird.git", from: "2.28.1"),
        .package(url: "https://github.com/swift-server/swift-prometheus.git", from: "2.4.1"),
        .package(url: "https://github.com/apple/swift-log.git", from: "1.16.2"),
        // Already in the graph through Hummingbird; named for the hub server tests' HTTP client.
        .package(url: "https://github.com/apple/swift-nio.git", from: "2.101.3"),
    ],
    targets: [
        // OS edge: C libraries.
        .systemLibrary(name: "CBlueZ", path: "Sources/CBlueZ",
                       providers: [.apt(["libbluetooth-dev"])]),
        .systemLibrary(name: "CGPIOD", path: "Sources/CGPIOD",
                       providers: [.apt(["libgpiod-dev"])]),
        // Noise's X25519, ChaCha20-Poly1305, SHA-256/HMAC: a C library the Embedded node can link.
        .systemLibrary(name: "CSodium", path: "Sources/CSodium",
                       providers: [.apt(["libsodium-dev"])]),
        // libm's sin/cos/log for the simulated wearable (pure: no I/O), in both modes.
        .systemLibrary(name: "CMath", path: "Sources/CMath"),
        // The hub's MQTT export: the Eclipse Mosquitto client library (hub only, never the node).
        .systemLibrary(name: "CMosquitto", path: "Sources/CMosquitto", pkgConfig: "libmosquitto",
                       providers: [.apt(["libmosquitto-dev"])]),

        // Base (pure).
        .target(name: "PiconetWire", dependencies: ["PiconetLoop"], swiftSettings: swift6),
        .target(name: "PiconetLoop", swiftSettings: swift6),

        // OS edge.
        // libc and the Linux headers Glibc does not cover (epoll, eventfd, timerfd, signalfd),
        // errno and CMSG helpers: the OS edge's one libc import in both modes (no Glibc in Embedded).
        .systemLibrary(name: "CPiconetPosix", path: "Sources/CPiconetPosix"),
        .target(name: "PiconetPosix", dependencies: ["PiconetLoop", "PiconetWire", "CBlueZ", "CPiconetPosix"],
                swiftSettings: swift6),
        // Test/bench helper: an EpollLoop that exits 0 on SIGTERM, UDP echo/ping for scripts/bench;
        // udp-oneway on a session socket's options (UDPSessionHost.socketOptions), hence PiconetRuntime.
        .executableTarget(name: "piconet-loop-probe", dependencies: ["PiconetPosix", "PiconetRuntime"], swiftSettings: swift6),
        // Bench helper: L2CAP sink/source/echo/ping through L2CAPChannel for scripts/bench.d/70-l2cap (in the VM).
        .executableTarget(name: "piconet-l2cap-probe", dependencies: ["PiconetPosix"], swiftSettings: swift6),
        // VM stage helper: a Piconet session (invitation, Noise, reliable + unreliable) over L2CAP (BluetoothSessionHost).
        .executableTarget(name: "piconet-l2cap-session", dependencies: ["PiconetRuntime"], swiftSettings: swift6),
        // N simulated wearables in one process against one hub (scripts/bench's scale table).
        .executableTarget(name: "piconet-swarm", dependencies: ["PiconetRuntime"], swiftSettings: swift6),
        // LED patterns and button logic (pure state machines), carried out by PiconetLights.
        .target(name: "PiconetIndicators", dependencies: ["PiconetLoop"], swiftSettings: swift6),
        // PiconetPosix: its syscall layer reads directories (the chip list), one reader for the OS edge.
        .target(name: "PiconetLights", dependencies: ["PiconetLoop", "PiconetIndicators", "PiconetPosix", "CGPIOD", "CPiconetPosix"],
                swiftSettings: swift6),

        // Peer core (pure).
        .target(name: "PiconetDiscovery", dependencies: ["PiconetWire", "PiconetLoop"], swiftSettings: swift6),
        .target(name: "PiconetSession",
                dependencies: ["PiconetWire", "PiconetLoop", "CSodium"],
                swiftSettings: swift6),

        // Features (pure).
        .target(name: "PiconetSensors",
                dependencies: ["PiconetWire", "PiconetLoop", "CMath"],
                swiftSettings: swift6),
        .target(name: "PiconetHub", dependencies: ["PiconetSensors", "PiconetWire", "PiconetLoop", "PiconetDiscovery", "PiconetSession", "PiconetUpdate"],
                swiftSettings: swift6),
        // The node's decisions (consent, sample queues, batches, summaries, tallies) as one machine
        // piconet-node carries out: above Sensors, which knows nothing of invitations or buttons.
        .target(name: "PiconetNodeCore",
                dependencies: ["PiconetSensors", "PiconetSession", "PiconetIndicators", "PiconetLoop", "PiconetWire"],
                swiftSettings: swift6),

        // Group sessions: a Raft-replicated log every member applies in one order (pure; needs
        // only Wire and Loop, so it can serve hubs and, later, terminals over any transport).
        .target(name: "PiconetGroup", dependencies: ["PiconetWire", "PiconetLoop"], swiftSettings: swift6),
        // Local push: the wire format, a subscriber's durable queue (server) and the receiver
        // (client), pure; in the node's graph too, since boards are push clients.
        .target(name: "PiconetPush", dependencies: ["PiconetWire", "PiconetLoop"], swiftSettings: swift6),

        // Application services: a declared program's life for one stream (idle stop, grace, close
        // reason) and the admission that paces starts (pure; the node links it, so Embedded too).
        .target(name: "PiconetAppServices", dependencies: ["PiconetLoop", "PiconetSession"], swiftSettings: swift6),

        // The application-services picker (`piconet pick`): devices, selection, key bytes, the lines
        // drawn (pure; CLI only: not in the node's graph, the node never picks).
        .target(name: "PiconetPicker", dependencies: ["PiconetWire", "PiconetLoop"], swiftSettings: swift6),

        // Board updates: the package a board receives, its checks, and the A/B slot state that
        // decides which binary starts (pure; the node links it, so Embedded too).
        .target(name: "PiconetUpdate", dependencies: ["PiconetWire", "PiconetLoop", "PiconetSession"], swiftSettings: swift6),

        // The MQTT fleet export's topics, payloads and Home Assistant discovery (pure).
        .target(name: "PiconetFleet", dependencies: ["PiconetWire"], swiftSettings: swift6),
        // OS edge for MQTT (hub only): libmosquitto driven by the epoll loop.
        .target(name: "PiconetMQTT", dependencies: ["PiconetPosix", "PiconetLoop", "CMosquitto"], swiftSettings: swift6),

        // Hub history, MQTT outbox and local push queues (runtime level: SQLite in WAL mode through GRDB; files through
        // PiconetPosix, no Foundation import).
        .target(name: "PiconetStore",
                dependencies: ["PiconetSensors", "PiconetHub", "PiconetPush", "PiconetPosix", .product(name: "GRDB", package: "GRDB.swift")],
                swiftSettings: swift6),

        // Runtime: wiring and OS adapters.
        .target(name: "PiconetRuntime",
                dependencies: ["PiconetPosix", "PiconetLights", "PiconetIndicators", "PiconetDiscovery", "PiconetSession",
                               "PiconetSensors", "PiconetUpdate", "PiconetAppServices"],
                swiftSettings: swift6),

        // Group sessions on Piconet sessions (runtime level, CLI only): the driver of a GroupNode
        // over a PeerSession, the group-key proof, the journal and key files.
        .target(name: "PiconetGroupRuntime",
                dependencies: ["PiconetGroup", "PiconetSession", "PiconetPosix", "PiconetLoop", "PiconetWire"],
                swiftSettings: swift6),

        // Hub's HTTP face (runtime level: Hummingbird + Prometheus; only the hub links it).
        .target(name: "PiconetHubServer",
                dependencies: ["PiconetHub", "PiconetWire", .product(name: "Hummingbird", package: "hummingbird"),
                               .product(name: "Prometheus", package: "swift-prometheus"),
                               .product(name: "Logging", package: "swift-log")],
                swiftSettings: swift6),

        // The ArgumentParser runner of the one command-line convention (piconet, piconet-hub).
        .target(name: "PiconetCLI",
                dependencies: ["PiconetRuntime", .product(name: "ArgumentParser", package: "swift-argument-parser")],
                swiftSettings: swift6),

        // Executables.
        .executableTarget(name: "piconet",
                          dependencies: ["PiconetRuntime", "PiconetCLI", "PiconetPush", "PiconetGroup", "PiconetGroupRuntime", "PiconetPicker",
                                         .product(name: "ArgumentParser", package: "swift-argument-parser")],
                          swiftSettings: swift6, linkerSettings: smallBinary),
        // No ArgumentParser in the node: PiconetRuntime's CommandLineSpec keeps ~1.5 MB
        // of FoundationEssentials out of the static binary (16 MB budget).
        .executableTarget(name: "piconet-node", dependencies: ["PiconetRuntime", "PiconetNodeCore"],
                          swiftSettings: swift6, linkerSettings: smallBinary),
        .executableTarget(name: "piconet-hub",
                          dependencies: ["PiconetRuntime", "PiconetCLI", "PiconetHub", "PiconetHubServer", "PiconetStore",
                                         "PiconetFleet", "PiconetMQTT", "PiconetGroup", "PiconetGroupRuntime",
                                         .product(name: "ArgumentParser", package: "swift-argument-parser")],
                          swiftSettings: swift6, linkerSettings: smallBinary),

        // Test helpers shared by every test target (golden bytes, truncation, random bytes, drip-feed).
        .target(name: "PiconetTestSupport", dependencies: ["PiconetWire", "PiconetLoop"], swiftSettings: swift6),

        .testTarget(name: "PiconetWireTests", dependencies: ["PiconetWire", "PiconetTestSupport"], swiftSettings: swift6),
        .testTarget(name: "PiconetLoopTests", dependencies: ["PiconetLoop", "PiconetTestSupport"], swiftSettings: swift6),
        .testTarget(name: "PiconetPosixTests", dependencies: ["PiconetPosix", "PiconetTestSupport", "PiconetDiscovery"], swiftSettings: swift6),
        .testTarget(name: "PiconetDiscoveryTests", dependencies: ["PiconetDiscovery", "PiconetTestSupport"], swiftSettings: swift6),
        .testTarget(name: "PiconetSessionTests", dependencies: ["PiconetSession", "PiconetTestSupport"], swiftSettings: swift6),
        .testTarget(name: "PiconetUpdateTests", dependencies: ["PiconetUpdate", "PiconetSession", "PiconetTestSupport"], swiftSettings: swift6),
        .testTarget(name: "PiconetGroupTests", dependencies: ["PiconetGroup", "PiconetTestSupport"], swiftSettings: swift6),
        .testTarget(name: "PiconetGroupRuntimeTests",
                    dependencies: ["PiconetGroupRuntime", "PiconetGroup", "PiconetSession", "PiconetPosix", "PiconetLoop",
                                   "PiconetTestSupport"], swiftSettings: swift6),
        .testTarget(name: "PiconetAppServicesTests", dependencies: ["PiconetAppServices", "PiconetSession", "PiconetTestSupport"],
                    swiftSettings: swift6),
        .testTarget(name: "PiconetPickerTests", dependencies: ["PiconetPicker", "PiconetLoop", "PiconetWire"], swiftSettings: swift6),
        .testTarget(name: "PiconetPushTests", dependencies: ["PiconetPush", "PiconetTestSupport"], swiftSettings: swift6),
        .testTarget(name: "PiconetSensorsTests", dependencies: ["PiconetSensors", "PiconetTestSupport"], swiftSettings: swift6),
        .testTarget(name: "PiconetNodeCoreTests",
                    dependencies: ["PiconetNodeCore", "PiconetSensors", "PiconetSession", "PiconetIndicators", "PiconetHub", "PiconetTestSupport"],
                    swiftSettings: swift6),
        .testTarget(name: "PiconetHubTests", dependencies: ["PiconetHub", "PiconetSensors", "PiconetDiscovery", "PiconetSession", "PiconetTestSupport"],
                    swiftSettings: swift6),
        .testTarget(name: "PiconetStoreTests", dependencies: ["PiconetStore", "PiconetPush", "PiconetTestSupport",
                                                              .product(name: "GRDB", package: "GRDB.swift")], swiftSettings: swift6),
        // Store crash-test child and hub ingest benchmark (the test finds it beside the test bundle).
        .executableTarget(name: "piconet-store-tool", dependencies: ["PiconetStore", "PiconetHub", "PiconetSensors", "PiconetPosix"],
                          swiftSettings: swift6),
        .testTarget(name: "PiconetHubServerTests",
                    dependencies: ["PiconetHubServer", "PiconetHub", .product(name: "HummingbirdCore", package: "hummingbird"),
                                   .product(name: "Logging", package: "swift-log"),
                                   .product(name: "NIOCore", package: "swift-nio"),
                                   .product(name: "NIOEmbedded", package: "swift-nio"),
                                   .product(name: "NIOHTTP1", package: "swift-nio"),
                                   .product(name: "NIOPosix", package: "swift-nio")],
                    swiftSettings: swift6),
        .testTarget(name: "PiconetLightsTests",
                    dependencies: ["PiconetLights", "PiconetIndicators", "PiconetPosix", "PiconetRuntime", "PiconetTestSupport"],
                    swiftSettings: swift6),
        .testTarget(name: "PiconetIndicatorsTests", dependencies: ["PiconetIndicators", "PiconetTestSupport"], swiftSettings: swift6),
        .testTarget(name: "PiconetFleetTests", dependencies: ["PiconetFleet", "PiconetLoop", "PiconetMQTT", "PiconetPosix", "PiconetWire"],
                    swiftSettings: swift6),
        .testTarget(name: "PiconetRuntimeTests", dependencies: ["PiconetRuntime", "PiconetUpdate"], swiftSettings: swift6),
    ]
)

// PICONET_TEST_TARGETS=A,B,...: only these test targets are declared (the sanitizers stage's
// TSan build, which runs four suites: the others would be compiled instrumented for nothing).
// Empty or unset: all of them.
if let only = Context.environment["PICONET_TEST_TARGETS"], !only.isEmpty {
    let keep = Set(only.split(separator: ",").map(String.init))
    package.targets = package.targets.filter { $0.type != .test || keep.contains($0.name) }
}

// MARK: - Embedded mode (PICONET_EMBEDDED=1): the node's graph only.

/// The targets piconet-node links; each must build in the Embedded Swift subset.
let nodeGraph: Set<String> = [
    "CBlueZ", "CGPIOD", "CSodium", "CMath", "CPiconetPosix",
    "PiconetWire", "PiconetLoop", "PiconetPosix", "PiconetIndicators", "PiconetLights",
    "PiconetDiscovery", "PiconetSession", "PiconetSensors", "PiconetUpdate", "PiconetAppServices", "PiconetNodeCore", "PiconetRuntime",
    "piconet-node",
    // Not linked by the node yet; kept in the graph so the Embedded build checks it.
    "PiconetPush",
]

if Context.environment["PICONET_EMBEDDED"] == "1" {
    // The toolchain's Embedded standard library for the target (x86_64 by default; the
    // aarch64 board build passes its own). Unicode tables: String comparison/normalization.
    let embeddedLib = Context.environment["PICONET_EMBEDDED_LIB"]
        ?? "/opt/swift/usr/lib/swift/embedded/x86_64-unknown-linux-gnu"
    // libsodium and libgpiod linked statically from the -dev packages' archives (the board
    // needs neither installed); the aarch64 build points this at its sysroot.
    let cLibraries = Context.environment["PICONET_EMBEDDED_CLIBS"] ?? "/usr/lib/x86_64-linux-gnu"
    package.dependencies = []
    package.products = [.executable(name: "piconet-node", targets: ["piconet-node"])]
    package.targets = package.targets.filter { nodeGraph.contains($0.name) }
    // The seven libm functions the node calls, compiled in, so the node does not load libm.so
    // (about 380 KiB resident of the 3 MiB idle budget; see Sources/CNodeLibm/libm_subset.c).
    // -fno-builtin: it defines ceil, sin, ... itself; -fno-math-errno: sqrt is the instruction.
    package.targets.append(.target(name: "CNodeLibm", path: "Sources/CNodeLibm",
                                   cSettings: [.unsafeFlags(["-fno-builtin", "-fno-math-errno"])]))
    for target in package.targets where target.type != .system {
        target.swiftSettings = (target.swiftSettings ?? []) + [
            .enableExperimentalFeature("Embedded"),
            .enableExperimentalFeature("Extern"),
            // One section per function: the link's --gc-sections then drops what the node never
            // calls (the libraries' hub- and CLI-only code), which Embedded's specialization multiplies.
            .unsafeFlags(["-wmo", "-Xfrontend", "-function-sections"]),
        ]
    }
    for target in package.targets where target.type == .executable {
        target.dependencies.append("CNodeLibm")
        // No libm (CNodeLibm above); no .eh_frame and no .eh_frame_hdr: Embedded Swift never
        // unwinds (a trap is a trap) and neither do libsodium or libgpiod, so the unwind tables
        // were 75 KB of the binary that nothing reads (scripts/lib/discard-eh-frame.ld).
        target.linkerSettings = (target.linkerSettings ?? []) + [
            .unsafeFlags(["\(embeddedLib)/libswiftUnicodeDataTables.a",
                          "\(cLibraries)/libsodium.a", "\(cLibraries)/libgpiod.a",
                          "-Xlinker", "--gc-sections", "-Xlinker", "--no-eh-frame-hdr",
                          "-Xlinker", "-T", "-Xlinker", "\(Context.packageDirectory)/scripts/lib/discard-eh-frame.ld"]),
        ]
    }
}

// The fuzz targets (scripts/fuzz): only with PICONET_FUZZ=1, so an ordinary build never links a
// program whose `main` hands over to libFuzzer's driver (LLVMFuzzerRunDriver). scripts/fuzz adds
// AddressSanitizer (everywhere) and libFuzzer (no_main) in its own scratch path (outside the checkout).
// Coverage instrumentation only in this package's Swift modules: libFuzzer clears and scans every
// counter of the binary on every execution, and with SwiftNIO, Hummingbird and GRDB instrumented
// too that was 568,000 counters, most of the cost of a fast target's execution (the decoders
// under test run no dependency code; the http target's URI parser is Hummingbird's, fuzzed but
// without coverage feedback of its own).
if Context.environment["PICONET_FUZZ"] == "1" {
    package.targets.append(
        .executableTarget(name: "piconet-fuzz",
                          dependencies: ["PiconetWire", "PiconetLoop", "PiconetDiscovery", "PiconetSession", "PiconetSensors",
                                         "PiconetHub", "PiconetRuntime", "PiconetHubServer", "PiconetGroup", "PiconetPush", "PiconetUpdate",
                                         .product(name: "HummingbirdCore", package: "hummingbird")],
                          swiftSettings: swift6))
    for target in package.targets where target.type == .regular || target.type == .executable {
        target.swiftSettings = (target.swiftSettings ?? [])
            + [.unsafeFlags(["-sanitize-coverage=edge,inline-8bit-counters,pc-table,trace-cmp"])]
    }
}
