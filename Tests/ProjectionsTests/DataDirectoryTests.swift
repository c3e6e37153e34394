import Foundation
import JSON
import Projections
import Testing
import Wiki

@Suite struct DataDirectoryTests {
  let path = NSTemporaryDirectory() + "wikilog-datadir-\(UUID().uuidString)"

  @Test func createListOpenAndDelete() throws {
    defer { try? FileManager.default.removeItem(atPath: path) }
    let data = DataDirectory(path: path)
    #expect(data.databaseNames().isEmpty)
    #expect(throws: StoreError.self) { try data.open("wiki") }

    let wiki = try data.create("wiki")
    try data.create("team/notes")
    #expect(data.databaseNames() == ["team/notes", "wiki"])
    #expect(try data.open("wiki") === wiki)

    let error = #expect(throws: StoreError.self) { try data.create("wiki") }
    #expect(error?.code == .alreadyExists)
    #expect(error?.error == "file_exists")

    _ = try wiki.put(#"{"_id":"a","n":1}"#, actor: "t")
    try data.delete("team/notes")
    #expect(data.databaseNames() == ["wiki"])
    #expect(throws: StoreError.self) { try data.delete("team/notes") }
    data.closeAll()

    let again = DataDirectory(path: path)
    #expect(try again.open("wiki").info.docCount == 1)
  }

  @Test(arguments: [
    "", "Wiki", "1abc", "a b", "a%2Fb", "_users", String(repeating: "a", count: 239),
  ])
  func illegalNames(_ name: String) throws {
    defer { try? FileManager.default.removeItem(atPath: path) }
    let data = DataDirectory(path: path)
    let error = #expect(throws: StoreError.self) { try data.create(name) }
    #expect(error?.error == "illegal_database_name")
    #expect(error?.code == .badRequest)
  }
}
