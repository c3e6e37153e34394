import Foundation
import Projections
import Query
import RevTree
import StoreTestSupport
import Testing

/// The bytes CouchDB stores for an attachment, and their digest: pinned to what Erlang/OTP's
/// zlib writes with CouchDB's `couch_stream` settings (`deflateInit(Z, 8, deflated, 31, 8,
/// default)`, fed in 4,096-byte chunks).
@Suite struct AttachmentEncodingTests {
  static func text(_ n: Int) -> [UInt8] {
    var s = ""
    for i in 1...n {
      s += "line \(i): the quick brown fox jumps over the lazy dog \(i * i % 97)\n"
    }
    return Array(s.utf8)
  }

  @Test("gzip as CouchDB writes it: the same bytes, so the same digest")
  func gzipMatchesErlang() {
    let allBytes = [UInt8]((0...255).map { UInt8($0) })
    let cases: [([UInt8], String, Int, String)] = [
      ([], "7029066c27ac6f5ef18d660d5741979a", 20, "d41d8cd98f00b204e9800998ecf8427e"),
      (
        Array("hello".utf8), "88c6a20bcc2a885943d8d8cb4de9af09", 25,
        "5d41402abc4b2a76b9719d911017c592"
      ),
      (
        Self.text(3000), "b21a84e828dc704a0bdd45737ab65213", 12039,
        "70d3735ad35c5ab341518f0e5a9021e8"
      ),
      (
        Array(repeating: allBytes, count: 100).flatMap { $0 }, "08337dfcbe773a640fc0ac6f102340a6",
        465,
        "c73a756d7c65cb6991030bff87439016"
      ),
    ]
    for (data, gzipMD5, gzipLength, md5) in cases {
      let gz = AttachmentEncoding.gzip(data)
      #expect(gz.count == gzipLength)
      #expect(MD5.hash(gz).description == gzipMD5)
      #expect(MD5.hash(data).description == md5)
      // Fed in pieces, the stream is the same.
      var encoder = GzipEncoder()
      var pieces: [UInt8] = []
      var i = 0
      while i < data.count {
        pieces += encoder.update(Array(data[i..<min(data.count, i + 1000)]))
        i += 1000
      }
      pieces += encoder.finish()
      #expect(pieces == gz)
    }
  }

  @Test("compressible types: CouchDB's default list, its pattern rules")
  func compressible() {
    for type in [
      "text/plain", "TEXT/HTML", " text/x-anything", "application/json",
      "application/json; charset=utf-8", "Application/XML", "application/javascript ",
    ] {
      #expect(AttachmentEncoding.isCompressible(type), "\(type)")
    }
    for type in [
      "image/png", "application/octet-stream", "application/jsonx", "application/json-patch",
      "texts/plain", "",
    ] {
      #expect(!AttachmentEncoding.isCompressible(type), "\(type)")
    }
    #expect(AttachmentEncoding.stored([1, 2, 3], contentType: "image/png").encoding == nil)
    #expect(AttachmentEncoding.stored([1, 2, 3], contentType: "text/plain").encoding == "gzip")
  }
}

/// ``GunzipStream`` and ``BlobUpload``: attachments decoded and stored a piece at a time.
@Suite struct AttachmentStreamTests {
  static let text: [UInt8] = {
    var out: [UInt8] = []
    var x: UInt32 = 1
    while out.count < 300_000 {
      x = x &* 1_103_515_245 &+ 12345
      out += Array("line \(x % 1000) of some text\n".utf8)
    }
    return out
  }()

