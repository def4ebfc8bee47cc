import Foundation
@_spi(Testing) import SnapThumbTesting
import SystemKit
import Testing
import VipsKit

/// SnapThumb's Huffman decoder and paired IDCTs read libjpeg-turbo's private structs
/// (issue 42): they run only on a version they were tested against, loaded as built.
@Suite struct LibjpegVersionTests {
    @Test("the libjpeg-turbo loaded is the one SnapThumb was built against (a Debian update that changes it fails here)")
    func builtAndLoadedAgree() {
        #expect(!Vips.jpegRuntimeVersion.isEmpty, "the loaded library names its version")
        #expect(Vips.jpegRuntimeVersion == Vips.jpegVersion,
                "built against libjpeg-turbo \(Vips.jpegVersion), loaded \(Vips.jpegRuntimeVersion): rebuild, and test the decoder on it")
    }

    @Test("on the tested version SnapThumb's own decoder runs, and says so nowhere")
    func ownDecoderRuns() throws {
        #expect(Vips.ownJPEGDecoding)
        #expect(Vips.jpegDecodingNote == nil)
        let decoder = try JPEGDecoder(SourceBuffer(try Fixtures.bytes(Fixtures.sample("snaps/phone-portrait.jpg"))), failOn: 2)
        _ = try decoder.decodePixels(shrink: 4, region: nil)
        #expect(decoder.usedOwnHuffmanDecoder)
    }
}
