#if canImport(Glibc)
import Glibc
#endif
@testable import SnapThumbStore
@testable import SystemKit
import Foundation
@_spi(Testing) import SnapThumbTesting
import Testing
@testable import SnapThumbCore

/// Directory listing. Run under AddressSanitizer by Scripts/test.sh (`--filter DirectoryEntry`).
@Suite("DirectoryEntry: names read from the record")
struct DirectoryEntryTests {
    /// 3,000 entries plus two that are not UTF-8, with names of every length from 1 to
    /// 255 bytes: a full read buffer ends in a short record, which reading `d_name` as
    /// its declared 256 bytes read past (ASan: heap-buffer-overflow READ of size 256).
    @Test func everyNameOfEveryLengthIsReadExactly() throws {
        let dir = Fixtures.tempDirectory("snapthumb-dirent")
        defer { Fixtures.remove(dir) }
        let alphabet = Array("0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ".utf8)
        var expected: Set<[UInt8]> = []
        for i in 0..<3000 {
            let length = 1 + i % 255
            let name = [alphabet[i / 255]] + [UInt8](repeating: UInt8(ascii: "x"), count: length - 1)
            expected.insert(name)
        }
        expected.insert(Array("caf".utf8) + [0xE9] + Array(".jpg".utf8))
        expected.insert([0xFF, 0xFE])
        for name in expected { try createFile(bytes: Array(dir.utf8) + [0x2F] + name) }

        var seen: [[UInt8]] = []
        #expect(POSIX.forEachEntry(in: dir) { seen.append($0.bytes); return true } == 0)
        #expect(seen.count == expected.count)
        #expect(Set(seen) == expected)
        #expect(Set(seen.map(\.count)) == Set(1...255))

        // The escaped listing has one printable name per entry as well.
        var escaped: Set<String> = []
        #expect(POSIX.forEachName(in: dir) { escaped.insert($0); return true } == 0)
        #expect(escaped.count == expected.count)
        #expect(escaped.contains("caf%E9.jpg") && escaped.contains("%FF%FE"))
    }

    @Test func namesThatAreNotUTF8AreEscapedByteForByte() {
        #expect(FileName(bytes: Array("café.jpg".utf8)).escaped == "café.jpg")
        #expect(FileName(bytes: Array("café.jpg".utf8)).string == "café.jpg")
        let latin1 = FileName(bytes: Array("caf".utf8) + [0xE9] + Array(".jpg".utf8))
        #expect(latin1.string == nil)
        #expect(latin1.escaped == "caf%E9.jpg")
        #expect(FileName(bytes: [0xFF, 0xFE]).escaped == "%FF%FE")
        // Overlong forms and surrogates are not UTF-8; valid neighbours are kept.
        #expect(FileName(bytes: [0xC0, 0xAF, 0x41]).escaped == "%C0%AFA")
        #expect(FileName(bytes: [0xED, 0xA0, 0x80]).escaped == "%ED%A0%80")
        #expect(FileName(bytes: [0xE2, 0x82] + Array("€".utf8)).escaped == "%E2%82€")
    }

    @Test func inotifyNamesThatAreNotUTF8AreFlagged() {
        var record: [UInt8] = [1, 0, 0, 0, 0x80, 0, 0, 0, 0, 0, 0, 0, 16, 0, 0, 0]
        record += [0x61, 0xE9, 0x2E, 0x6A, 0x70, 0x67] + [UInt8](repeating: 0, count: 10)
        let events = POSIX.inotifyEvents(record)
        #expect(events.count == 1)
        #expect(events.first?.name == "a%E9.jpg" && events.first?.isUTF8 == false)
    }
}
