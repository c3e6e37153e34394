import JSON
import TestSupport
import Testing

@Suite struct JSONTests {
  func text(_ bytes: [UInt8]) -> String { String(decoding: bytes, as: UTF8.self) }

  @Test("serialized keeps key order and number text")
  func preservesOrder() throws {
    let v = try JSONValue(
      parsing: #" { "z" : 1.0 , "a" : [ true , null , -0 , 1e2 ] , "m" : { } } "#)
    #expect(text(v.serialized()) == #"{"z":1.0,"a":[true,null,-0,1e2],"m":{}}"#)
    #expect(v["z"]?.numberValue?.text == "1.0")
    #expect(v["a"]?[3]?.numberValue?.doubleValue == 100)
  }

  @Test("canonical form sorts keys by UTF-8 bytes and normalizes numbers")
  func canonical() throws {
    let v = try JSONValue(
      parsing: #"{"b":1.0,"a":-0,"é":0.1,"Z":1e300,"c":[1E2,-0.0,12345678901234567890,1.5e-7]}"#)
    #expect(
      text(v.canonicalSerialized())
        == #"{"Z":1e+300,"a":0,"b":1,"c":[100,0,1.2345678901234567e+19,1.5e-07],"é":0.1}"#)
  }

  @Test("canonical strings escape only quote, backslash and control characters")
  func canonicalStrings() throws {
    let v = try JSONValue(
      parsing: #"["\u0041\/\"\\\b\f\n\r\t\u0001\u001f\u007f é 😀 \ud83d\ude00"]"#)
    #expect(
      text(v.canonicalSerialized()) == "[\"A/\\\"\\\\\\b\\f\\n\\r\\t\\u0001\\u001f\u{7f} é 😀 😀\"]")
  }

  @Test("duplicate keys are kept in order; lookups and canonical form use the last")
  func duplicateKeys() throws {
    let v = try JSONValue(parsing: #"{"a":1,"b":2,"a":3}"#)
    #expect(text(v.serialized()) == #"{"a":1,"b":2,"a":3}"#)
    #expect(v["a"] == .number(3))
    #expect(text(v.canonicalSerialized()) == #"{"a":3,"b":2}"#)
  }

  @Test("parse → serialize → parse is the identity")
  func roundTrip() throws {
    let s =
      #"{"title":"Home","tags":["a","b"],"n":[0,-1,2.50,3e-2],"o":{"x":null,"y":false},"s":"line\nbreak \"q\" \\ é"}"#
    let v = try JSONValue(parsing: s)
    #expect(text(v.serialized()) == s)
    #expect(try JSONValue(parsing: v.serialized()) == v)
    #expect(
      try JSONValue(parsing: v.canonicalSerialized()).canonicalSerialized()
        == v.canonicalSerialized())
  }

  @Test(
    "malformed JSON is rejected with the offset of the problem",
    arguments: [
      ("", JSONParseError(.unexpectedEnd, at: 0)),
      ("[1,", JSONParseError(.unexpectedEnd, at: 3)),
      ("[1,]", JSONParseError(.unexpectedByte(UInt8(ascii: "]")), at: 3)),
      ("{\"a\" 1}", JSONParseError(.unexpectedByte(UInt8(ascii: "1")), at: 5)),
      ("{\"a\":1,}", JSONParseError(.unexpectedByte(UInt8(ascii: "}")), at: 7)),
      ("[01]", JSONParseError(.unexpectedByte(UInt8(ascii: "1")), at: 2)),
      ("[1.]", JSONParseError(.invalidNumber, at: 2)),
      ("[-]", JSONParseError(.invalidNumber, at: 2)),
      ("1e400", JSONParseError(.numberOutOfRange, at: 0)),
      ("tru", JSONParseError(.unexpectedEnd, at: 3)),
      ("nul!", JSONParseError(.unexpectedByte(UInt8(ascii: "!")), at: 3)),
      ("\"abc", JSONParseError(.unexpectedEnd, at: 4)),
      ("\"a\tb\"", JSONParseError(.unescapedControlCharacter, at: 2)),
      ("\"\\x\"", JSONParseError(.invalidEscape, at: 1)),
      ("\"\\u12G4\"", JSONParseError(.invalidEscape, at: 5)),
      ("\"\\ud800\"", JSONParseError(.loneSurrogate, at: 1)),
      ("\"\\udc00\"", JSONParseError(.loneSurrogate, at: 1)),
      ("\"\\ud800\\u0041\"", JSONParseError(.loneSurrogate, at: 1)),
      ("1 2", JSONParseError(.trailingData, at: 2)),
      ("{\"a\":1}x", JSONParseError(.trailingData, at: 7)),
    ])
  func malformed(input: String, error: JSONParseError) {
    #expect(throws: error) { try JSONValue(parsing: input) }
  }

  @Test(
    "a parse error reads as what went wrong and where, not as an enum case",
    arguments: [
      ("{b", "unexpected 'b' at byte 1"),
      ("[1,", "unexpected end of input at byte 3"),
      ("[1,]", "unexpected ']' at byte 3"),
      ("['a']", #"unexpected "'" at byte 1"#),
      ("[1 \n", "unexpected end of input at byte 4"),
      ("{\"a\" 1}", "unexpected '1' at byte 5"),
      ("\u{1}", "unexpected byte 0x01 at byte 0"),
      ("[1.]", "malformed number at byte 2"),
      ("1e400", "number out of range at byte 0"),
      ("\"a\tb\"", "unescaped control character in a string at byte 2"),
      ("\"\\x\"", "invalid escape in a string at byte 1"),
      ("1 2", "unexpected data after the JSON value at byte 2"),
    ])
  func described(input: String, message: String) {
    #expect(throws: JSONParseError.self) { try JSONValue(parsing: input) }
    do {
      _ = try JSONValue(parsing: input)
    } catch {
      #expect(error.description == message)
      #expect("\(error)" == message)
    }
  }

  @Test("invalid UTF-8 in a string is rejected")
  func invalidUTF8() {
    #expect(throws: JSONParseError(.invalidUTF8, at: 2)) {
      try JSONValue(parsing: [0x22, 0x61, 0xFF, 0x22])
    }
    #expect(JSONParseError(.invalidUTF8, at: 2).description == "invalid UTF-8 at byte 2")
    #expect(throws: JSONParseError.self) { try JSONValue(parsing: [0x22, 0xC3, 0x22]) }
    #expect(throws: JSONParseError.self) {
      try JSONValue(parsing: [0x22, 0x5C, 0x6E, 0xED, 0xA0, 0x80, 0x22])
    }
  }

  @Test("100,000 nested brackets are an error, not a stack overflow")
  func deepNesting() {
    let deep = [UInt8](repeating: UInt8(ascii: "["), count: 100_000)
    #expect(throws: JSONParseError(.tooDeep(limit: 512), at: 512)) { try JSONValue(parsing: deep) }
    #expect(
      JSONParseError(.tooDeep(limit: 512), at: 512).description
        == "nested deeper than 512 levels at byte 512")
    // The kind still prints as its case, as it always did.
    #expect("\(JSONParseError.Kind.tooDeep(limit: 512))" == "tooDeep(limit: 512)")
    let ok = String(repeating: "[", count: 512) + String(repeating: "]", count: 512)
    #expect(throws: Never.self) { try JSONValue(parsing: ok) }
    let objects = String(repeating: "{\"a\":", count: 600)
    #expect(throws: JSONParseError.self) { try JSONValue(parsing: objects) }
  }

