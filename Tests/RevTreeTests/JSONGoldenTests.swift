import JSON
import RevTree
import Testing

/// Outputs pinned to what the original (unoptimized) parser, writers and digest produced, so
/// that any change to them that alters a byte, a parse error or a revision id fails here.
@Suite struct JSONGoldenTests {
  static let digestParent = try! RevID("3-967a00dff5e02add41819138abb3284d")
  static let textParent = try! RevID("12-abc")

  /// Everything the library makes of `bytes`, folded into `f`.
  static func fold(_ bytes: [UInt8], maxDepth: Int, deleted: Bool, into f: inout FNV1a) {
    let v: JSONValue
    do {
      v = try JSONValue(parsing: bytes, maxDepth: maxDepth)
    } catch {
      f.add("error \(error.kind) at \(error.offset)")
      #expect(throws: error) { try JSONValue(parsing: bytes.lazy.map { $0 }, maxDepth: maxDepth) }
      return
    }
    #expect((try? JSONValue(parsing: bytes.lazy.map { $0 }, maxDepth: maxDepth)) == v)
    if let s = String(validating: bytes, as: UTF8.self) {
      #expect((try? JSONValue(parsing: s, maxDepth: maxDepth)) == v)
    }
    let serialized = v.serialized()
    var appended: [UInt8] = [0x41]
    v.serialize(into: &appended)
    #expect(appended == [0x41] + serialized)
    f.add(serialized)
    f.add(v.canonicalSerialized())
    foldNumbers(v, into: &f)
    for parent in [nil, digestParent, textParent] {
      let input = RevisionDigest.input(parent: parent, deleted: deleted, body: v)
      f.add(input)
      let rev = RevisionDigest.revision(parent: parent, deleted: deleted, body: v)
      #expect(rev.hash == MD5.hash(input))
      f.add(rev.description)
    }
  }

  static func foldNumbers(_ v: JSONValue, into f: inout FNV1a) {
    switch v {
    case .number(let n):
      f.add(
        "\(n.text) \(n.canonicalText) \(n.int64Value.map(String.init) ?? "-") \(n.doubleValue.bitPattern)"
      )
    case .array(let a): for e in a { foldNumbers(e, into: &f) }
    case .object(let o): for m in o { foldNumbers(m.value, into: &f) }
    default: break
    }
  }

  @Test("3,000 generated documents parse, serialize and digest exactly as pinned")
  func corpusFingerprint() {
    var g = JSONCorpus(seed: 2026)
    var f = FNV1a()
    for _ in 0..<3_000 {
      var bytes = g.document()
      if g.pick(3) == 0 { bytes = g.damage(bytes) }
      let maxDepth = g.pick(6) == 0 ? 1 + g.pick(4) : JSONValue.defaultMaxDepth
      Self.fold(bytes, maxDepth: maxDepth, deleted: g.pick(4) == 0, into: &f)
    }
    #expect(String(f.state, radix: 16) == "c3ccaee01991a1c6")
  }

