import FaceKit

/// The face plugin as the pipeline and `snapthumb version` see it: face detection (the default,
/// `square.faces`) lives in a shared library opened on the first detection (FaceKit's
/// `FacePlugin`), so that a process that detects no faces never loads OpenCV.
public enum FaceSupport {
    /// The plugin's file name (libSnapThumbFaces.so).
    public static var pluginFileName: String { FacePlugin.fileName }
    /// Where the plugin is, without loading it; nil when it is missing.
    public static var pluginPath: String? { FacePlugin.path }
    /// Whether this process has opened the plugin (and so OpenCV).
    public static var pluginLoaded: Bool { FacePlugin.isLoaded }

    /// With faces on, a missing plugin is a configuration error found when the pipeline is
    /// built, before any upload (exit 2), not an `internal` failure of every upload. Only looks
    /// for the file: OpenCV loads on the first detection.
    static func require(_ settings: Settings) throws {
        guard settings.square.faces else { return }
        do {
            try FacePlugin.requirePresent()
        } catch let error as FaceDetectorError {
            throw SnapError(.config, "face detection (--faces on, the default) cannot run: \(error.message); install it with SnapThumb (Scripts/install.sh puts it in <prefix>/lib/snapthumb) or use --faces off",
                            cause: error.message)
        }
    }
}
