import Foundation
@_spi(Testing) import SnapThumbTesting
import Testing
import SnapThumbCore
@testable import snapthumb

/// Issue 41 item 2: face detection lives in a plugin (libSnapThumbFaces.so, OpenCV behind it)
/// that a process opens only when it first looks for faces; start-ups that detect nothing never
/// load OpenCV. What the dynamic linker loads is read from its own log (LD_DEBUG=files, one file
/// per process, so worker processes count too).
@Suite("Face plugin", .serialized)
struct FacePluginTests {
    /// Runs snapthumb with the dynamic linker's log of every file it opens; returns the result
    /// and that log (all processes').
    static func runLogged(_ arguments: [String], binary: String = CLI.binary) throws -> (CLI.Result, String) {
        let dir = Fixtures.tempDirectory("face-plugin-ld")
        defer { Fixtures.remove(dir) }
        let result = try CLI.run(arguments, environment: ["LD_DEBUG": "files", "LD_DEBUG_OUTPUT": "\(dir)/ld"], binary: binary)
        var log = ""
        for name in try FileManager.default.contentsOfDirectory(atPath: dir).sorted() {
            log += try String(contentsOfFile: "\(dir)/\(name)", encoding: .utf8)
        }
        return (result, log)
    }

    static func loaded(_ log: String, _ library: String) -> Bool {
        log.split(separator: "\n").contains { $0.contains("file=") && $0.contains(library) }
    }

