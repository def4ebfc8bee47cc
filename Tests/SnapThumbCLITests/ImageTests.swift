import Foundation
import Testing
import SnapThumbTesting
import SnapThumbCore

/// The image Scripts/build-image.sh makes (an OCI archive from Debian's packages), unpacked with
/// umoci and run as a container runtime would: its user, its size, a snap processed inside.
///
/// Building it needs a release build (minutes on 2 cores) and Debian's mirror, so it is not on the
/// default test path: SNAPTHUMB_TEST_IMAGE=OUT.tar checks an archive already built, and
/// SNAPTHUMB_TEST_BUILD_IMAGE=1 builds one first (with .build/release/snapthumb when it exists).
@Suite("container image", .serialized,
       .enabled(if: ProcessInfo.processInfo.environment["SNAPTHUMB_TEST_IMAGE"] != nil || ProcessInfo.processInfo.environment["SNAPTHUMB_TEST_BUILD_IMAGE"] == "1",
                "a release build and Debian's mirror: set SNAPTHUMB_TEST_IMAGE=OUT.tar or SNAPTHUMB_TEST_BUILD_IMAGE=1"))
struct ImageTests {
    static let environment = ProcessInfo.processInfo.environment

    static func shell(_ script: String) throws -> (status: Int32, output: String) {
        try SystemdUnitTests.run("/bin/bash", ["-c", script])
    }

    @Test("Scripts/build-image.sh: an OCI archive, user 10001, snapthumb the entrypoint and on PATH, no shell, stripped with its debug info beside, at most 250 MB unpacked; --version and a JPEG and a HEIC processed inside, as that user")
    func image() throws {
        var given = Self.environment["SNAPTHUMB_TEST_IMAGE"]
        if given == nil, Self.environment["SNAPTHUMB_TEST_BUILD_IMAGE"] == "1" {
            let out = Fixtures.tempDirectory("snapthumb-image-build") + "/snapthumb.tar"
            let release = Fixtures.root + "/.build/release/snapthumb"
            let binary = FileManager.default.isExecutableFile(atPath: release) ? " --binary \(release)" : ""
            let built = try Self.shell("\(Fixtures.root)/Scripts/build-image.sh \(out)\(binary)")
            #expect(built.status == 0, "\(built.output)")
            #expect(built.output.split(separator: "\n").last?.hasPrefix("sha256:") == true, "the digest is printed last: \(built.output)")
            given = out
        }
        let archive = try #require(given)
        guard FileManager.default.isExecutableFile(atPath: "/usr/bin/umoci") else {
            Issue.record("umoci is not installed (Scripts/build-image.sh installs it)")
            return
        }
        let work = Fixtures.tempDirectory("snapthumb-image-test")
        defer { Fixtures.remove(work) }
        let unpacked = try Self.shell("""
            set -e; mkdir -p \(work)/layout && tar -C \(work)/layout -xf \(archive)
            tag=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["manifests"][0]["annotations"]["org.opencontainers.image.ref.name"])' \(work)/layout/index.json)
            echo "tag=$tag"
            umoci unpack --image \(work)/layout:$tag \(work)/bundle >/dev/null
            """)
        #expect(unpacked.status == 0, "\(unpacked.output)")
        #expect(unpacked.output.contains("tag=\(SnapThumbVersion.current)"), "\(unpacked.output)")
        let rootfs = work + "/bundle/rootfs"
        let config = try #require(try JSONSerialization.jsonObject(with: Data(contentsOf: URL(fileURLWithPath: work + "/bundle/config.json"))) as? [String: Any])
        let process = try #require(config["process"] as? [String: Any])
        let user = process["user"] as? [String: Any]
        #expect(user?["uid"] as? Int == 10001 && user?["gid"] as? Int == 10001, "\(String(describing: user))")
        #expect((process["args"] as? [String])?.first == "/usr/local/bin/snapthumb")
        #expect((process["env"] as? [String] ?? []).contains { $0.hasPrefix("PATH=") && $0.contains("/usr/local/bin") })

        let size = try Self.shell("du -sb --apparent-size \(rootfs) | cut -f1")
        let bytes = Int(size.output.trimmingCharacters(in: .whitespacesAndNewlines)) ?? .max
        #expect(bytes <= 250_000_000, "\(bytes) bytes unpacked")
        #expect(!FileManager.default.fileExists(atPath: rootfs + "/usr/bin/sh") && !FileManager.default.fileExists(atPath: rootfs + "/usr/bin/apt"))
        let sections = try Self.shell("readelf -S \(rootfs)/usr/local/bin/snapthumb")
        #expect(sections.output.contains(".gnu_debuglink") && !sections.output.contains(".debug_info") && !sections.output.contains(".symtab"), "\(sections.output)")
        let debug = try Self.shell("readelf -S \((archive as NSString).deletingPathExtension).debug")
        #expect(debug.output.contains(".debug_info"), "the debug info beside the archive")

        // As a runtime runs it: /proc mounted (Swift reads its arguments there), as uid 10001.
        let run = "env -i PATH=/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin HOME=/tmp unshare --fork --pid --mount --mount-proc=\(rootfs)/proc chroot --userspec=10001:10001 \(rootfs) /usr/local/bin/snapthumb"
        let version = try Self.shell("\(run) --version")
        #expect(version.output.trimmingCharacters(in: .whitespacesAndNewlines) == SnapThumbVersion.current, "\(version.output)")
        for sample in ["phone-portrait.jpg", "iphone.heic"] {
            try FileManager.default.copyItem(atPath: Fixtures.sample("snaps/\(sample)"), toPath: "\(rootfs)/tmp/\(sample)")
            chmod("\(rootfs)/tmp/\(sample)", 0o644)
        }
        let processed = try Self.shell("\(run) process /tmp/phone-portrait.jpg /tmp/iphone.heic --store /tmp/store --log-level warning")
        #expect(processed.status == 0, "\(processed.output)")
        #expect(Set((try? FileManager.default.contentsOfDirectory(atPath: "\(rootfs)/tmp/store/manifests")) ?? []) == ["phone-portrait.jpg.json", "iphone.heic.json"])
        let verified = try Self.shell("\(run) verify /tmp/store")
        #expect(verified.status == 0, "\(verified.output)")
        let owner = try Self.shell("stat -c %u \(rootfs)/tmp/store/manifests/iphone.heic.json")
        #expect(owner.output.trimmingCharacters(in: .whitespacesAndNewlines) == "10001")
    }
}
