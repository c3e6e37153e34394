import ArgumentParser
import Formats
import Foundation
import JSON
import Log
import Projections
import Query
import RevTree
import Wiki

struct Init: ParsableCommand {
  static let configuration = CommandConfiguration(
    abstract: "Create the data directory and the database.",
    discussion: """
      Does nothing (and says so) when the database already exists.

      Examples:
        wikilog init                  # the database 'wiki' in the default directory
        wikilog init --db /var/lib/wikilog -d team
      """)

  @OptionGroup var global: GlobalOptions

  func run() throws {
    do {
      try DataDirectory.validate(name: global.database)
    } catch let error as StoreError {
      throw CLIError(error.reason)
    }
    let data = global.dataDirectory()
    defer { data.closeAll() }
    if data.exists(global.database) {
      // Opened (read-only), so that a damaged one says so rather than "already exists".
      try global.openStore(readOnly: true).close()
      printText("database '\(global.database)' already exists in \(global.directory)")
      return
    }
    let store = try data.create(global.database)
    printText("created database '\(global.database)' in \(global.directory)")
    if let key = try? store.log.publicKey(create: false).key {
      printText(
        "its log's public key (check signed tree heads with it): \(Base64.encode(Array(key)))"
      )
    }
  }
}

struct Put: ParsableCommand {
  static let configuration = CommandConfiguration(
    abstract: "Create or update a document (CouchDB's PUT /db/docid).",
    discussion: """
      The document is JSON, given as an argument or on standard input. Its _id names it (or \
      --id; a new UUID when neither is given) and its _rev is the revision it edits (or --rev). \
      With --new-edits=false the revision is stored as given, with its _revisions history, as \
      replication writes it: no new revision id is made and a known revision is a no-op. \
      Prints {"ok":true,"id":...,"rev":...}. Documents of type "wiki" and "page" must follow \
      the TouchWiki schema (see `wikilog wiki --help`); a refusal is a one-line forbidden \
      error.

      Examples:
        wikilog put '{"_id":"note-1","text":"hello"}' --actor ann
        echo '{"text":"hello again"}' | wikilog put --id note-1 --rev 1-0c7f...
        wikilog put --actor ann \\
          '{"_id":"w1","type":"wiki","title":"W","owner_id":"ann","members":[]}'
        wikilog put '{"_id":"w1:Home","type":"page","wiki_id":"w1","markdown":"Hi"}'
        wikilog put --new-edits=false \\
          '{"_id":"x","_rev":"2-b","_revisions":{"start":2,"ids":["b","a"]}}'
      """)

  @OptionGroup var global: GlobalOptions
  @OptionGroup var actor: ActorOptions
  @Argument(help: "The document as JSON (default: standard input).") var document: String?
  @Option(help: "The document id.") var id: String?
  @Option(help: "The revision being edited.") var rev: String?
  @Option(help: "false: store the revision as given (replication).") var newEdits: Bool = true
  @Option(help: "With --new-edits=false: where the revision came from.") var origin: String = ""

