import Foundation
import Testing

/// `wikilog attach`, `get --attachment`, attachments through export and import, and `verify`
/// of the blobs.
@Suite struct AttachmentCommandTests {
  static let allBytes = Data((0...255).map { UInt8($0) })

  func write(_ data: Data, in cli: CLI, _ name: String) throws -> String {
    let file = cli.path + "/" + name
    try data.write(to: URL(fileURLWithPath: file))
    return file
  }

  @Test("attach and get --attachment: the bytes back, the other attachments kept")
  func attachAndGet() throws {
    let cli = try CLI()
    let bin = try write(Self.allBytes, in: cli, "all.bin")
    let first = try cli.ok(["attach", "doc", "a/b.bin", bin, "--type", "image/png"]).object()
    let rev1 = try #require(first["rev"] as? String)
    #expect(try cli.ok(["get", "doc", "--attachment", "a/b.bin"]).data == Self.allBytes)
    let text = try write(Data("hello, attachments\n".utf8), in: cli, "t.txt")
    try cli.fails(["attach", "doc", "t.txt", text, "--type", "text/plain"], "conflict")
    let second = try cli.ok(["attach", "doc", "t.txt", text, "--type", "text/plain", "--rev", rev1])
      .object()
    #expect(second["rev"] as? String != rev1)
    #expect(try cli.ok(["get", "doc", "--attachment", "t.txt"]).stdout == "hello, attachments\n")
    let doc = try cli.ok(["get", "doc"]).object()
    let atts = try #require(doc["_attachments"] as? [String: Any])
    #expect(Set(atts.keys) == ["a/b.bin", "t.txt"])
    #expect((atts["t.txt"] as? [String: Any])?["stub"] as? Bool == true)
    let inline = try cli.ok(["get", "doc", "--attachments"]).object()
    let data = ((inline["_attachments"] as? [String: Any])?["a/b.bin"] as? [String: Any])?["data"]
    #expect(data as? String == Self.allBytes.base64EncodedString())
    // The first revision still has only its attachment.
    #expect(
      try cli.ok(["get", "doc", "--rev", rev1, "--attachment", "a/b.bin"]).data == Self.allBytes)
    try cli.fails(
      ["get", "doc", "--rev", rev1, "--attachment", "t.txt"], "Document is missing attachment")
    try cli.fails(
      ["attach", "doc", "x", "/nonexistent/file", "--rev", rev1], "cannot read /nonexistent/file")
  }

  @Test("a large attachment streams in and out: several MiB chunks, gzip-stored text decoded")
  func largeAttachments() throws {
    let cli = try CLI()
    // 2 MiB of every byte value (two chunks and a part), and 1.2 MB of text stored gzip.
    var bytes = Data(capacity: 2 << 20 + 1024)
    for _ in 0..<(2 << 12 + 4) { bytes.append(Self.allBytes) }
    let bin = try write(bytes, in: cli, "big.bin")
    let rev = try cli.ok(["attach", "big", "big.bin", bin]).object()["rev"] as! String
    #expect(try cli.ok(["get", "big", "--attachment", "big.bin"]).data == bytes)
    let text = Data(String(repeating: "line 1234\n", count: 120_000).utf8)
    let txt = try write(text, in: cli, "big.txt")
    try cli.ok(["attach", "big", "big.txt", txt, "--type", "text/plain", "--rev", rev])
    let stub = try cli.ok(["get", "big"]).object()
    let entry = (stub["_attachments"] as? [String: Any])?["big.txt"] as? [String: Any]
    #expect(entry?["length"] as? Int == text.count)
    #expect(try cli.ok(["get", "big", "--attachment", "big.txt"]).data == text)
    // From standard input too.
    let piped = String(repeating: "standard input ", count: 30_000)
    try cli.ok(["attach", "piped", "p.txt", "-", "--type", "text/plain"], stdin: piped)
    #expect(try cli.ok(["get", "piped", "--attachment", "p.txt"]).stdout == piped)
    try cli.ok(["verify"])
  }

  @Test("export and import carry attachments; verify checks every blob")
  func exportImportVerify() throws {
    let cli = try CLI()
    let bin = try write(Self.allBytes, in: cli, "all.bin")
    let text = try write(Data(String(repeating: "text ", count: 100).utf8), in: cli, "t.txt")
    let r1 = try cli.ok(["attach", "d", "bin", bin]).object()["rev"] as! String
    try cli.ok(["attach", "d", "t.txt", text, "--type", "text/plain", "--rev", r1])
    try cli.ok(["attach", "e", "same", bin])
    let export = try cli.ok(["export"]).stdout
    try cli.ok(["init", "-d", "copy"])
    try cli.ok(["import", "-d", "copy"], stdin: export)
    // The same revisions, attachments included (the header names the database).
    #expect(
      try cli.ok(["-d", "copy", "export"]).lines.dropFirst()
        == export.split(separator: "\n").map(String.init).dropFirst())
    #expect(try cli.ok(["-d", "copy", "get", "d", "--attachment", "bin"]).data == Self.allBytes)
    #expect(
      try cli.ok(["-d", "copy", "get", "d", "--rev", r1, "--attachment", "bin"]).data
        == Self.allBytes)
    #expect(try cli.ok(["get", "d"]).stdout == cli.ok(["-d", "copy", "get", "d"]).stdout)
    let verified = try cli.ok(["verify", "--json"]).object()
    #expect(verified["ok"] as? Bool == true)

    // A missing blob and a damaged one are found.
    let blobs = cli.path + "/wiki/attachments"
    let names = try FileManager.default.contentsOfDirectory(atPath: blobs).filter {
      !$0.hasPrefix(".")
    }
    #expect(names.count == 2)  // the two documents share the binary blob
    let bad = try cli.run(["verify"])
    #expect(bad.status == 0)
    try FileManager.default.removeItem(atPath: blobs + "/" + names[0])
    try Data([1, 2, 3]).write(to: URL(fileURLWithPath: blobs + "/" + names[1]))
    let broken = try cli.run(["verify", "--json"])
    #expect(broken.status == 1)
    #expect(broken.stdout.contains("is missing"))
    #expect(broken.stdout.contains("has 3 bytes"))
  }
}
