import Formats
import JSON
import RevTree
import TestSupport
import Testing

@Suite struct RevIDTests {
  @Test("a 32-hex revision id round-trips and is stored as a digest")
  func hexRoundTrip() throws {
    let r = try RevID("3-967a00dff5e02add41819138abb3284d")
    #expect(r.generation == 3)
    #expect(r.hash.isDigest)
    #expect(r.description == "3-967a00dff5e02add41819138abb3284d")
    #expect(r.hash.bytes.count == 16)
  }

  @Test("upper-case hex is normalized to lower case, as CouchDB answers")
  func upperHex() throws {
    let r = try RevID("1-967A00DFF5E02ADD41819138ABB3284D")
    #expect(r == (try RevID("1-967a00dff5e02add41819138abb3284d")))
    #expect(r.description == "1-967a00dff5e02add41819138abb3284d")
  }

  @Test("32 characters are a digest exactly when every one is a hex digit, in any position")
  func digestBoundaries() throws {
    let base = Array("0123456789abcdefABCDEF0123456789".utf8)
    // The bytes around each range of hex digits, and the digits at its ends.
    let probes: [UInt8] = Array("/0 9:@AFG`afg~._-".utf8) + [0x80, 0xFF]
    for position in 0..<32 {
      for probe in probes {
        var bytes = base
        bytes[position] = probe
        let text = String(decoding: bytes, as: UTF8.self)
        let isHex = Hex.value(probe) != nil
        let allowed = isHex || "Gg~._-".utf8.contains(probe)
        let fromString = try? RevHash(text)
        let fromBytes = try? RevHash(utf8: ArraySlice(bytes))
        #expect(fromString == fromBytes)
        if !allowed {
          #expect(fromBytes == nil)
          continue
        }
        let hash = try #require(fromBytes)
        #expect(hash.isDigest == isHex)
        if isHex {
          #expect(hash.bytes == Hex.decode(text))
          #expect(hash.description == text.lowercased())
        } else {
          #expect(hash.description == text)
        }
      }
    }
  }

  @Test("other signatures are kept as text")
  func textSignatures() throws {
    for s in [
      "1-a", "12-abc_DEF.~-x", "2-967a00dff5e02add41819138abb3284",
      "5-zzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzz",
    ] {
      let r = try RevID(s)
      #expect(r.description == s)
      #expect(!r.hash.isDigest)
    }
  }

  @Test(
    "hostile revision ids are rejected with a clear error",
    arguments: [
      ("", RevIDError.empty),
      ("abc", .missingDash),
      ("-abc", .invalidGeneration),
      ("0-x", .generationOutOfRange),
      ("00-x", .invalidGeneration),
      ("01-x", .invalidGeneration),
      ("+1-x", .invalidGeneration),
      ("1.5-x", .invalidGeneration),
      ("9007199254740992-x", .generationOutOfRange),
      ("99999999999999999999-x", .generationOutOfRange),
      ("1-", .emptyHash),
      ("1-a b", .invalidHashCharacter(0x20, offset: 1)),
      ("1-é", .invalidHashCharacter(0xC3, offset: 0)),
      ("1-a\"", .invalidHashCharacter(0x22, offset: 1)),
      ("1-" + String(repeating: "a", count: 129), .hashTooLong(129)),
    ])
  func hostile(input: String, error: RevIDError) {
    #expect(throws: error) { try RevID(input) }
  }

  @Test("negative and enormous generations never trap")
  func negativeGenerations() {
    #expect(throws: RevIDError.generationOutOfRange) { try RevID(generation: -1, hash: h("a")) }
    #expect(throws: RevIDError.generationOutOfRange) { try RevID(generation: .max, hash: h("a")) }
    #expect(throws: RevIDError.generationOutOfRange) { try RevID(generation: 0, hash: h("a")) }
    #expect((try? RevID("9007199254740991-a"))?.generation == RevID.maxGeneration)
  }

  @Test("a 10 MB revision id is rejected quickly without being read")
  func hugeInput() {
    let big = "1-" + String(repeating: "a", count: 10_000_000)
    #expect(throws: RevIDError.tooLong) { try RevID(big) }
    #expect(throws: RevIDError.hashTooLong(10_000_000)) {
      try RevHash(String(repeating: "a", count: 10_000_000))
    }
  }

  @Test("revision ids order by generation, then by stored bytes")
  func ordering() throws {
    let a = try RevID("2-0000000000000000000000000000000f")
    let b = try RevID("2-f0000000000000000000000000000000")
    let c = try RevID("10-00000000000000000000000000000000")
    #expect(a < b)
    #expect(b < c)
    #expect(try RevID("1-a") < RevID("1-b"))
    #expect(try RevID("1-a") < RevID("1-aa"))
    #expect(
      try RevHash(digestBytes: [UInt8](repeating: 0xFF, count: 16)).description
        == String(repeating: "f", count: 32))
    #expect(throws: RevIDError.invalidDigestLength(3)) { try RevHash(digestBytes: [1, 2, 3]) }
  }

  @Test("random byte strings never trap the parser")
  func fuzz() {
    var rng = SplitMix64(seed: 42)
    let alphabet = Array("0123456789-abcdefABCDEF_~. \u{0}é".utf8)
    for _ in 0..<20_000 {
      let n = Int(rng.next() % 40)
      let bytes = (0..<n).map { _ in alphabet[Int(rng.next() % UInt64(alphabet.count))] }
      if let r = try? RevID(utf8: bytes) {
        #expect(r.generation >= 1)
        #expect((try? RevID(r.description)) == r)
      }
    }
  }
}
