extension PipelineStep {
    /// SHA-256 of every variant: the blobs the store keeps by content address,
    /// square100 first (then its modern twin, if any), then the pixel-art pair.
    static let hash = PipelineStep(name: "hash") { snap in
        let order = ["square100", "square100-avif", "square100-heic", "pixel25", "pixel100"]
        snap.encoded.sort { (order.firstIndex(of: $0.name) ?? order.count) < (order.firstIndex(of: $1.name) ?? order.count) }
        snap.blobs = snap.encoded.map { Blob($0.fitted.bytes) }
    }
}
