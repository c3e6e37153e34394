import Foundation
import Testing

/// `wikilog log key|head|prove|check` and `verify --head`.
@Suite struct LogProofCommandTests {
  func file(_ cli: CLI, _ name: String, _ text: String) throws -> String {
    let path = cli.path + "/" + name
    try text.write(toFile: path, atomically: true, encoding: .utf8)
    return path
  }

  func putDocs(_ cli: CLI, _ range: ClosedRange<Int>) throws {
    for i in range {
      try cli.ok(["put", "--actor", "alice"], stdin: #"{"_id":"doc\#(i)","n":\#(i)}"#)
    }
  }

  @Test("init makes a key; heads and proofs check with the public key alone")
  func keyHeadProveCheck() throws {
    let cli = try CLI(initialize: false)
    let created = try cli.ok(["init"])
    let key = try cli.ok(["log", "key"]).stdout.trimmingCharacters(in: .whitespacesAndNewlines)
    #expect(created.stdout.contains(key))
    #expect(key.count == 44)
    let keyJSON = try cli.ok(["log", "key", "--json"]).object()
    #expect(keyJSON["public_key"] as? String == key)
    let attributes = try FileManager.default.attributesOfItem(atPath: cli.path + "/wiki/log.key")
    #expect((attributes[.posixPermissions] as? Int) == 0o600)

    try putDocs(cli, 1...5)
    let h1 = try cli.ok(["log", "head", "--json"])
    let head1 = try h1.object()
    #expect(head1["size"] as? Int == 5)
    #expect((head1["root"] as? String)?.count == 64)
    let h1File = try file(cli, "h1.json", h1.stdout)
    try putDocs(cli, 6...9)

    let proof = try cli.ok(["log", "prove", "3", "--head", h1File, "--json"])
    #expect(try proof.object()["tree_size"] as? Int == 5)
    let proofFile = try file(cli, "p3.json", proof.stdout)
    let checked = try cli.ok(["log", "check", h1File, proofFile, "--key", key])
    #expect(checked.stdout.contains("inclusion proof ok"))
    // The key from a file, and the proof from standard input.
    let keyFile = try file(cli, "wiki.pub", key + "\n")
    try cli.ok(["log", "check", h1File, "-", "--key", keyFile], stdin: proof.stdout)

    // Without --head: a head signed now comes with the proof.
    let fresh = try cli.ok(["log", "prove", "7", "--json"]).object()
    let freshHead = try #require(fresh["head"] as? [String: Any])
    #expect(freshHead["size"] as? Int == 9)
    let freshHeadFile = try file(
      cli, "h-now.json",
      String(decoding: try JSONSerialization.data(withJSONObject: freshHead), as: UTF8.self))
    let freshFile = try file(
      cli, "p7.json",
      String(decoding: try JSONSerialization.data(withJSONObject: fresh), as: UTF8.self))
    try cli.ok(["log", "check", freshHeadFile, freshFile, "--key", key])
    // A proof for another head, a changed proof, a changed head, another key: exit 1.
    try cli.fails(
      ["log", "check", h1File, freshFile, "--key", key], "the proof does not hold")
    var changed = try proof.object()
    var path = try #require(changed["path"] as? [String])
    path[1] = String(path[1].reversed())
    changed["path"] = path
    let changedFile = try file(
      cli, "changed.json",
      String(decoding: try JSONSerialization.data(withJSONObject: changed), as: UTF8.self))
    try cli.fails(
      ["log", "check", h1File, changedFile, "--key", key], "audit path does not lead")
    var forged = head1
    forged["size"] = 4
    let forgedFile = try file(
      cli, "forged.json",
      String(decoding: try JSONSerialization.data(withJSONObject: forged), as: UTF8.self))
    try cli.fails(["log", "check", forgedFile, proofFile, "--key", key], "signature")
    let other = try CLI()
    let otherKey = try other.ok(["log", "key"]).stdout.trimmingCharacters(
      in: .whitespacesAndNewlines)
    try cli.fails(["log", "check", h1File, proofFile, "--key", otherKey], "not the key given")
    try cli.fails(["log", "check", h1File, proofFile, "--key", "nonsense"], "not an Ed25519")

    // Consistency from the older head to now.
    let consistency = try cli.ok(["log", "prove", "--from", h1File, "--json"])
    let c = try consistency.object()
    #expect(c["old_size"] as? Int == 5)
    #expect(c["new_size"] as? Int == 9)
    let newHead = try #require(c["head"] as? [String: Any])
    let newHeadFile = try file(
      cli, "h2.json",
      String(decoding: try JSONSerialization.data(withJSONObject: newHead), as: UTF8.self))
    let cFile = try file(cli, "c.json", consistency.stdout)
    let cChecked = try cli.ok(["log", "check", newHeadFile, cFile, "--key", key])
    #expect(cChecked.stdout.contains("consistency proof ok"))
    try cli.ok(["verify", "--head", h1File])
    try cli.ok(["log", "prove", "--from", h1File])
  }

  @Test("a log forked by the key holder fails the head published before")
  func fork() throws {
    let cli = try CLI()
    try putDocs(cli, 1...6)
    let h = try file(cli, "h.json", try cli.ok(["log", "head", "--json"]).stdout)
    // The same key over other events: the database made again with the old key file.
    let keyFile = cli.path + "/wiki/log.key"
    let saved = try Data(contentsOf: URL(fileURLWithPath: keyFile))
    try FileManager.default.removeItem(atPath: cli.path + "/wiki")
    try cli.ok(["init"])
    try saved.write(to: URL(fileURLWithPath: keyFile))
    try cli.ok(["put", "--actor", "mallory"], stdin: #"{"_id":"doc1","n":1}"#)
    try putDocs(cli, 2...8)
    try cli.fails(["log", "prove", "--from", h, "--json"], "does not extend")
    try cli.fails(["log", "prove", "2", "--head", h], "does not extend")
    let verify = try cli.run(["verify", "--head", h])
    #expect(verify.status == 1)
    #expect(verify.stdout.contains("does not match the head"))
    // A head of another database is refused.
    let other = try CLI()
    let otherHead = try file(cli, "other.json", try other.ok(["log", "head", "--json"]).stdout)
    try cli.fails(["log", "prove", "--from", otherHead], "not signed by this database's key")
  }

  @Test("usage errors and a database without a key")
  func usage() throws {
    let cli = try CLI()
    try putDocs(cli, 1...2)
    try cli.fails(["log", "prove"], status: 64, "give SEQ")
    try cli.fails(["log", "prove", "0"], status: 64, "SEQ starts at 1")
    try cli.fails(["log", "prove", "9"], "no event 9")
    try cli.fails(["log", "prove", "1", "--from", "x.json"], status: 64, "not both")
    try cli.fails(["log", "prove", "--from", cli.path + "/missing.json"], "cannot read")
    try cli.fails(["log", "head", "-d", "nothere"], "no database 'nothere'")
    // A database made before keys: one is made on first need, and stderr says so.
    try FileManager.default.removeItem(atPath: cli.path + "/wiki/log.key")
    let head = try cli.ok(["log", "head", "--json"])
    #expect(head.stderr.contains("made a signing key"))
    #expect(try head.object()["size"] as? Int == 2)
  }

  @Test(
    "history and audit print each row's proof; export, import and backup carry the heads and the key"
  )
  func rowsExportBackup() throws {
    let cli = try CLI()
    try putDocs(cli, 1...3)
    try cli.ok(
      ["put", "--actor", "bob"],
      stdin:
        #"{"_id":"doc2","n":22,"_rev":"\#(try cli.ok(["get", "doc2"]).object()["_rev"] as! String)"}"#
    )
    let key = try cli.ok(["log", "key"]).stdout.trimmingCharacters(in: .whitespacesAndNewlines)
    let rows = try cli.ok(["history", "doc2", "--proof", "--json"]).array()
    #expect(rows.count == 2)
    for case let row as [String: Any] in rows {
      let proof = try #require(row["proof"] as? [String: Any])
      #expect(proof["seq"] as? Int == row["seq"] as? Int)
      let head = try #require(proof["head"] as? [String: Any])
      let headFile = try file(
        cli, "h.json",
        String(decoding: try JSONSerialization.data(withJSONObject: head), as: UTF8.self))
      let proofFile = try file(
        cli, "p.json",
        String(decoding: try JSONSerialization.data(withJSONObject: proof), as: UTF8.self))
      try cli.ok(["log", "check", headFile, proofFile, "--key", key])
    }
    let text = try cli.ok(["history", "doc2", "--proof"]).stdout
    #expect(text.contains("Proof:   leaf "))
    #expect(text.contains("key id"))
    let audit = try cli.ok(["audit", "--proof", "--json"]).array()
    #expect(audit.count == 4)
    #expect(audit.allSatisfy { (($0 as? [String: Any])?["proof"] as? [String: Any]) != nil })
    #expect(
      try cli.ok(["audit", "--json"]).array().allSatisfy { ($0 as? [String: Any])?["proof"] == nil }
    )

    // Export carries the head; import keeps it and exports it again after its own.
    let export = try cli.ok(["export"]).stdout
    let header = try #require(
      try JSONSerialization.jsonObject(with: Data(export.split(separator: "\n")[0].utf8))
        as? [String: Any])
    let heads = try #require(header["log_heads"] as? [[String: Any]])
    #expect(heads.count == 1)
    #expect((heads[0]["head"] as? [String: Any])?["size"] as? Int == 4)
    try cli.ok(["init", "-d", "copy"])
    try cli.ok(["import", "-d", "copy"], stdin: export)
    let again = try cli.ok(["export", "-d", "copy"]).stdout
    let header2 = try #require(
      try JSONSerialization.jsonObject(with: Data(again.split(separator: "\n")[0].utf8))
        as? [String: Any])
    let heads2 = try #require(header2["log_heads"] as? [[String: Any]])
    #expect(heads2.map { $0["database"] as? String } == ["copy", "wiki"])
    // A head whose signature does not verify stops the import before anything is written.
    let forged = export.replacingOccurrences(of: #""size":4"#, with: #""size":5"#)
    try cli.ok(["init", "-d", "other"])
    try cli.fails(["import", "-d", "other"], stdin: forged, "does not verify")
    #expect(try cli.ok(["all-docs", "-d", "other"]).object()["total_rows"] as? Int == 0)

    // A backup keeps the key: heads signed before verify after a restore.
    let h = try file(cli, "before.json", try cli.ok(["log", "head", "--json"]).stdout)
    try cli.ok(["backup", cli.path + "/bk"])
    try FileManager.default.removeItem(atPath: cli.path + "/wiki")
    try cli.ok(["restore", cli.path + "/bk"])
    #expect(try cli.ok(["log", "key"]).stdout.contains(key))
    try cli.ok(["log", "prove", "--from", h])
  }
}
