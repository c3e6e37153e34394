import Foundation
import JSON
import Log
import Projections
import Query
import RevTree
import StoreTestSupport
import TestSupport
import Testing
import Wiki

@Suite(.serialized) struct DocumentCrashTests {
  /// Kills a writing worker at random moments, reopening the same directory each time: every
  /// acknowledged revision is there with its body and its attachments, every projection equals
  /// its rebuild, and the log and every referenced attachment blob verify.
  func crashTrials(mode: String, trials: Int) throws {
    let path = NSTemporaryDirectory() + "wikilog-doccrash-\(mode)-\(UUID().uuidString)"
    defer { try? FileManager.default.removeItem(atPath: path) }
    var generator = SystemRandomNumberGenerator()
    var totalAcked = 0
    var attachmentsChecked = 0
    for trial in 0..<trials {
      let worker = try ChildProcess(
        ChildProcess.besideTests("ProjectionsTestWorker"), ["write", path, mode])
      #expect(
        worker.waitFor(timeout: 20) { $0.contains { $0.hasPrefix("ack") } },
        "trial \(trial): no ack")
      usleep(UInt32.random(in: 0...120_000, using: &generator))
      worker.kill()
      let acks = worker.lines.compactMap { line -> (id: String, rev: String, n: String)? in
        // "ack ID REV N"; ids may hold spaces, the rev and N never do.
        guard line.hasPrefix("ack ") else { return nil }
        let parts = line.dropFirst(4).split(separator: " ")
        guard parts.count >= 3 else { return nil }
        return (
          parts.dropLast(2).joined(separator: " "), String(parts[parts.count - 2]),
          String(parts[parts.count - 1])
        )
      }
      totalAcked += acks.count

      let store = try DocumentStore(
        directory: path, projections: [WikiProjection(), DraftProjection()],
        validation: .touchWiki)
      for ack in acks {
        let doc: JSONValue
        do {
          doc = try store.get(ack.id, options: GetOptions(rev: ack.rev))
        } catch {
          Issue.record("trial \(trial): acknowledged \(ack.id) \(ack.rev) is lost: \(error)")
          continue
        }
        switch ack.n {
        case "-": #expect(doc[path: "_deleted"] == .bool(true), "trial \(trial): \(ack)")
        case "?": break
        default:
          let n = Int(ack.n)!
          #expect(doc[path: "n"] == .number(JSONNumber(Int64(n))), "trial \(trial): \(ack)")
          // An acknowledged attachment is there, whole (the worker's attachmentData(n)).
          if let stub = doc["_attachments"]?["a-\(n % 3).bin"] {
            #expect(stub["stub"] == .bool(true))
            let found = try store.attachment(ack.id, name: "a-\(n % 3).bin", rev: ack.rev)
            let data = try store.attachmentData(found.attachment)
            #expect(
              data == (0..<(200 + n % 500)).map { UInt8(truncatingIfNeeded: $0 &* 31 &+ n) },
              "trial \(trial): \(ack) attachment")
            attachmentsChecked += 1
          }
        }
      }
      for name in store.projectionNames {
        #expect(try store.verify(name) == [], "trial \(trial): projection \(name)")
      }
      let report = try store.log.verify()
      #expect(report.isValid, "trial \(trial): \(report)")
      // No event references a blob that is missing or damaged.
      #expect(try store.verifyAttachments() == [], "trial \(trial): attachment blobs")
      let all = try store.allDocs()
      let docCount = try store.info.docCount
      #expect(all.rows.count == all.totalRows && all.totalRows == docCount)
      store.close()
    }
    #expect(totalAcked > trials)
    #expect(attachmentsChecked > 0)
  }

  @Test("SIGKILL during synced document writes loses no acknowledged revision")
  func killDuringSyncedWrites() throws {
    try crashTrials(mode: "synced", trials: 6)
  }

  @Test("SIGKILL during group-committed document writes loses no acknowledged revision")
  func killDuringGroupCommits() throws {
    try crashTrials(mode: "group", trials: 6)
  }
}
