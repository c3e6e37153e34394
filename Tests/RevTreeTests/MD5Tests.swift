import JSON
import RevTree
import TestSupport
import Testing

@Suite struct MD5Tests {
  @Test(
    "MD5 matches the RFC 1321 test suite",
    arguments: [
      ("", "d41d8cd98f00b204e9800998ecf8427e"),
      ("a", "0cc175b9c0f1b6a831c399e269772661"),
      ("abc", "900150983cd24fb0d6963f7d28e17f72"),
      ("message digest", "f96b697d7cb7938d525a2f31aaf161d0"),
      ("abcdefghijklmnopqrstuvwxyz", "c3fcd3d76192e4007dfb496cca67e13b"),
      (
        "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789",
        "d174ab98d277d9f5a5611c2c9f419d9f"
      ),
      (
        "12345678901234567890123456789012345678901234567890123456789012345678901234567890",
        "57edf4a22be3c955ac49da2e2107b67a"
      ),
    ])
  func rfcVectors(input: String, digest: String) {
    #expect(MD5.hash(Array(input.utf8)).description == digest)
  }

  @Test("feeding in pieces gives the same digest as one call")
  func incremental() {
    var rng = SplitMix64(seed: 7)
    for length in [0, 1, 55, 56, 63, 64, 65, 127, 128, 1000] {
      let data = (0..<length).map { _ in UInt8(truncatingIfNeeded: rng.next()) }
      var m = MD5()
      var i = 0
      while i < data.count {
        let n = min(Int(rng.next() % 70), data.count - i)
        m.update(data[i..<(i + n)])
        i += n
      }
      #expect(m.finalize() == MD5.hash(data))
    }
  }

  @Test("a million 'a' (the classic long vector)")
  func million() {
    #expect(
      MD5.hash(repeatElement(UInt8(ascii: "a"), count: 1_000_000)).description
        == "7707d6ae4e027c70eea2a935c2296f21")
  }
}
