import Foundation
import SnapThumbCore

/// How a publish ended.
public enum PublishOutcome: Sendable, Equatable {
    /// The key had no manifest.
    case created
    /// The same source bytes and recipe again: a harmless repeat, nothing written.
    case repeated
    /// The same source bytes under another recipe (settings, pipeline or library
    /// versions): the outputs were derived again and the manifest rewritten.
    case rederived
    /// `--on-conflict replace`: a manifest of other source bytes, digest `previous`, was replaced.
    case replaced(previous: String)
}

/// The one place that decides what a publish does with an existing manifest, for
/// every store backend: a directory store links its manifest into place (create-only)
/// and an object store puts it with `If-None-Match: *`; on "already exists" both
/// read the existing manifest and ask `decide`.
public enum KeyConflict {
    public enum Decision: Sendable, Equatable {
        /// Nothing to do: same source and same recipe.
        case keep
        /// Write over it: an unreadable manifest, or `replace` of other source
        /// bytes (then `previous` is its digest).
        case overwrite(previous: String?)
        /// Write over it: the same source bytes under another recipe.
        case rederive
        /// Refuse: other source bytes under `refuse`.
        case refuse(SnapError)
    }

    /// - Parameter existing: the published manifest, or nil when it does not parse.
    public static func decide(existing: Manifest?, new: Manifest, policy: ConflictPolicy) -> Decision {
        guard let existing else { return .overwrite(previous: nil) }
        if existing.source.digest == new.source.digest {
            return existing.recipe.digest == new.recipe.digest ? .keep : .rederive
        }
        switch policy {
        case .replace: return .overwrite(previous: existing.source.digest)
        case .refuse: return .refuse(conflict(key: new.key, existing: existing.source.digest, new: new.source.digest))
        }
    }

    /// For a published manifest that was read back twice, the same bytes both
    /// times, and is still not a manifest (an object store's: a transfer that went
    /// wrong is retried, never taken for this). Its source is unknown, so it may
    /// be other bytes: refused as a `conflict` unless `replace`.
    public static func decideUnreadable(key: String, bytes: Int, policy: ConflictPolicy) -> Decision {
        switch policy {
        case .replace: return .overwrite(previous: nil)
        case .refuse:
            return .refuse(SnapError(.conflict, "key \"\(key)\" already has a manifest that cannot be read (read twice: the same \(bytes) byte(s), not a manifest), so it may be of other source bytes; the published one is kept (--on-conflict replace publishes the new one instead)"))
        }
    }

    /// The `conflict` failure, naming both digests.
    public static func conflict(key: String, existing: String, new: String) -> SnapError {
        SnapError(.conflict, "key \"\(key)\" already has a manifest made from other source bytes (published \(existing), this upload \(new)); the published one is kept (--on-conflict replace publishes the new one instead)")
    }
}
