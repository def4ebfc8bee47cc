import Foundation
import SnapThumbCore
import SnapThumbStore
import VipsKit
import SystemKit

/// The decode floor `bench` measures beside the pipeline: each JPEG read and
/// decoded at 1/4 scale by libjpeg-turbo (the scale the pipeline decodes a snap
/// at), pixels thrown away, nothing else. Any thumbnailer of these files spends
/// at least this; what SnapThumb spends on top is its own work (the three
/// variants, budgets, hashing, the durable store).
public enum DecodeFloor {
    /// Decodes every JPEG among `paths` (symbolic links followed); returns how
    /// many decoded. Other files and failures are skipped (and reported to `failed`).
    public static func run(_ paths: [String], failed: (String, String) -> Void = { _, _ in }) -> Int {
        var decoded = 0
        for path in paths where isJPEG(path) {
            do {
                let source = try InputFile.read(URL(fileURLWithPath: path).resolvingSymlinksInPath().path, limit: Int.max)
                // libjpeg-turbo's own decoder, not the pipeline's Huffman decoder and
                // paired IDCTs: the floor is what the library alone costs.
                let decoder = try JPEGDecoder(source, failOn: 0, ownHuffmanDecoder: false)
                _ = try decoder.decodePixels(shrink: 4)
                decoded += 1
            } catch {
                failed(path, describe(error))
            }
        }
        return decoded
    }

    /// Whether the file starts like a JPEG (FF D8 FF).
    static func isJPEG(_ path: String) -> Bool {
        guard let handle = FileHandle(forReadingAtPath: path) else { return false }
        defer { try? handle.close() }
        return (try? handle.read(upToCount: 3)).map { [UInt8]($0) == [0xFF, 0xD8, 0xFF] } ?? false
    }
}
