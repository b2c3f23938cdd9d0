import PiconetPicker
import Testing

@Suite struct PickerRenderingTests {
    static let hint = "↑/↓ or j/k move, Enter or 1-9 picks, q or Esc cancels"

    @Test func anEmptyListSaysItIsBrowsing() {
        let m = PickerModel(filter: PickerFilter(service: "echo", board: "pi5"))
        #expect(m.render(width: 80, height: 24) == ["Devices offering \"echo\" (board pi5): none yet, browsing…", Self.hint])
    }

    @Test func rowsAreNumberedAlignedAndMarkTheSelection() {
        var m = PickerModel(filter: PickerFilter(service: "echo"))
        m.found(device("node-1"))
        m.found(device("kitchen-pi", board: "pi5", role: nil))
        m.press(.down)
        #expect(m.render(width: 80, height: 24) == [
            "Devices offering \"echo\": 2 devices",
            "  1  kitchen-pi  board pi5  role -",
            "> 2  node-1      board none  role node",
            Self.hint,
        ])
    }

    @Test func namesFromTheNetworkAreEscaped() {
        var m = PickerModel(filter: PickerFilter(service: "echo"))
        m.found(device("evil\u{1B}[2Jname\r", board: "b\u{7}"))
        let lines = m.render(width: 200, height: 24)
        #expect(lines[1] == "> 1  evil\\e[2Jname\\r  board b\\x07  role node")
        #expect(!lines.joined().unicodeScalars.contains { $0.value < 0x20 || $0.value == 0x7F }, "no control character reaches the terminal")
    }

    @Test func everyLineFitsTheWidth() {
        var m = PickerModel(filter: PickerFilter(service: "echo"))
        m.found(device(String(repeating: "n", count: 70)))
        for width in [8, 20, 40, 79] {
            let lines = m.render(width: width, height: 24)
            #expect(lines.allSatisfy { $0.count <= width }, "width \(width): \(lines)")
            #expect(lines[1].hasSuffix("…"), "cut lines say so")
        }
        #expect(m.render(width: 200, height: 24)[1].contains(String(repeating: "n", count: 70)), "a wide terminal shows it whole")
    }

    @Test func aLongListShowsAWindowThatHoldsTheSelection() {
        var m = PickerModel(filter: PickerFilter(service: "echo"))
        for i in 10..<30 { m.found(device("node-\(i)")) }   // node-10 ... node-29, node-10 selected
        var lines = m.render(width: 80, height: 7)          // 5 rows for devices
        #expect(lines.count == 7)
        #expect(lines[0] == "Devices offering \"echo\": 20 devices, 1-5 shown")
        #expect(lines[1].hasPrefix(">  1  node-10"))
        for _ in 0..<12 { m.press(.down) }                   // node-22, row 13
        lines = m.render(width: 80, height: 7)
        #expect(lines[0].hasSuffix("11-15 shown"))
        #expect(lines[3].hasPrefix("> 13  node-22"), "the selection in the middle of the window")
        m.press(.end)
        lines = m.render(width: 80, height: 7)
        #expect(lines[0].hasSuffix("16-20 shown") && lines[5].hasPrefix("> 20  node-29"))
        #expect(m.render(width: 80, height: 1).count == 3, "at least one row, whatever the height")
    }

    @Test func aFullListSaysHowManyItLeftOut() {
        var m = PickerModel(filter: PickerFilter(service: "echo"), capacity: 1)
        m.found(device("a"))
        m.found(device("b"))
        #expect(m.render(width: 80, height: 24)[0] == "Devices offering \"echo\": 1 device (1 more not listed: list full)")
    }
}
