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

  @Test("3,000 generated documents parse, serialize and digest exactly as before")
  func corpusFingerprint() {
    var g = JSONCorpus(seed: 2026)
    var f = FNV1a()
    for _ in 0..<3_000 {
      var bytes = g.document()
      if g.pick(3) == 0 { bytes = g.damage(bytes) }
      let maxDepth = g.pick(6) == 0 ? 1 + g.pick(4) : JSONValue.defaultMaxDepth
      Self.fold(bytes, maxDepth: maxDepth, deleted: g.pick(4) == 0, into: &f)
    }
    #expect(String(f.state, radix: 16) == "b27c95adc31868ae")
  }

  /// (input, serialized, canonical, revision without parent, deletion under `digestParent`).
  static let cases: [(String, String, String, String, String)] = [
    (
      ##"{"_id":"w7:Page 7","type":"page","wiki_id":"w7","updated_by":"user0","updated_at":"2026-01-01T10:00:00Z","markdown":"# Page 7\n\nVersion 1 of this page. It links to [[Page 8]] and to [[Home]], and has a few more words so that its body is about the size of a short wiki page."}"##,
      ##"{"_id":"w7:Page 7","type":"page","wiki_id":"w7","updated_by":"user0","updated_at":"2026-01-01T10:00:00Z","markdown":"# Page 7\n\nVersion 1 of this page. It links to [[Page 8]] and to [[Home]], and has a few more words so that its body is about the size of a short wiki page."}"##,
      ##"{"_id":"w7:Page 7","markdown":"# Page 7\n\nVersion 1 of this page. It links to [[Page 8]] and to [[Home]], and has a few more words so that its body is about the size of a short wiki page.","type":"page","updated_at":"2026-01-01T10:00:00Z","updated_by":"user0","wiki_id":"w7"}"##,
      "1-7c3c5013750d50f479212aa1b313f876",
      "4-2084060a721db77cbed98fe628d49e34"
    ),
    (
      ##"{}"##,
      ##"{}"##,
      ##"{}"##,
      "1-e3036d5325e9a9012656ff28d4b0b297",
      "4-c76c142fc9113620c78c06349855172d"
    ),
    (
      ##"[]"##,
      ##"[]"##,
      ##"[]"##,
      "1-c33320daf54437ee59e371debdb0a8e2",
      "4-edeaa457742c6aa1bb6630e2e2c3a7a7"
    ),
    (
      ##" { "z" : [ ] , "a" : { } , "m" : [ { } , [ [ ] ] ] } "##,
      ##"{"z":[],"a":{},"m":[{},[[]]]}"##,
      ##"{"a":{},"m":[{},[[]]],"z":[]}"##,
      "1-94803666b8ec278c950845aa4bbedd6e",
      "4-904f1544411d4e76cb7940f62dae8e48"
    ),
    (
      ##"{"s":"\"\\\/\b\f\n\r\t\u0000\u001f\u00e9\u4e2d\ud83d\ude00 é 中 😀"}"##,
      ##"{"s":"\"\\/\b\f\n\r\t\u0000\u001fé中😀 é 中 😀"}"##,
      ##"{"s":"\"\\/\b\f\n\r\t\u0000\u001fé中😀 é 中 😀"}"##,
      "1-8ba4ac9ee1626dff2381fcd9d9dddd80",
      "4-1af881e6887e6914ecfdbacec65757ed"
    ),
    (
      ##"{"n":[0,-0,1.0,1.50,1e2,1E+2,1e-2,-0.0,1e300,4.9e-324,1e-400,9223372036854775807,9223372036854775808,-9223372036854775808,100000000000000000001,0.1,1.5e-7]}"##,
      ##"{"n":[0,-0,1.0,1.50,1e2,1E+2,1e-2,-0.0,1e300,4.9e-324,1e-400,9223372036854775807,9223372036854775808,-9223372036854775808,100000000000000000001,0.1,1.5e-7]}"##,
      ##"{"n":[0,0,1,1.5,100,100,0.01,0,1e+300,5e-324,0,9223372036854775807,9.223372036854776e+18,-9223372036854775808,1e+20,0.1,1.5e-07]}"##,
      "1-9696329b0e636057bab884ceef3e3e60",
      "4-238c59d5b75efe77de93428e833b9aca"
    ),
    (
      ##"{"b":1,"a":2,"b":3,"_id":"x","_rev":"1-a","é":4,"e\u0301":5,"":6,"Z":7}"##,
      ##"{"b":1,"a":2,"b":3,"_id":"x","_rev":"1-a","é":4,"e\##u{301}":5,"":6,"Z":7}"##,
      ##"{"":6,"Z":7,"_id":"x","_rev":"1-a","a":2,"b":3,"e\##u{301}":5,"é":4}"##,
      "1-f060ec129be5284dd6a107252a13789f",
      "4-10d48afeb967e668a9edd86b8fee8c0c"
    ),
    (
      ##"{"o":{"_nested":true,"k":{"deep":[null,true,false,{"x":"y"}]}}}"##,
      ##"{"o":{"_nested":true,"k":{"deep":[null,true,false,{"x":"y"}]}}}"##,
      ##"{"o":{"_nested":true,"k":{"deep":[null,true,false,{"x":"y"}]}}}"##,
      "1-31cf08f0aab3717cb4bc87cf616a273a",
      "4-3733a697f5d1b15cdf2124a2bb7a9a86"
    ),
    (
      ##""just a string""##,
      ##""just a string""##,
      ##""just a string""##,
      "1-76aafc24f80d37ffb26c24c8783c110e",
      "4-bec6dba470e174e1272aa0f30c84f704"
    ),
    (
      ##"[1,"two",{"three":3}]"##,
      ##"[1,"two",{"three":3}]"##,
      ##"[1,"two",{"three":3}]"##,
      "1-af96dc7420a692fbceffee219a39618d",
      "4-3f5c0ad7e087db40b261aa045a5f4aad"
    ),
    (
      ##"{"_\u0301":1,"_é":2,"_":3,"_a":4,"b":5,"_\u0301x":6,"_\u0000":7}"##,
      ##"{"_\##u{301}":1,"_é":2,"_":3,"_a":4,"b":5,"_\##u{301}x":6,"_\u0000":7}"##,
      ##"{"_":3,"_\u0000":7,"_a":4,"_é":2,"_\##u{301}":1,"_\##u{301}x":6,"b":5}"##,
      "1-49ebb79c8ed7dce0db90f0a4824e98f1",
      "4-a0563f53afa32ccf430a6d7138ff6a30"
    ),
    (
      ##"{"k20":0,"k19":1,"k18":2,"k17":3,"k16":4,"k15":5,"k14":6,"k13":7,"k12":8,"k11":9,"k10":10,"k09":11,"k08":12,"k07":13,"k06":14,"k05":15,"k04":16,"k03":17,"k02":18,"k01":19,"updated_at_very_long_key_1":20,"updated_at_very_long_key_0":21,"updated_at_very_long_key":22,"updated_at_very_long_key_1":23,"updated_at_very_long_ke":24,"updated_at_very_long_key_é":25,"k07":26,"k07\u0000":27,"updated_at_very_long_key_0":28}"##,
      ##"{"k20":0,"k19":1,"k18":2,"k17":3,"k16":4,"k15":5,"k14":6,"k13":7,"k12":8,"k11":9,"k10":10,"k09":11,"k08":12,"k07":13,"k06":14,"k05":15,"k04":16,"k03":17,"k02":18,"k01":19,"updated_at_very_long_key_1":20,"updated_at_very_long_key_0":21,"updated_at_very_long_key":22,"updated_at_very_long_key_1":23,"updated_at_very_long_ke":24,"updated_at_very_long_key_é":25,"k07":26,"k07\u0000":27,"updated_at_very_long_key_0":28}"##,
      ##"{"k01":19,"k02":18,"k03":17,"k04":16,"k05":15,"k06":14,"k07":26,"k07\u0000":27,"k08":12,"k09":11,"k10":10,"k11":9,"k12":8,"k13":7,"k14":6,"k15":5,"k16":4,"k17":3,"k18":2,"k19":1,"k20":0,"updated_at_very_long_ke":24,"updated_at_very_long_key":22,"updated_at_very_long_key_0":28,"updated_at_very_long_key_1":23,"updated_at_very_long_key_é":25}"##,
      "1-d53dd573d88361993107fd2babb24efb",
      "4-0849b5b08004e0b959e13d2508adf092"
    ),
    (
      ##"{"a":{"k3":1,"k2":2,"k1":3,"k0":4,"k9":5,"k8":6,"k7":7,"k6":8,"k5":9,"k4":10,"k10":11,"k11":12,"k12":13,"k13":14,"k14":15,"k15":16,"k16":17,"k2":18},"_id":"x"}"##,
      ##"{"a":{"k3":1,"k2":2,"k1":3,"k0":4,"k9":5,"k8":6,"k7":7,"k6":8,"k5":9,"k4":10,"k10":11,"k11":12,"k12":13,"k13":14,"k14":15,"k15":16,"k16":17,"k2":18},"_id":"x"}"##,
      ##"{"_id":"x","a":{"k0":4,"k1":3,"k10":11,"k11":12,"k12":13,"k13":14,"k14":15,"k15":16,"k16":17,"k2":18,"k3":1,"k4":10,"k5":9,"k6":8,"k7":7,"k8":6,"k9":5}}"##,
      "1-38a8dad569aea87cdc889eef6bcbe57f",
      "4-b1b886ec302bdbab6d90b2a9881909c9"
    ),
  ]

  @Test("hand-picked documents: both serializations and revision ids as before")
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

  @Test("a large, deep document parses and digests as before")
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
        == "1-46150eecda2d4341ecd67cb731ee65df")
    #expect(MD5.hash(v.canonicalSerialized()).description == "1310b4097c23104f159940062ac91971")
  }
}