  @Test("every truncation of a valid document is rejected without trapping")
  func truncations() throws {
    let s = Array(#"{"a":[1,2.5e3,"x\u00e9",{"b":null}],"c":true}"#.utf8)
    for n in 0..<s.count {
      #expect(throws: JSONParseError.self) { try JSONValue(parsing: s[0..<n]) }
    }
  }

  @Test("random bytes never trap the parser")
  func fuzz() {
    var rng = SplitMix64(seed: 99)
    let alphabet = Array(#"{}[],:"\ 0123456789.-+eEtrufalsn"#.utf8) + [0xC3, 0xA9, 0xFF, 0x00]
    for _ in 0..<20_000 {
      let n = Int(rng.next() % 30)
      let bytes = (0..<n).map { _ in alphabet[Int(rng.next() % UInt64(alphabet.count))] }
      if let v = try? JSONValue(parsing: bytes) {
        #expect((try? JSONValue(parsing: v.serialized())) == v)
      }
    }
  }

  @Test("numbers: literal text kept, views and canonical text")
  func numbers() {
    #expect(JSONNumber(text: "1.50")?.canonicalText == "1.5")
    #expect(JSONNumber(text: "-0")?.canonicalText == "0")
    #expect(JSONNumber(text: "9223372036854775807")?.int64Value == .max)
    #expect(JSONNumber(text: "9223372036854775808")?.canonicalText == "9.223372036854776e+18")
    #expect(JSONNumber(text: "1e18")?.canonicalText == "1000000000000000000")
    #expect(JSONNumber(text: "01") == nil)
    #expect(JSONNumber(text: "1e999") == nil)
    #expect(JSONNumber(Double.nan) == nil)
    #expect(JSONNumber(0.5)?.text == "0.5")
    #expect(JSONNumber(42).text == "42")
  }

  @Test("objects: subscript set, replace and remove")
  func objectEditing() {
    var o = JSONObject(["a": .null, "b": .bool(true)])
    o["a"] = .string("x")
    o["c"] = .number(1)
    #expect(o.keys == ["a", "b", "c"])
    o["b"] = nil
    #expect(o.keys == ["a", "c"])
    #expect(JSONValue.object(o)["a"]?.stringValue == "x")
  }
}
