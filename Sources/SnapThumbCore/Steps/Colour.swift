import VipsKit
import SystemKit

extension PipelineStep {
    /// Everything becomes 8-bit, 3-band sRGB with no alpha. Packed pixels from the
    /// JPEG fast path are sRGB already (the decoder only takes that path for them).
    static let colour = PipelineStep(name: "colour") { snap in
        guard case .vips(let image) = try snap.required(snap.image, "the decoded image") else { return }
        let header = try snap.required(snap.header, "the header")
        do {
            snap.image = .vips(try ColourStep.toSRGB(image, profile: header.profile, background: snap.settings.background))
        } catch let error as VipsError {
            throw SnapError(.corrupt, "cannot convert the colours of this image: \(error.message)", cause: error.description)
        }
    }
}

/// Colour management: everything becomes 8-bit, 3-band sRGB with no alpha.
enum ColourStep {
    /// Converts `image` to sRGB with relative colorimetric intent, from its
    /// embedded profile when it has one (`profile`, read from the header: a
    /// decoded HEIC's own profile blob is unreliable in libvips 8.14.1), or from
    /// a generic CMYK profile for untagged CMYK. Alpha is flattened onto `background`.
    static func toSRGB(_ image: VImage, profile: [UInt8]?, background: Colour) throws -> VImage {
        var colour = image
        var alpha: VImage?
        if image.hasAlpha {
            colour = try image.extractBands(0, count: image.bands - 1)
            alpha = try image.extractBands(image.bands - 1, count: 1)
        }

        colour = try convert(colour, profile: profile)
        if colour.bands == 1 { colour = try colour.colourspaceSRGB() }
        if !colour.isUChar { colour = try colour.castUChar() }

        guard var alpha else { return colour }
        if alpha.format == .ushort { alpha = try alpha.linear(1.0 / 257.0, 0) }
        if !alpha.isUChar { alpha = try alpha.castUChar() }
        return try colour.joined(with: alpha)
            .flattened(red: Double(background.red), green: Double(background.green), blue: Double(background.blue))
            .castUChar()
    }

    private static func convert(_ colour: VImage, profile: [UInt8]?) throws -> VImage {
        let isCMYK = colour.interpretation == .cmyk || (colour.bands == 4 && !colour.hasAlpha && colour.interpretation != .srgb)
        if let profile {
            // A broken or mismatched profile must not fail a decodable image:
            // fall back to the generic profile for the image's colour model.
            if let converted = try? colour.withProfile(profile).iccToSRGB(inputProfile: isCMYK ? "cmyk" : "srgb", embedded: true) {
                return converted
            }
        }
        if isCMYK {
            return try colour.iccToSRGB(inputProfile: "cmyk", embedded: false)
        }
        if colour.interpretation == .srgb && colour.isUChar { return colour }
        return try colour.colourspaceSRGB()
    }
}