  @Test("a gzip stream decoded in small pieces, with bounded output, is the data")
  func gunzipPieces() throws {
    let gz = AttachmentEncoding.gzip(Self.text)
    for (inputSize, outputSize) in [(1, 7), (100, 4096), (gz.count, 1 << 20)] {
      let stream = GunzipStream()
      var out: [UInt8] = []
      var at = 0
      while !stream.isFinished {
        let piece = try #require(stream.pull(upTo: outputSize))
        #expect(piece.count <= outputSize)
        out += piece
        if piece.isEmpty {
          guard at < gz.count else { break }
          stream.push(Array(gz[at..<min(at + inputSize, gz.count)]))
          at += inputSize
        }
      }
      #expect(stream.isFinished && out == Self.text, "pieces of \(inputSize)/\(outputSize)")
    }
    #expect(Gunzip.decode(gz) == Self.text)
    #expect(Gunzip.decode(Array(gz.dropLast(9))) == nil, "a truncated stream")
    let stream = GunzipStream()
    stream.push(Array("not gzip at all".utf8))
    #expect(stream.pull(upTo: 100) == nil)
  }

  @Test("an upload gzips a compressible body as CouchDB would, dedups, and discards cleanly")
  func upload() throws {
    let dir = NSTemporaryDirectory() + "wikilog-upload-\(UUID().uuidString)"
    defer { try? FileManager.default.removeItem(atPath: dir) }
    let blobs = BlobStore(path: dir)
    let upload = try blobs.upload(gzip: true)
    var at = 0
    while at < Self.text.count {
      try upload.write(Array(Self.text[at..<min(at + 65_536, Self.text.count)]))
      at += 65_536
    }
    let result = try upload.finish(expectingMD5: AttachmentEncoding.md5(Self.text))
    let gz = AttachmentEncoding.gzip(Self.text)
    #expect(result.md5 == AttachmentEncoding.md5(gz))
    #expect(result.receivedMD5 == AttachmentEncoding.md5(Self.text))
    #expect(result.storedLength == gz.count && result.receivedLength == Self.text.count)
    #expect(try blobs.read(result.md5) == gz)

    // The same bytes again: the blob is kept, the temporary file dropped.
    let again = try blobs.upload(gzip: false)
    try again.write(gz)
    #expect(try again.finish().md5 == result.md5)
    #expect(try FileManager.default.contentsOfDirectory(atPath: dir) == [BlobStore.hex(result.md5)])

    // A wrong MD5, or a discarded upload, leaves nothing.
    let wrong = try blobs.upload(gzip: false)
    try wrong.write([1, 2, 3])
    #expect(throws: StoreError.self) {
      try wrong.finish(expectingMD5: [UInt8](repeating: 0, count: 16))
    }
    let dropped = try blobs.upload(gzip: false)
    try dropped.write([4, 5, 6])
    dropped.discard()
    #expect(try FileManager.default.contentsOfDirectory(atPath: dir) == [BlobStore.hex(result.md5)])
  }

  @Test(
    "an upload past the flush interval flushes on the side and ends whole; a discard mid-flush leaves nothing"
  )
  func largeUpload() throws {
    let dir = NSTemporaryDirectory() + "wikilog-upload-\(UUID().uuidString)"
    defer { try? FileManager.default.removeItem(atPath: dir) }
    let blobs = BlobStore(path: dir)
    // 40 MiB in MiB pieces of varying bytes: past two of the 16 MiB flush intervals.
    let piece = 1 << 20
    let count = 40
    var whole: [UInt8] = []
    whole.reserveCapacity(count * piece)
    let upload = try blobs.upload(gzip: false)
    for k in 0..<count {
      let bytes = (0..<piece).map { UInt8(truncatingIfNeeded: $0 &* 31 &+ k) }
      whole += bytes
      try upload.write(bytes)
    }
    let result = try upload.finish(expectingMD5: AttachmentEncoding.md5(whole))
    #expect(result.md5 == AttachmentEncoding.md5(whole) && result.storedLength == whole.count)
    #expect(try blobs.read(result.md5) == whole)

    let dropped = try blobs.upload(gzip: false)
    for _ in 0..<17 {
      try dropped.write([UInt8](repeating: 7, count: piece))
    }
    dropped.discard()
    #expect(try FileManager.default.contentsOfDirectory(atPath: dir) == [BlobStore.hex(result.md5)])
  }
}