  /// (input, serialized, canonical, revision without parent, deletion under `digestParent`).
  static let cases: [(String, String, String, String, String)] = [
    (
      ##"{"_id":"w7:Page 7","type":"page","wiki_id":"w7","updated_by":"user0","updated_at":"2026-01-01T10:00:00Z","markdown":"# Page 7\n\nVersion 1 of this page. It links to [[Page 8]] and to [[Home]], and has a few more words so that its body is about the size of a short wiki page."}"##,
      ##"{"_id":"w7:Page 7","type":"page","wiki_id":"w7","updated_by":"user0","updated_at":"2026-01-01T10:00:00Z","markdown":"# Page 7\n\nVersion 1 of this page. It links to [[Page 8]] and to [[Home]], and has a few more words so that its body is about the size of a short wiki page."}"##,
      ##"{"_id":"w7:Page 7","markdown":"# Page 7\n\nVersion 1 of this page. It links to [[Page 8]] and to [[Home]], and has a few more words so that its body is about the size of a short wiki page.","type":"page","updated_at":"2026-01-01T10:00:00Z","updated_by":"user0","wiki_id":"w7"}"##,
      "1-09e4cc236a5d2999b61e3365d2b2c081",
      "4-10993cb2d9133246765261622b4e3545"
    ),
    (
      ##"{}"##,
      ##"{}"##,
      ##"{}"##,
      "1-967a00dff5e02add41819138abb3284d",
      "4-82207a95efa41d452a478308f438f095"
    ),
    (
      ##"[]"##,
      ##"[]"##,
      ##"[]"##,
      "1-1ac4f428d395c1b9d606e63d368a3e84",
      "4-6615e4ccb03908df990836a835ef3248"
    ),
    (
      ##" { "z" : [ ] , "a" : { } , "m" : [ { } , [ [ ] ] ] } "##,
      ##"{"z":[],"a":{},"m":[{},[[]]]}"##,
      ##"{"a":{},"m":[{},[[]]],"z":[]}"##,
      "1-80dec67a496b3fc7cad3cbbcfe88e3a4",
      "4-068284be98a1503536ff386b02c1a819"
    ),
    (
      ##"{"s":"\"\\\/\b\f\n\r\t\u0000\u001f\u00e9\u4e2d\ud83d\ude00 é 中 😀"}"##,
      ##"{"s":"\"\\/\b\f\n\r\t\u0000\u001fé中😀 é 中 😀"}"##,
      ##"{"s":"\"\\/\b\f\n\r\t\u0000\u001fé中😀 é 中 😀"}"##,
      "1-1f1d24fac7b39af01fe2807eac106be0",
      "4-7c59b580301d347e75c0d30bbece98fa"
    ),
    (
      ##"{"n":[0,-0,1.0,1.50,1e2,1E+2,1e-2,-0.0,1e300,4.9e-324,1e-400,9223372036854775807,9223372036854775808,-9223372036854775808,100000000000000000001,0.1,1.5e-7]}"##,
      ##"{"n":[0,-0,1.0,1.50,1e2,1E+2,1e-2,-0.0,1e300,4.9e-324,1e-400,9223372036854775807,9223372036854775808,-9223372036854775808,100000000000000000001,0.1,1.5e-7]}"##,
      ##"{"n":[0,0,1,1.5,100,100,0.01,0,1e+300,5e-324,0,9223372036854775807,9.223372036854776e+18,-9223372036854775808,1e+20,0.1,1.5e-07]}"##,
      "1-6f3afeffc697c38c78da3d7977fa06f4",
      "4-10b873090c3b9ec6c2eac04256d0a86f"
    ),
    (
      ##"{"b":1,"a":2,"b":3,"_id":"x","_rev":"1-a","é":4,"e\u0301":5,"":6,"Z":7}"##,
      ##"{"b":1,"a":2,"b":3,"_id":"x","_rev":"1-a","é":4,"e\##u{301}":5,"":6,"Z":7}"##,
      ##"{"":6,"Z":7,"_id":"x","_rev":"1-a","a":2,"b":3,"e\##u{301}":5,"é":4}"##,
      "1-c3c9752c2601ba40bf85a58cc73801ff",
      "4-a82d8bfe4601ac5b0a0a9e1fed1253b8"
    ),
    (
      ##"{"o":{"_nested":true,"k":{"deep":[null,true,false,{"x":"y"}]}}}"##,
      ##"{"o":{"_nested":true,"k":{"deep":[null,true,false,{"x":"y"}]}}}"##,
      ##"{"o":{"_nested":true,"k":{"deep":[null,true,false,{"x":"y"}]}}}"##,
      "1-bda421d4ebc39db12a8edb9149a2012b",
      "4-c07fc743e621219356b9cdea45924851"
    ),
    (
      ##""just a string""##,
      ##""just a string""##,
      ##""just a string""##,
      "1-0044af9010675d588e6611e504b7f281",
      "4-29e12df7950c017e0075f992193327cf"
    ),
    (
      ##"[1,"two",{"three":3}]"##,
      ##"[1,"two",{"three":3}]"##,
      ##"[1,"two",{"three":3}]"##,
      "1-4ef1028986afb179e21f8387a5eb7b8c",
      "4-e538c4e157e1083dfbe1827d435446c3"
    ),
    (
      ##"{"_\u0301":1,"_é":2,"_":3,"_a":4,"b":5,"_\u0301x":6,"_\u0000":7}"##,
      ##"{"_\##u{301}":1,"_é":2,"_":3,"_a":4,"b":5,"_\##u{301}x":6,"_\u0000":7}"##,
      ##"{"_":3,"_\u0000":7,"_a":4,"_é":2,"_\##u{301}":1,"_\##u{301}x":6,"b":5}"##,
      "1-c26b79ba9366d7d5ba18140beb618b04",
      "4-0ca72ab5fbe4b323dd144938770a91ed"
    ),
    (
      ##"{"k20":0,"k19":1,"k18":2,"k17":3,"k16":4,"k15":5,"k14":6,"k13":7,"k12":8,"k11":9,"k10":10,"k09":11,"k08":12,"k07":13,"k06":14,"k05":15,"k04":16,"k03":17,"k02":18,"k01":19,"updated_at_very_long_key_1":20,"updated_at_very_long_key_0":21,"updated_at_very_long_key":22,"updated_at_very_long_key_1":23,"updated_at_very_long_ke":24,"updated_at_very_long_key_é":25,"k07":26,"k07\u0000":27,"updated_at_very_long_key_0":28}"##,
      ##"{"k20":0,"k19":1,"k18":2,"k17":3,"k16":4,"k15":5,"k14":6,"k13":7,"k12":8,"k11":9,"k10":10,"k09":11,"k08":12,"k07":13,"k06":14,"k05":15,"k04":16,"k03":17,"k02":18,"k01":19,"updated_at_very_long_key_1":20,"updated_at_very_long_key_0":21,"updated_at_very_long_key":22,"updated_at_very_long_key_1":23,"updated_at_very_long_ke":24,"updated_at_very_long_key_é":25,"k07":26,"k07\u0000":27,"updated_at_very_long_key_0":28}"##,
      ##"{"k01":19,"k02":18,"k03":17,"k04":16,"k05":15,"k06":14,"k07":26,"k07\u0000":27,"k08":12,"k09":11,"k10":10,"k11":9,"k12":8,"k13":7,"k14":6,"k15":5,"k16":4,"k17":3,"k18":2,"k19":1,"k20":0,"updated_at_very_long_ke":24,"updated_at_very_long_key":22,"updated_at_very_long_key_0":28,"updated_at_very_long_key_1":23,"updated_at_very_long_key_é":25}"##,
      "1-dc4e71506de138caa269718ae184106b",
      "4-95649338dc252d0c85a82856f203399d"
    ),
    (
      ##"{"a":{"k3":1,"k2":2,"k1":3,"k0":4,"k9":5,"k8":6,"k7":7,"k6":8,"k5":9,"k4":10,"k10":11,"k11":12,"k12":13,"k13":14,"k14":15,"k15":16,"k16":17,"k2":18},"_id":"x"}"##,
      ##"{"a":{"k3":1,"k2":2,"k1":3,"k0":4,"k9":5,"k8":6,"k7":7,"k6":8,"k5":9,"k4":10,"k10":11,"k11":12,"k12":13,"k13":14,"k14":15,"k15":16,"k16":17,"k2":18},"_id":"x"}"##,
      ##"{"_id":"x","a":{"k0":4,"k1":3,"k10":11,"k11":12,"k12":13,"k13":14,"k14":15,"k15":16,"k16":17,"k2":18,"k3":1,"k4":10,"k5":9,"k6":8,"k7":7,"k8":6,"k9":5}}"##,
      "1-e0209edab7342a243ad167a07aecf169",
      "4-1e0a10129085af95950bf80e4befc9a0"
    ),
  ]

