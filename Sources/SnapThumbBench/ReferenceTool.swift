import Foundation
import SnapThumbCore
import SnapThumbStore
import SnapThumbRunner

/// A program that makes only the square 100 px Q80 JPEG, for comparison: what
/// SnapThumb must beat while doing all of its work.
public enum ReferenceTool: String, Sendable, CaseIterable {
    /// libvips' own command-line thumbnailer, one process per job.
    case vipsthumbnail
    /// The decode floor: every JPEG decoded at 1/4 scale by libjpeg-turbo and nothing
    /// else (`snapthumb decode-floor`, one process per job): what any thumbnailer of
    /// these files must at least spend. Non-JPEG files are skipped and not counted.
    case floor
    /// Python Pillow's draft-mode (JPEG DCT-scaling) thumbnail, encoded in memory (as issue 27
    /// measures it): one process at one job, a multiprocessing pool of `jobs` otherwise.
    case pillow

    /// Nil when the tool can run here; otherwise a sentence saying how to get it.
    public var unavailableReason: String? {
        switch self {
        case .vipsthumbnail:
            return Self.succeeds(["vipsthumbnail", "--version"]) ? nil
                : "vipsthumbnail not found: install it with 'apt-get install libvips-tools'"
        case .pillow:
            return Self.succeeds(["python3", "-c", "import PIL"]) ? nil
                : "Pillow not found: install it with 'pip install pillow' (python3 is needed too)"
        case .floor:
            return nil
        }
    }

    /// The command lines for one measured run: `jobs` processes for vipsthumbnail
    /// (the files dealt out round-robin), one pool of `jobs` for Pillow.
    func commands(files: [String], jobs: Int, output: String, executable: String) -> [[String]] {
        let n = max(1, min(jobs, files.count))
        func dealt(_ k: Int) -> [String] { stride(from: k, to: files.count, by: n).map { files[$0] } }
        switch self {
        case .vipsthumbnail:
            return (0..<n).map { k in ["vipsthumbnail", "-s", "100x100", "-c", "-o", "\(output)/%s.jpg[Q=80,strip]"] + dealt(k) }
        case .floor:
            return (0..<n).map { k in [executable, "decode-floor", "--output", "\(output)/.decoded-\(k)"] + dealt(k) }
        case .pillow:
            return [["python3", "-c", Self.pillowScript, String(jobs), output] + files]
        }
    }

    /// How many images a run made: the files in its output directory.
    func made(in output: String) -> Int {
        let names = (try? FileManager.default.contentsOfDirectory(atPath: output)) ?? []
        guard self != .vipsthumbnail else { return names.filter { !$0.hasPrefix(".") }.count }
        // The decode loop and the Pillow script write their counts instead of an image per file.
        let prefix = self == .floor ? ".decoded-" : ".made-"
        return names.filter { $0.hasPrefix(prefix) }.compactMap { name in
            (try? String(contentsOfFile: "\(output)/\(name)", encoding: .utf8)).flatMap { Int($0.trimmingCharacters(in: .whitespacesAndNewlines)) }
        }.reduce(0, +)
    }

    /// How many of `files` this tool can make an image of (the floor decodes JPEGs only).
    func expected(_ files: [String]) -> Int {
        guard self == .floor else { return files.count }
        return files.filter { DecodeFloor.isJPEG($0) }.count
    }

    private static func succeeds(_ command: [String]) -> Bool {
        ChildProcesses.run([command]).statuses == [0]
    }

    /// Pillow's fast path: draft() lets libjpeg scale by 1/2–1/8 while decoding,
    /// then EXIF orientation, a centre crop to 100×100 (Lanczos) and a Q80 JPEG in memory;
    /// the count of images made goes to `<output>/.made-pillow`.
    static let pillowScript = """
    import io, os, sys
    from PIL import Image, ImageOps

    def one(path):
        try:
            with Image.open(path) as img:
                img.draft("RGB", (200, 200))
                img = ImageOps.exif_transpose(img).convert("RGB")
                img = ImageOps.fit(img, (100, 100), Image.LANCZOS)
                out = io.BytesIO()
                img.save(out, "JPEG", quality=80)
            return out.tell() > 0
        except Exception as error:
            sys.stderr.write("%s: %s\\n" % (path, error))
            return False

    if __name__ == "__main__":
        jobs, output, files = int(sys.argv[1]), sys.argv[2], sys.argv[3:]
        if jobs <= 1:
            ok = sum(map(one, files))
        else:
            from multiprocessing import Pool
            with Pool(jobs) as pool:
                ok = sum(pool.imap_unordered(one, files, chunksize=4))
        with open(os.path.join(output, ".made-pillow"), "w") as f:
            f.write("%d\\n" % ok)
        sys.exit(0 if ok == len(files) else 1)
    """
}