    @Test("faces off: the process never loads the plugin or OpenCV; faces on: it opens the plugin and finds the face")
    func loadsOnFirstDetection() throws {
        let store = Fixtures.tempDirectory("face-plugin-store")
        defer { Fixtures.remove(store) }
        let sample = Fixtures.sample("people/side-person.jpg")

        let (off, offLog) = try Self.runLogged(["process", sample, "--store", "\(store)/off", "--faces", "off"])
        #expect(off.status == 0, "\(off.stderr)")
        #expect(Self.loaded(offLog, "libjpeg"), "the linker's log is empty: LD_DEBUG did not work")
        #expect(!Self.loaded(offLog, "libopencv"), "OpenCV loaded with --faces off")
        #expect(!Self.loaded(offLog, FaceSupport.pluginFileName))

        let (version, versionLog) = try Self.runLogged(["version", "--json"])
        #expect(version.status == 0)
        #expect(!Self.loaded(versionLog, "libopencv"), "version loads OpenCV")

        let (on, onLog) = try Self.runLogged(["process", sample, "--store", "\(store)/on", "--faces", "on"])
        #expect(on.status == 0, "\(on.stderr)")
        #expect(Self.loaded(onLog, FaceSupport.pluginFileName))
        #expect(Self.loaded(onLog, "libopencv_dnn"))
        // Opened with dlopen by snapthumb itself, not as a dependency the binary names.
        #expect(onLog.split(separator: "\n").contains { $0.contains(FaceSupport.pluginFileName) && $0.contains("dynamically loaded by") },
                "\(onLog.split(separator: "\n").filter { $0.contains(FaceSupport.pluginFileName) })")
        #expect(on.stdout.contains(#""source":"faces""#) || on.stdout.contains(#""source" : "faces""#), "no face found: \(on.stdout)")
    }

    /// A copy of the binary in a folder of its own, without the plugin beside it or in ../lib/snapthumb.
    static func binaryWithoutPlugin() throws -> (dir: String, binary: String) {
        let dir = Fixtures.tempDirectory("face-plugin-missing")
        try FileManager.default.createDirectory(atPath: "\(dir)/bin", withIntermediateDirectories: true)
        let copy = "\(dir)/bin/snapthumb"
        do { try FileManager.default.linkItem(atPath: CLI.binary, toPath: copy) } catch {
            try FileManager.default.copyItem(atPath: CLI.binary, toPath: copy)
        }
        return (dir, copy)
    }

    @Test("a missing plugin: faces on is a usage error before any upload (exit 2, saying where it looked); faces off works; version says so")
    func missingPlugin() throws {
        let (dir, binary) = try Self.binaryWithoutPlugin()
        defer { Fixtures.remove(dir) }
        let sample = Fixtures.sample("people/side-person.jpg")

        let on = try CLI.run(["process", sample, "--store", "\(dir)/store-on"], binary: binary)
        #expect(on.status == 2, "\(on.stderr)")
        #expect(on.stderr.contains("\(FaceSupport.pluginFileName) is missing"), "\(on.stderr)")
        #expect(on.stderr.contains("\(dir)/bin/\(FaceSupport.pluginFileName)"), "\(on.stderr)")
        #expect(on.stderr.contains("--faces off"), "\(on.stderr)")
        #expect(!FileManager.default.fileExists(atPath: "\(dir)/store-on/manifests/side-person.jpg.json"))

        let off = try CLI.run(["process", sample, "--store", "\(dir)/store-off", "--faces", "off"], binary: binary)
        #expect(off.status == 0, "\(off.stderr)")
        #expect(FileManager.default.fileExists(atPath: "\(dir)/store-off/manifests/side-person.jpg.json"))

        let version = try CLI.run(["version", "--json"], binary: binary)
        #expect(version.status == 0)
        let info = try JSONDecoder().decode(SnapThumbVersion.Info.self, from: Data(version.stdout.utf8))
        #expect(info.facePlugin.present == false && info.facePlugin.path == nil)
        let text = try CLI.run(["version"], binary: binary)
        #expect(text.stdout.contains("face plugin: missing"), "\(text.stdout)")

        // Installed: <prefix>/bin/snapthumb finds <prefix>/lib/snapthumb/libSnapThumbFaces.so.
        let plugin = URL(fileURLWithPath: CLI.binary).deletingLastPathComponent().appendingPathComponent(FaceSupport.pluginFileName).path
        try FileManager.default.createDirectory(atPath: "\(dir)/lib/snapthumb", withIntermediateDirectories: true)
        try FileManager.default.copyItem(atPath: plugin, toPath: "\(dir)/lib/snapthumb/\(FaceSupport.pluginFileName)")
        let installed = try CLI.run(["version", "--json"], binary: binary)
        let found = try JSONDecoder().decode(SnapThumbVersion.Info.self, from: Data(installed.stdout.utf8))
        #expect(found.facePlugin.present && found.facePlugin.path == "\(dir)/lib/snapthumb/\(FaceSupport.pluginFileName)")
        let detected = try CLI.run(["process", sample, "--store", "\(dir)/store-installed"], binary: binary)
        #expect(detected.status == 0, "\(detected.stderr)")
        #expect(detected.stdout.contains("faces"), "\(detected.stdout)")
    }

    @Test("a plugin that does not load (not a shared library): each upload with faces fails saying so, nothing published; faces off works")
    func brokenPlugin() throws {
        let (dir, binary) = try Self.binaryWithoutPlugin()
        defer { Fixtures.remove(dir) }
        try Data("not a shared library\n".utf8).write(to: URL(fileURLWithPath: "\(dir)/bin/\(FaceSupport.pluginFileName)"))
        let sample = Fixtures.sample("people/side-person.jpg")

        let on = try CLI.run(["process", sample, "--store", "\(dir)/store-on"], binary: binary)
        #expect(on.status == 1, "\(on.stderr)")
        #expect(on.stderr.contains("internal"), "\(on.stderr)")
        #expect(on.stderr.contains("the face plugin \(dir)/bin/\(FaceSupport.pluginFileName) does not load"), "\(on.stderr)")
        #expect(!FileManager.default.fileExists(atPath: "\(dir)/store-on/manifests/side-person.jpg.json"))

        let off = try CLI.run(["process", sample, "--store", "\(dir)/store-off", "--faces", "off"], binary: binary)
        #expect(off.status == 0, "\(off.stderr)")
    }
}