  @Test(
    "hand-picked documents: both serializations and revision ids (CouchDB's, since issue 16) as pinned"
  )
  func pinnedDocuments() throws {
    for (input, serialized, canonical, rev, deletion) in Self.cases {
      let v = try JSONValue(parsing: input)
      #expect(String(decoding: v.serialized(), as: UTF8.self) == serialized)
      #expect(String(decoding: v.canonicalSerialized(), as: UTF8.self) == canonical)
      #expect(RevisionDigest.revision(parent: nil, deleted: false, body: v).description == rev)
      #expect(
        RevisionDigest.revision(parent: Self.digestParent, deleted: true, body: v).description
          == deletion)
    }
  }

  /// 85 KB: 40 members holding up to 273 elements each and 40 nested arrays, more than the
  /// parser keeps on the machine stack.
  static func bigDocument() -> String {
    var members: [String] = []
    for m in 0..<40 {
      let items = (0..<(m * 7)).map { k in
        k % 3 == 0
          ? "{\"k\(k % 5)\":[\(k),\"v\\n\(k)\"],\"a\":{}}"
          : (k % 3 == 1 ? "\(k).5" : "\"é\\u00e9\(k)\"")
      }
      members.append("\"m\(39 - m)\":[" + items.joined(separator: ",") + "]")
    }
    let deep = String(repeating: "[", count: 40) + "\"bottom\"" + String(repeating: "]", count: 40)
    return "{" + members.joined(separator: ",") + ",\"deep\":" + deep + "}"
  }

  @Test("a large, deep document parses and digests as pinned")
  func largeDocument() throws {
    let text = Self.bigDocument()
    let v = try JSONValue(parsing: text)
    #expect(v["m0"]?.arrayValue?.count == 273)
    #expect(v["m5"]?[2]?.stringValue == "éé2")
    #expect(v["m1"]?[3]?["k3"]?[1]?.stringValue == "v\n3")
    let expected = text.replacing("\\u00e9", with: "é")
    #expect(String(decoding: v.serialized(), as: UTF8.self) == expected)
    #expect(
      RevisionDigest.revision(parent: nil, deleted: false, body: v).description
        == "1-f693c0bca10e64ba1e8f902536e2f48d")
    #expect(MD5.hash(v.canonicalSerialized()).description == "1310b4097c23104f159940062ac91971")
  }
}
