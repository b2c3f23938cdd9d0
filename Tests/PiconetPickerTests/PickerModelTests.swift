import PiconetPicker
import Testing

/// A device offering `services` (default: echo) on board none, role node.
func device(_ name: String, _ services: [String] = ["echo"], board: String? = "none", role: String? = "node") -> PickerDevice {
    PickerDevice(name: name, board: board, role: role, services: services)
}

@Suite struct PickerModelTests {
    @Test func devicesAreListedInNameOrderAndTheFirstFoundIsSelected() {
        var m = PickerModel(filter: PickerFilter(service: "echo"))
        #expect(m.selectedName == nil && m.selectedIndex == nil)
        let r1 = m.found(device("node-2"))
        #expect(r1)
        let r2 = m.found(device("node-1"))
        #expect(r2)
        let r3 = m.found(device("node-3"))
        #expect(r3)
        #expect(m.devices.map(\.name) == ["node-1", "node-2", "node-3"])
        #expect(m.selectedName == "node-2", "the first device found, wherever others sort")
        #expect(m.selectedIndex == 1)
    }

    @Test func theFilterKeepsOutWhatDoesNotOfferTheServiceOrIsOnAnotherBoardOrRole() {
        var m = PickerModel(filter: PickerFilter(service: "echo", board: "pi5", role: "node"))
        let r4 = m.found(device("other-service", ["uname"], board: "pi5"))
        #expect(!r4)
        let r5 = m.found(device("other-board", board: "pi4"))
        #expect(!r5)
        let r6 = m.found(device("other-role", board: "pi5", role: "hub"))
        #expect(!r6)
        let r7 = m.found(device("no-board", board: nil))
        #expect(!r7, "a record without board never matches --board")
        let r8 = m.found(device("match", ["uname", "echo"], board: "pi5"))
        #expect(r8)
        #expect(m.devices.map(\.name) == ["match"])
        let any = PickerFilter(service: "echo")
        #expect(any.admits(device("x", board: nil, role: nil)), "no --board, no --role: the service alone")
        #expect(!any.admits(PickerDevice(name: "y", board: nil, role: nil, servicesText: "echoes,uname")), "whole names only")
        #expect(any.admits(PickerDevice(name: "z", board: nil, role: nil, servicesText: "uname,echo")))
    }

    @Test func theSelectionStaysOnItsDeviceWhenOthersAppearOrVanishAboveIt() {
        var m = PickerModel(filter: PickerFilter(service: "echo"))
        m.found(device("node-5"))
        m.found(device("node-7"))
        m.press(.down)
        #expect(m.selectedName == "node-7" && m.selectedIndex == 1)
        m.found(device("node-1"))
        m.found(device("node-3"))
        #expect(m.selectedName == "node-7" && m.selectedIndex == 3, "two rows above: the row moved, not the selection")
        m.lost("node-1")
        m.lost("node-5")
        #expect(m.selectedName == "node-7" && m.selectedIndex == 1)
        m.found(device("node-9"))
        #expect(m.selectedName == "node-7", "one below: no change either")
    }

    @Test func whenTheSelectedDeviceGoesTheOneTakingItsRowIsSelected() {
        var m = PickerModel(filter: PickerFilter(service: "echo"))
        for n in ["a", "b", "c"] { m.found(device(n)) }
        m.press(.down)
        #expect(m.selectedName == "b")
        m.lost("b")
        #expect(m.selectedName == "c", "the next one moved up into its row")
        m.lost("c")
        #expect(m.selectedName == "a", "it was last: the new last")
        m.lost("a")
        #expect(m.selectedName == nil && m.selectedIndex == nil)
        m.found(device("d"))
        #expect(m.selectedName == "d", "an empty list selects the next one found")
    }

    @Test func anUpdateThatDropsTheServiceRemovesTheDeviceAndOneThatAddsItLists() {
        var m = PickerModel(filter: PickerFilter(service: "echo"))
        m.found(device("a", ["uname"]))
        #expect(m.devices.isEmpty)
        let r9 = m.found(device("a", ["uname", "echo"]))
        #expect(r9, "its record now offers echo")
        let r10 = m.found(device("a", ["uname", "echo"]))
        #expect(!r10, "the same record again changes nothing")
        let r11 = m.found(device("a", ["echo"], board: "pi5"))
        #expect(r11, "a changed board is shown")
        #expect(m.devices == [device("a", ["echo"], board: "pi5")])
        let r12 = m.found(device("a", ["uname"]))
        #expect(r12)
        #expect(m.devices.isEmpty && m.selectedName == nil)
        let r13 = m.lost("a")
        #expect(!r13, "already gone")
    }

    @Test func keysMoveWithinTheEndsAndPickOrCancelOnce() {
        var m = PickerModel(filter: PickerFilter(service: "echo"))
        let r14 = m.press(.enter)
        #expect(!r14, "nothing to pick yet")
        let r15 = m.press(.down)
        #expect(!r15)
        for n in ["a", "b", "c"] { m.found(device(n)) }
        let r16 = m.press(.up)
        #expect(!r16, "already first")
        let r17 = m.press(.end)
        #expect(r17 && m.selectedName == "c")
        let r18 = m.press(.down)
        #expect(!r18, "already last")
        let r19 = m.press(.home)
        #expect(r19 && m.selectedName == "a")
        let r20 = m.press(.down)
        let r21 = m.press(.enter)
        #expect(r20 && r21)
        #expect(m.outcome == .picked(device("b")))
        let r22 = m.press(.cancel)
        let r23 = m.found(device("d"))
        let r24 = m.lost("a")
        #expect(!r22 && !r23 && !r24, "nothing changes after the outcome")
        #expect(m.outcome == .picked(device("b")))
    }

    @Test func aNumberPicksItsRowAndANumberPastTheListIsIgnored() {
        var m = PickerModel(filter: PickerFilter(service: "echo"))
        for n in ["a", "b"] { m.found(device(n)) }
        let r25 = m.press(.number(3))
        #expect(!r25)
        #expect(m.outcome == nil)
        let r26 = m.press(.number(2))
        #expect(r26)
        #expect(m.outcome == .picked(device("b")))
        var c = PickerModel(filter: PickerFilter(service: "echo"))
        let r27 = c.press(.cancel)
        #expect(r27 && c.outcome == .cancelled, "cancel works on an empty list too")
    }

    @Test func namesAreKeysByteForByte() {
        var m = PickerModel(filter: PickerFilter(service: "echo"))
        m.found(device("caf\u{E9}"))
        m.found(device("cafe\u{301}"))
        #expect(m.devices.count == 2, "two spellings on the wire are two devices, though Unicode calls them equal")
    }

    @Test func theListIsBoundedAndCountsWhatItRefuses() {
        var m = PickerModel(filter: PickerFilter(service: "echo"), capacity: 2)
        m.found(device("a"))
        m.found(device("b"))
        let r28 = m.found(device("c"))
        #expect(!r28)
        let r29 = m.found(device("a", board: "pi5"))
        #expect(r29, "an update of a listed one still goes in")
        #expect(m.devices.count == 2 && m.refused == 1)
        m.lost("b")
        let r30 = m.found(device("c"))
        #expect(r30, "room again")
    }
}
