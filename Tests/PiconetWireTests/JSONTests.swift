import PiconetTestSupport
import PiconetWire
import Testing

@Suite struct JSONTests {
    // Golden fixture: every kind of value, escapes, a surrogate pair, nesting.
    let value: JSON = .object([
        "id": .string("pi4b"),
        "lines": .array([.integer(17), .integer(-27), .number(0.5)]),
        "activeLow": .bool(true),
        "notes": .string("a\"b\\c\n\u{1}é😀"),
        "none": .null,
        "empty": .object(JSONObject()),
        "list": .array([]),
    ])
    let golden = #"{"id":"pi4b","lines":[17,-27,0.5],"activeLow":true,"notes":"a\"b\\c\n\u0001é😀","none":null,"empty":{},"list":[]}"#

    @Test func goldenBytesBothWays() {
        let f = WireChecks.golden(value, Array(golden.utf8))
        #expect(f.isEmpty, "\(f)")
    }

    @Test func parsesWhitespaceEscapesAndSurrogatesToTheSameValue() throws {
        let spaced = """
         { "id" : "pi4b" , "lines" : [ 17 , -27 , 5e-1 ] ,
           "activeLow":true, "notes":"a\\"b\\\\c\\n\\u0001\\u00e9\\ud83d\\ude00",
           "none" : null, "empty":{ }, "list":[ ] }\t\r\n
        """
        var parsed = try JSON(parsing: spaced)
        // 5e-1 is a .number, like 0.5: equal values.
        #expect(parsed == value)
        parsed = try JSON(parsing: #"{"a":"\/"}"#)
        #expect(parsed["a"]?.stringValue == "/")
    }

    @Test func roundTripOfManyShapes() throws {
        let values: [JSON] = [
            .null, .bool(false), .integer(0), .integer(.max), .integer(.min), .number(-1.25e300),
            .string(""), .string("\u{7f}\u{1f}\t"), .array([.array([.array([])])]),
            value, .object(["k": .object(["k": .array([.null, .bool(true)])])]),
        ]
        for v in values {
            let f = WireChecks.roundTrip(v)
            #expect(f.isEmpty, "\(f)")
        }
    }

    @Test func prettyTextParsesBackToTheSameValue() throws {
        let pretty = value.prettyText()
        #expect(pretty.contains("\n  \"id\": \"pi4b\""))
        #expect(try JSON(parsing: pretty) == value)
    }

    @Test func everyTruncatedPrefixThrows() {
        let f = WireChecks.truncatedPrefixesThrow(Array(golden.utf8)) { _ = try JSON(decoding: $0) }
        #expect(f.isEmpty, "\(f)")
    }

    @Test func seededRandomBuffersNeverCrash() {
        let seeds = [Array(golden.utf8), Array(#"[1,{"a":[true,null,"\u00e9"]},-0.5e3]"#.utf8)]
        let parsed = WireChecks.randomBuffers(count: 20_000, seed: 7, mutating: seeds) { _ = try JSON(decoding: $0) }
        #expect(parsed > 0, "some mutated documents should still parse")
        #expect(parsed < 20_000, "random bytes must mostly be rejected")
    }

    @Test func nestingDepthIsBounded() throws {
        let deep = String(repeating: "[", count: 100_000) + String(repeating: "]", count: 100_000)
        #expect(throws: WireError.tooLong(field: "JSON nesting depth", length: 33, limit: 32)) {
            _ = try JSON(parsing: deep)
        }
        let ok = String(repeating: "[", count: 32) + String(repeating: "]", count: 32)
        #expect(try JSON(parsing: ok).arrayValue?.count == 1)
        var r = ByteReader(Array("[[1]]".utf8))
        #expect(throws: WireError.self) { _ = try JSON(parsing: &r, maxDepth: 1) }
    }

    @Test func malformedDocumentsAreTypedErrors() {
        let bad = [
            "", "   ", "{", "{\"a\"}", "{\"a\":1,}", "[1,]", "[1 2]", "01", "-", "1.", "1e", ".5", "+1",
            "\"\\x\"", "\"\u{1}\"", "\"\\ud800\"", "\"\\udc00\"", "\"\\ud800\\u0041\"", "tru", "nul", "{1:2}",
            "{\"a\":1}x", "NaN", "Infinity", "[\"\\u12G4\"]",
        ]
        for text in bad {
            #expect(throws: WireError.self, "\(text.debugDescription) must be refused") { _ = try JSON(parsing: text) }
        }
        // Invalid UTF-8 inside a string.
        #expect(throws: WireError.self) { _ = try JSON(decoding: [0x22, 0xC3, 0x28, 0x22]) }
    }

    @Test func duplicateKeysAreRefusedWithTheirName() {
        #expect(throws: WireError.invalidValue(field: "JSON at offset 7", reason: "duplicate key \"a\"")) {
            _ = try JSON(parsing: #"{"a":1,"a":2}"#)
        }
    }

    @Test func numbersKeepIntegersExactAndOverflowToDouble() throws {
        #expect(try JSON(parsing: "9007199254740993") == .integer(9_007_199_254_740_993))
        #expect(try JSON(parsing: "-0") == .integer(0))
        #expect(try JSON(parsing: "1E2") == .number(100))
        #expect(try JSON(parsing: "99999999999999999999") == .number(1e20))
        #expect(JSON.number(2).integerValue == 2)
        #expect(JSON.number(2.5).integerValue == nil)
        #expect(JSON.number(.nan).text == "null", "JSON has no NaN: encoded as null")
        #expect(JSON.number(.infinity).encodedLength == 4)
    }

    @Test func objectKeepsOrderAndSupportsEditing() {
        var o = JSONObject()
        o["b"] = .integer(1); o["a"] = .integer(2); o["b"] = .integer(3)
        #expect(o.keys == ["b", "a"])
        o["b"] = nil
        #expect(JSON.object(o).text == #"{"a":2}"#)
        #expect(JSON.string("x")["a"] == nil)
        #expect(JSON.array([]).kindName == "array")
    }
}

@Suite struct JSONLimitsTests {
    @Test func hugeExponentsAreRefusedNotInfinite() throws {
        #expect(throws: WireError.self) { _ = try JSON(parsing: "1e400") }
        #expect(try JSON(parsing: "1e-400") == .number(0), "underflow to zero is a finite number")
    }

    @Test func manyKeysParseInLinearTime() throws {
        // 50k distinct keys: quadratic duplicate checks would take minutes here.
        let body = (0..<50_000).map { "\"k\($0)\":\($0)" }.joined(separator: ",")
        let parsed = try JSON(parsing: "{" + body + "}")
        #expect(parsed.objectValue?.count == 50_000)
        #expect(parsed["k49999"]?.integerValue == 49_999)
    }
}
