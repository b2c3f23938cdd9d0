import PiconetPicker
import PiconetWire
import Testing

@Suite struct PickerListTests {
    @Test func aLinePerDeviceAsFoundNumberedInThatOrderAndKeptWhenItComesBack() {
        var l = PickerList(filter: PickerFilter(service: "echo"))
        let r1 = l.found(device("node-2"))
        #expect(r1 == .found(number: 1, device("node-2")))
        let r2 = l.found(device("node-1"))
        #expect(r2 == .found(number: 2, device("node-1")))
        let r3 = l.found(device("node-1"))
        #expect(r3 == nil, "an update of a listed device prints nothing")
        let r4 = l.found(device("other", ["uname"]))
        #expect(r4 == nil)
        let r5 = l.lost("node-2")
        #expect(r5 == .lost(number: 1, name: "node-2"))
        let r6 = l.lost("node-2")
        #expect(r6 == nil)
        #expect(l.choice(1) == .gone(name: "node-2"))
        #expect(l.choice(2) == .device(device("node-1")))
        #expect(l.choice(3) == .notYet)
        let r7 = l.found(device("node-2", board: "pi5"))
        #expect(r7 == .found(number: 1, device("node-2", board: "pi5")), "back: its number again")
        let r8 = l.found(device("node-2", ["uname"]))
        #expect(r8 == .lost(number: 1, name: "node-2"), "stopped offering echo")
    }

    @Test func numbersReadFromInput() {
        let l = PickerList(filter: PickerFilter(service: "echo"), capacity: 50)
        #expect(l.number(in: "2") == 2)
        #expect(l.number(in: " 12 \r") == 12)
        for bad in ["", "0", "51", "-1", "1a", "one", "1 2", "0000000001", "+3"] {
            #expect(l.number(in: bad) == nil, "'\(bad)'")
        }
    }

    @Test func textAndJSONLines() {
        let found = PickerList.Event.found(number: 3, PickerDevice(name: "n\u{1B}1", board: "pi5", role: nil, services: ["echo", "uname"]))
        #expect(PickerList.text(found) == "3  n\\e1  board pi5  role -")
        #expect(PickerList.text(.lost(number: 3, name: "n\u{1B}1")) == "3  n\\e1  gone")
        let json = try? JSON(parsing: PickerList.json(found))
        #expect(json?["event"]?.stringValue == "found")
        #expect(json?["number"]?.integerValue == 3)
        #expect(json?["name"]?.stringValue == "n\u{1B}1", "JSON carries the name exactly; its encoding escapes the control")
        #expect(json?["role"] == .null)
        #expect(json?["services"]?.arrayValue == [.string("echo"), .string("uname")])
        #expect(!PickerList.json(found).unicodeScalars.contains { $0.value < 0x20 })
        #expect(PickerList.json(.lost(number: 3, name: "x")) == #"{"event":"lost","number":3,"name":"x"}"#)
    }

    @Test func theListIsBounded() {
        var l = PickerList(filter: PickerFilter(service: "echo"), capacity: 1)
        let r9 = l.found(device("a"))
        #expect(r9 != nil)
        let r10 = l.found(device("b"))
        #expect(r10 == nil && l.refused == 1)
    }
}

@Suite struct ChoiceLineReaderTests {
    @Test func theFirstLineAndTheBytesAfterItWhateverTheReads() {
        var r = ChoiceLineReader()
        let r11 = r.feed(Array("1".utf8))
        #expect(r11 == nil)
        let r12 = r.feed(Array("2\nhel".utf8))
        #expect(r12 == .line("12", rest: Array("hel".utf8)))
        var s = ChoiceLineReader()
        let r13 = s.feed(Array("3\n".utf8))
        #expect(r13 == .line("3", rest: []))
        var e = ChoiceLineReader()
        let r14 = e.ended()
        #expect(r14 == nil, "nothing read: no line")
        _ = e.feed(Array("4".utf8))
        let r15 = e.ended()
        #expect(r15 == .line("4", rest: []), "a last line without its newline")
    }

    @Test func aLongLineIsNoNumberLine() {
        var r = ChoiceLineReader()
        let r16 = r.feed(Array(repeating: UInt8(ascii: "1"), count: 65))
        #expect(r16 == .tooLong)
        var s = ChoiceLineReader()
        let r17 = s.feed(Array(repeating: UInt8(ascii: " "), count: 64) + [0x0A])
        #expect(r17 == .line(String(repeating: " ", count: 64), rest: []))
    }
}