  func run() throws {
    let bytes = try Input.read(document)
    var doc = try Input.object(bytes, what: "document")
    let db = try global.openStore()
    defer { db.close() }
    let docID = id ?? doc["_id"]?.stringValue
    if let docID, docID.hasPrefix("_local/") {
      guard newEdits else { throw CLIError("_local documents are never replicated") }
      do {
        printJSON(try db.store.putLocal(Local.bareID(docID), bytes, actor: actor.name).json)
      } catch let error as StoreError where error.code == .conflict {
        throw Conflicts.error(
          docID: docID, given: doc["_rev"]?.stringValue, store: db.store,
          fix: { #"to update it, put "_rev":"\#($0)" in the document"# })
      }
      return
    }
    if newEdits {
      do {
        let result = try db.store.put(bytes, id: id, rev: rev, actor: actor.name)
        printJSON(result.json)
      } catch let error as StoreError where error.code == .conflict && docID != nil {
        throw Conflicts.error(
          docID: docID!, given: rev ?? doc["_rev"]?.stringValue, store: db.store,
          fix: { #"to update it, pass --rev \#($0) (or "_rev":"\#($0)" in the document)"# },
          fixDeleted: { _ in "to write it again, leave out --rev and _rev" })
      }
      return
    }
    for (key, value) in [("_id", id), ("_rev", rev)] {
      guard let value else { continue }
      if let given = doc[key]?.stringValue, given != value {
        throw CLIError("the body's \(key) '\(given)' differs from --\(key.dropFirst()) '\(value)'")
      }
      if doc[key] == nil { doc.members.append(.init(key: key, value: .string(value))) }
    }
    guard let docID = doc["_id"]?.stringValue, let docRev = doc["_rev"]?.stringValue else {
      throw CLIError("--new-edits=false needs the document's _id and _rev")
    }
    let results = try db.store.bulkDocs(
      [.object(doc)], newEdits: false, actor: actor.name, origin: origin)
    if let error = results.first?.error { throw error }
    printJSON(DocumentWriteResult(id: docID, rev: docRev).json)
  }
}

struct Get: ParsableCommand {
  static let configuration = CommandConfiguration(
    abstract: "Print a document as CouchDB's GET /db/docid does.",
    discussion: """
      Examples:
        wikilog get 'w1:Home'
        wikilog get 'w1:Home' --rev 2-9a1f... --revs
        wikilog get 'w1:Home' --conflicts --deleted-conflicts --revs-info
        wikilog get 'w1:Home' --open-revs all
        wikilog get 'w1:Home' --open-revs '["2-9a1f...","3-77c0..."]' --latest
        wikilog get _local/checkpoint
        wikilog get 'w1:Home' --attachments
        wikilog get 'w1:Home' --attachment logo.png > logo.png
      """)

  @OptionGroup var global: GlobalOptions
  @Argument(help: "The document id (_local/... for a local document).") var docID: String
  @OptionGroup var read: DocumentReadOptions
  @Option(
    help: "Write this attachment's bytes (decoded) to standard output instead of the document.")
  var attachment: String?

  func run() throws {
    let db = try global.openStore(readOnly: true)
    defer { db.close() }
    if let attachment {
      let found: FoundAttachment
      do {
        found = try db.store.attachment(docID, name: attachment, rev: read.rev)
      } catch let error as StoreError where error.code == .notFound {
        throw CLIError(
          "not_found: attachment '\(attachment)' of '\(docID)': \(error.reason) in database '\(global.database)'"
        )
      }
      // Streamed from the blob, a MiB at a time, decoded on the way when stored gzip.
      var out = OutputBuffer()
      try db.store.forEachAttachmentChunk(found.attachment) { piece in
        out.append(piece)
        out.flush()
      }
      return
    }
    try read.print(docID, from: db.store, location: "in database '\(global.database)'")
  }
}

struct Attach: ParsableCommand {
  static let configuration = CommandConfiguration(
    abstract: "Add or replace an attachment of a document (CouchDB's PUT /db/docid/name).",
    discussion: """
      Reads FILE ('-' for standard input) and writes a new revision of the document with the \
      attachment NAME holding its bytes; the document's other attachments are kept. Without \
      --rev it creates a new document that holds only the attachment. Text, JSON, JavaScript \
      and XML types are stored gzip, as CouchDB stores them. Prints \
      {"ok":true,"id":...,"rev":...}.

      Examples:
        wikilog attach 'w1:Home' logo.png ./logo.png --type image/png --rev 2-9a1f...
        cat notes.txt | wikilog attach notes notes.txt - --type text/plain
      """)

  @OptionGroup var global: GlobalOptions
  @OptionGroup var actor: ActorOptions
  @Argument(help: "The document id.") var docID: String
  @Argument(help: "The attachment's name (may contain '/').") var name: String
  @Argument(help: "The file to attach ('-' for standard input).") var file: String
  @Option(help: "The content type.") var type: String = "application/octet-stream"
  @Option(help: "The leaf revision being edited (none: a new document).") var rev: String?

  func run() throws {
    let input: FileHandle
    if file == "-" {
      input = FileHandle.standardInput
    } else {
      // (`X/.` exists only for a directory, through links too.)
      guard !FileManager.default.fileExists(atPath: file + "/."),
        let handle = FileHandle(forReadingAtPath: file)
      else {
        throw CLIError("cannot read \(file)")
      }
      input = handle
    }
    defer { if file != "-" { try? input.close() } }
    let db = try global.openStore()
    defer { db.close() }
    do {
      // The file goes into the blob store a MiB at a time (gzipped on the way for a
      // compressible type, as CouchDB stores it), then the revision names the blob.
      let compress = AttachmentEncoding.isCompressible(type)
      let upload = try db.store.blobs.upload(gzip: compress)
      let blob: BlobUpload.Result
      do {
        while true {
          let piece: Data
          do {
            piece = try input.read(upToCount: 1 << 20) ?? Data()
          } catch {
            throw CLIError("cannot read \(file): \(error.localizedDescription)")
          }
          if piece.isEmpty { break }
          try upload.write(Array(piece))
        }
        blob = try upload.finish()
      } catch {
        upload.discard()
        throw error
      }
      printJSON(
        try db.store.putStoredAttachment(
          docID, name: name, blob: blob, length: blob.receivedLength, gzipped: compress,
          contentType: type, rev: rev, actor: actor.name
        ).json)
    } catch let error as StoreError where error.code == .conflict && error.error == "conflict" {
      throw Conflicts.error(
        docID: docID, given: rev, store: db.store,
        fix: {
          "to attach to it: \(global.suggest("attach \(Shell.quote(docID)) \(Shell.quote(name)) \(Shell.quote(file)) --rev \($0)"))"
        })
    }
  }
}

struct Delete: ParsableCommand {
  static let configuration = CommandConfiguration(
    abstract: "Delete a document: a tombstone revision on the leaf --rev.",
    discussion: """
      Prints {"ok":true,"id":...,"rev":...} with the tombstone's revision.

      Example:
        wikilog delete 'w1:Old page' --rev 3-5d2e...
      """)

  @OptionGroup var global: GlobalOptions
  @OptionGroup var actor: ActorOptions
  @Argument(help: "The document id.") var docID: String
  @Option(help: "The leaf revision being deleted.") var rev: String

  func run() throws {
    let db = try global.openStore()
    defer { db.close() }
    if docID.hasPrefix("_local/") {
      try LocalDelete.delete(docID, rev: rev, db: db, global: global, actor: actor.name)
      return
    }
    do {
      printJSON(try db.store.delete(docID, rev: rev, actor: actor.name).json)
    } catch let error as StoreError where error.code == .conflict {
      throw Conflicts.error(
        docID: docID, given: rev, store: db.store,
        fix: { "to delete it: \(global.suggest("delete \(Shell.quote(docID)) --rev \($0)"))" },
        fixDeleted: { _ in "there is nothing left to delete" })
    }
  }
}

struct BulkDocs: ParsableCommand {
  static let configuration = CommandConfiguration(
    commandName: "bulk-docs",
    abstract: "Write many documents: a CouchDB _bulk_docs body on standard input.",
    discussion: """
      The body is {"docs": [...]} with an optional "new_edits": false (replication: revisions \
      stored as given with their _revisions). Each document succeeds or fails on its own, as in \
      CouchDB; the accepted ones are written in one transaction. Prints the results array, \
      {"ok":true,"id":...,"rev":...} or {"id":...,"error":...,"reason":...} per document (with \
      new_edits false, only the failures). Exit status 2 when some documents failed.

      Examples:
        echo '{"docs":[{"_id":"a"},{"_id":"b","n":1}]}' | wikilog bulk-docs
        wikilog bulk-docs --origin http://peer/db < batch.json   # new_edits false
      """)

  @OptionGroup var global: GlobalOptions
  @OptionGroup var actor: ActorOptions
  @Option(help: "With new_edits false: where the revisions came from.") var origin: String = ""

  func run() throws {
    let body = try Input.object(Input.read(), what: "on standard input (a _bulk_docs body)")
    guard let docs = body["docs"]?.arrayValue else {
      throw CLIError(#"the _bulk_docs body needs a "docs" array"#)
    }
    var newEdits = true
    if let value = body["new_edits"] {
      guard let b = value.boolValue else { throw CLIError("new_edits must be true or false") }
      newEdits = b
    }
    let db = try global.openStore()
    defer { db.close() }
    let results = try db.store.bulkDocs(
      docs, newEdits: newEdits, actor: actor.name, origin: origin)
    printJSON(.array(results.map(\.json)))
    let failed = results.filter { !$0.ok }
    if !failed.isEmpty {
      // A conflict needs the document's current revision: say where to find it.
      let conflicts = failed.filter { $0.error?.code == .conflict }.map(\.id)
      let hint =
        conflicts.isEmpty
        ? ""
        : " (\(conflicts.count) in conflict: give each its current _rev, shown by \(global.suggest("get \(Shell.quote(conflicts[0]))"))\(conflicts.count > 1 ? " and so on" : ""))"
      throw CLIError(
        "\(failed.count) of \(docs.count) documents were refused\(hint); the others were written",
        code: 2)
    }
  }
}

struct RevsDiff: ParsableCommand {
  static let configuration = CommandConfiguration(
    commandName: "revs-diff",
    abstract: "Which revisions the database lacks: CouchDB's _revs_diff.",
    discussion: """
      Reads {"docid": ["rev", ...], ...} on standard input and prints \
      {"docid": {"missing": [...], "possible_ancestors": [...]}} for the documents with missing \
      revisions.

      Example:
        echo '{"w1:Home":["2-9a1f...","3-x"]}' | wikilog revs-diff
      """)

  @OptionGroup var global: GlobalOptions

  func run() throws {
    let body = try Input.object(Input.read(), what: "on standard input (a _revs_diff body)")
    var request: [(id: String, revs: [String])] = []
    for member in body.members {
      guard let list = member.value.arrayValue, list.allSatisfy({ $0.stringValue != nil }) else {
        throw CLIError("the revisions of '\(member.key)' must be an array of strings")
      }
      request.append((member.key, list.compactMap(\.stringValue)))
    }
    let db = try global.openStore(readOnly: true)
    defer { db.close() }
    let answer = try db.store.revsDiff(request)
    printJSON(
      .object(
        JSONObject(
          answer.map { id, diff in
            var members: [JSONObject.Member] = [
              .init(key: "missing", value: J.strings(diff.missing.map(\.description)))
            ]
            if !diff.possibleAncestors.isEmpty {
              members.append(
                .init(
                  key: "possible_ancestors",
                  value: J.strings(diff.possibleAncestors.map(\.description))))
            }
            return .init(key: id, value: .object(JSONObject(members)))
          })))
  }
}

struct AllDocs: ParsableCommand {
  static let configuration = CommandConfiguration(
    commandName: "all-docs",
    abstract: "List live documents by id: CouchDB's _all_docs.",
    discussion: """
      Keys are document ids as plain strings (not JSON-encoded as in CouchDB's query string). \
      Prints {"total_rows":...,"offset":...,"rows":[...]}.

      Examples:
        wikilog all-docs --limit 10
        wikilog all-docs --start-key 'w1:' --end-key 'w1:\\uffff' --include-docs
        wikilog all-docs --keys '["w1:Home","w1:Nope"]'
      """)

  @OptionGroup var global: GlobalOptions
  @Option(help: "The first id.") var startKey: String?
  @Option(help: "The last id.") var endKey: String?
  @Option(help: "Whether --end-key itself is included.") var inclusiveEnd: Bool = true
  @Option(parsing: .unconditional, help: "At most this many rows.") var limit: Int?
  @Option(help: "Skip this many rows first.") var skip: Int = 0
  @Flag(help: "Newest id first.") var descending = false
  @Flag(help: "Add each document.") var includeDocs = false
  @Flag(help: "With --include-docs: add _conflicts.") var conflicts = false
  @Option(help: "A JSON array of ids to look up instead of a range.") var keys: String?

  func validate() throws {
    if let limit, limit < 0 { throw ValidationError("--limit must be 0 or more") }
    if skip < 0 { throw ValidationError("--skip must be 0 or more") }
  }

  func run() throws {
    var options = AllDocsOptions()
    options.startKey = startKey
    options.endKey = endKey
    options.inclusiveEnd = inclusiveEnd
    options.limit = limit
    options.skip = skip
    options.descending = descending
    options.includeDocs = includeDocs
    options.conflicts = conflicts
    if let keys {
      guard let list = try Input.json(Array(keys.utf8), what: "in --keys").arrayValue,
        list.allSatisfy({ $0.stringValue != nil })
      else { throw CLIError("--keys takes a JSON array of document ids") }
      options.keys = list.compactMap(\.stringValue)
    }
    let db = try global.openStore(readOnly: true)
    defer { db.close() }
    printJSON(try db.store.allDocs(options).json)
  }
}
