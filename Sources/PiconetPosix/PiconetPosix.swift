// PiconetPosix — the OS edge (see Package.swift for the layer picture).
//
//   features / peer core (pure)   ← get bytes and `now`, return actions
//   PiconetLoop (EventLoop API)   ← what they program against
//   PiconetPosix (this module)    ← EpollLoop, UDP/TCP (and L2CAP/HCI) sockets, System/
//   Linux kernel                  ← epoll, timerfd, eventfd, signalfd, sockets
//
// Only this module (and PiconetLights' GPIOChip.swift) calls libc, and inside it only the
// syscall layer in System/ does (LayeringTests checks).
//
// A typical process (an mDNS responder on one interface):
//
//     let loop = try EpollLoop()
//     try loop.onSignal([.interrupt, .terminate]) { _ in loop.stop() }
//     let wlan = try NetworkInterfaces.list().first { $0.isUp && $0.supportsMulticast && !$0.ipv4.isEmpty }
//     let udp = try UDPEndpoint(loop: loop, bindTo: .ipv4(host: 0, port: 5353),          // 0.0.0.0:5353
//                               options: .init(reuseAddress: true, reusePort: true))     // beside Avahi
//     try udp.joinMulticastGroup(.mdnsGroup, interfaceIndex: wlan!.index)
//     try udp.setMulticastInterface(index: wlan!.index)
//     try udp.setMulticastTTL(255)
//     udp.onDatagram = { d in /* d.interfaceIndex, d.destination (group or unicast), d.source */ }
//     try loop.run()                                                   // until SIGINT/SIGTERM
//     udp.close()
//
// Other threads talk to a loop only through `loop.remote` (`execute`, `stop`).
