import Formats
import Foundation
import Testing

@Suite struct Base64Tests {
  @Test("base64url: every length round-trips and agrees with Foundation; bad input is nil")
  func roundTrip() {
    for length in 0..<70 {
      let bytes = (0..<length).map { UInt8(truncatingIfNeeded: $0 &* 37 &+ length) }
      let encoded = Base64.encodeURL(bytes)
      let foundation = Data(bytes).base64EncodedString()
        .replacingOccurrences(of: "+", with: "-").replacingOccurrences(of: "/", with: "_")
        .replacingOccurrences(of: "=", with: "")
      #expect(encoded == foundation)
      #expect(Base64.decodeURL(encoded) == bytes)
      #expect(
        Base64.decodeURL(encoded + String(repeating: "=", count: (4 - encoded.count % 4) % 4))
          == bytes)
    }
    #expect(Base64.decodeURL("ab+c") == nil)
    #expect(Base64.decodeURL("ab/c") == nil)
    #expect(Base64.decodeURL("abcde") == nil)
    #expect(Base64.decodeURL("ab c") == nil)
  }
}

@Suite struct HexTests {
  @Test("hex: lower case out, either case in; odd lengths and other characters are nil")
  func roundTrip() {
    let bytes: [UInt8] = [0x00, 0x0f, 0xa0, 0xff, 0x7e]
    #expect(Hex.encode(bytes) == "000fa0ff7e")
    #expect(Hex.decode("000FA0ff7E") == bytes)
    #expect(Hex.decode("abc") == nil)
    #expect(Hex.decode("zz") == nil)
    #expect(Hex.value(UInt8(ascii: "g")) == nil)
  }
}

@Suite struct VarintTests {
  @Test("varints: sizes and round trips at every 7-bit boundary; cut or past-64-bit input is nil")
  func roundTrip() {
    var values: [UInt64] = [0, 1, 127, 128, 16_383, 16_384, .max]
    for shift in stride(from: 7, to: 64, by: 7) { values += [1 << shift, (1 << shift) - 1] }
    for value in values {
      var bytes: [UInt8] = []
      Varint.append(value, to: &bytes)
      #expect(bytes.count == Varint.size(value))
      var index = 0
      #expect(Varint.read(bytes, at: &index) == value)
      #expect(index == bytes.count)
      var cut = 0
      #expect(Varint.read(bytes.dropLast(), at: &cut) == nil)
    }
    var index = 0
    #expect(Varint.read([UInt8](repeating: 0xff, count: 10) + [0x01], at: &index) == nil)
  }
}

@Suite struct ISO8601Tests {
  @Test("ISO-8601: formats with the fraction asked for; parses dates, offsets and fractions")
  func formatAndParse() {
    let micros: Int64 = 1_795_000_000_123_456
    #expect(ISO8601.format(microseconds: micros) == "2026-11-18T11:06:40.123456Z")
    #expect(ISO8601.format(microseconds: micros, fractionDigits: 3) == "2026-11-18T11:06:40.123Z")
    #expect(ISO8601.parseMicroseconds("2026-11-18T11:06:40.123456Z") == micros)
    #expect(ISO8601.parseMicroseconds("2026-11-18T12:06:40.123456+01:00") == micros)
    #expect(ISO8601.parseMicroseconds("2026-11-18") == 1_794_960_000_000_000)
    #expect(ISO8601.parseMicroseconds("1970-01-01T00:00Z") == 0)
    for bad in [
      "2026-02-30", "2026-11-18T24:00Z", "2026-11-18T08:26:40", "2026-11-18T08:26:40.Z",
      "yesterday", "2026-11-18T08:26:40Z trailing",
    ] {
      #expect(ISO8601.parseMicroseconds(bad) == nil, "\(bad)")
    }
  }
}
