import PiconetLoop
import Testing

/// `OwnerHandle` stands in for `weak` (Embedded Swift has none): a callback that outlives its
/// owner must see nil, and holding the handle must not keep the owner alive.
@Suite struct OwnerHandleTests {
    final class Owner {
        lazy var weakSelf = OwnerHandle(self)
        var fired = 0
        deinit { weakSelf.sever() }
    }

    @Test func ownerIsNilAfterDeinitAndTheHandleDoesNotRetainIt() {
        var owner: Owner? = Owner()
        let handle = owner!.weakSelf
        #expect(handle.owner === owner)
        owner = nil
        #expect(handle.owner == nil)
    }

    @Test func aTimerCallbackAfterTheOwnerIsGoneDoesNothing() {
        let loop = VirtualLoop()
        var owner: Owner? = Owner()
        let handle = owner!.weakSelf
        loop.schedule(after: .seconds(1)) { [handle] in handle.owner?.fired += 1 }
        loop.schedule(after: .seconds(1)) { [handle] in #expect(handle.owner == nil) }
        owner = nil
        loop.advance(by: .seconds(2))
        #expect(handle.owner == nil)
    }

    @Test func droppingARepeatingTimerStopsIt() {
        let loop = VirtualLoop()
        var count = 0
        var timer: RepeatingTimer? = loop.scheduleRepeating(every: .seconds(1)) { count += 1 }
        loop.advance(by: .milliseconds(2500))
        #expect(count == 2)
        #expect(timer != nil)
        timer = nil
        loop.advance(by: .seconds(5))
        #expect(count == 2)
    }

    @Test func anEndpointOutlivingItsNetworkIsClosed() throws {
        let loop = VirtualLoop()
        var network: InMemoryNetwork? = InMemoryNetwork(loop: loop, seed: 1)
        let a = try #require(try network?.bind(EndpointAddress.ipv4(10, 0, 0, 1, port: 1)))
        network = nil
        #expect(throws: TransportError.closed) { try a.send([1], to: .ipv4(10, 0, 0, 2, port: 1)) }
    }
}
