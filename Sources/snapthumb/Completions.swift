import ArgumentParser
import Logging
import SnapThumbConfig
import SnapThumbCore
import SnapThumbStore
import VipsKit
import SystemKit

/// The values shell completions offer for flags that take a word (generated from
/// the same enums that parse them, so a new value completes without another edit).
enum Completions {
    static let crop = CompletionKind.list(CropMode.allCases.map(\.rawValue) + ["center"])
    static let faces = CompletionKind.list(["on", "off"])
    static let budgetMode = CompletionKind.list(Settings.BudgetMode.allCases.map(\.rawValue))
    static let onConflict = CompletionKind.list(ConflictPolicy.allCases.map(\.rawValue))
    static let chroma = CompletionKind.list(JPEG.Chroma.allCases.map(\.rawValue))
    static let modern = CompletionKind.list(HEIF.Codec.allCases.map(\.rawValue) + ["none"])
    static let pixelStyle = CompletionKind.list(Settings.PixelStyle.allCases.map(\.rawValue))
    static let palette = CompletionKind.list(["adaptive"] + PaletteChoice.builtIn.keys.sorted())
    static let failOn = CompletionKind.list(Settings.FailOn.allCases.map(\.rawValue))
    static let logFormat = CompletionKind.list(LogFormat.allCases.map(\.rawValue))
    static let logLevel = CompletionKind.list(Logger.Level.allCases.map(\.rawValue))
    static let isolation = CompletionKind.list(["processes", "threads"])
    static let afterSuccess = CompletionKind.list(["move", "delete"])
    static let budget = CompletionKind.list(["none"])
}
