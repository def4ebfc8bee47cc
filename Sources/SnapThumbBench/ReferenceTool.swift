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
    /// Python Pillow's draft-mode (JPEG DCT-scaling) thumbnail, a multiprocessing pool of `jobs`.
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
        guard self == .floor else { return names.filter { !$0.hasPrefix(".") }.count }
        // The decode loop writes its count instead of an image per file.
        return names.filter { $0.hasPrefix(".decoded-") }.compactMap { name in
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
    /// then EXIF orientation, a centre crop to 100×100 (Lanczos) and a Q80 JPEG.
    static let pillowScript = """
    import os, sys
    from multiprocessing import Pool
    from PIL import Image, ImageOps

    def one(path):
        try:
            with Image.open(path) as img:
                img.draft("RGB", (200, 200))
                img = ImageOps.exif_transpose(img).convert("RGB")
                img = ImageOps.fit(img, (100, 100), Image.LANCZOS)
                img.save(os.path.join(sys.argv[2], os.path.basename(path) + ".jpg"), "JPEG", quality=80)
            return True
        except Exception as error:
            sys.stderr.write("%s: %s\\n" % (path, error))
            return False

    if __name__ == "__main__":
        jobs, files = int(sys.argv[1]), sys.argv[3:]
        with Pool(jobs) as pool:
            ok = sum(pool.imap_unordered(one, files, chunksize=4))
        sys.exit(0 if ok == len(files) else 1)
    """
}
