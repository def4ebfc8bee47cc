import ArgumentParser
import Foundation
import SnapThumbConfig

/// "Did you mean …?" for a mistyped subcommand or SNAPTHUMB_* variable.
enum Suggestions {
    /// The candidate nearest to `word` by edit distance, if it is near enough to be a typo.
    static func nearest(_ word: String, in candidates: [String]) -> String? {
        let w = Array(word.lowercased())
        var best: (String, Int)?
        for candidate in candidates {
            let d = distance(w, Array(candidate.lowercased()))
            if best == nil || d < best!.1 { best = (candidate, d) }
        }
        guard let (name, d) = best else { return nil }
        return d <= max(2, w.count / 3) && d < w.count ? name : nil
    }

    /// Levenshtein distance, with a swap of two neighbours counted as one edit.
    static func distance(_ a: [Character], _ b: [Character]) -> Int {
        if a.isEmpty || b.isEmpty { return max(a.count, b.count) }
        var rows = [[Int]](repeating: [Int](repeating: 0, count: b.count + 1), count: a.count + 1)
        for i in 0...a.count { rows[i][0] = i }
        for j in 0...b.count { rows[0][j] = j }
        for i in 1...a.count {
            for j in 1...b.count {
                let cost = a[i - 1] == b[j - 1] ? 0 : 1
                rows[i][j] = min(rows[i - 1][j] + 1, rows[i][j - 1] + 1, rows[i - 1][j - 1] + cost)
                if i > 1, j > 1, a[i - 1] == b[j - 2], a[i - 2] == b[j - 1] { rows[i][j] = min(rows[i][j], rows[i - 2][j - 2] + 1) }
            }
        }
        return rows[a.count][b.count]
    }

    /// The visible subcommands' names.
    static var subcommands: [String] {
        SnapThumb.configuration.subcommands.filter { $0.configuration.shouldDisplay }.compactMap { $0.configuration.commandName }
    }

    /// "Did you mean 'snapthumb process'?" when the first argument is not a subcommand but close to one.
    static func subcommand(for arguments: [String]) -> String? {
        guard let first = arguments.first, !first.hasPrefix("-"), !subcommands.contains(first),
              let name = nearest(first, in: subcommands) else { return nil }
        return "Did you mean 'snapthumb \(name)'?"
    }

    /// Every SNAPTHUMB_* name SnapThumb reads: one per long flag of every subcommand (read from
    /// their help, so a new flag is known without another list), and the bucket settings.
    static var environmentNames: Set<String> {
        var names = Set(CloudSettings.environmentNames.filter { $0.hasPrefix("SNAPTHUMB_") })
        for command in SnapThumb.configuration.subcommands {
            let help = SnapThumb.helpMessage(for: command, columns: 10_000)
            for match in help.matches(of: /--([a-z][a-z0-9-]*)/) {
                names.insert("SNAPTHUMB_" + match.1.uppercased().replacingOccurrences(of: "-", with: "_"))
            }
        }
        return names
    }

    /// The names most environments set, known without rendering every subcommand's help (that
    /// costs tens of milliseconds, paid only when a name is not in here). A test keeps each of
    /// them a real one.
    static let common: Set<String> = Set([
        "config", "store", "jobs", "log-format", "log-level", "budget", "budget-mode", "square-size", "crop", "faces", "palette",
        "colours", "dither", "grid", "pixel-scale", "pixel-budget", "grid-budget", "background", "quality-min", "quality-max",
        "chroma", "modern", "modern-effort", "on-conflict", "fail-on", "max-bytes", "max-pixels", "max-pixels-full-decode",
        "payload-limit", "payload-reserve", "report", "progress-interval", "isolation", "shard", "worker-id", "create",
        "poll", "poll-interval", "settle", "drain-timeout", "image-timeout", "metrics-file", "metrics-interval", "listen",
    ].map { "SNAPTHUMB_" + $0.uppercased().replacingOccurrences(of: "-", with: "_") }).union(CloudSettings.environmentNames.filter { $0.hasPrefix("SNAPTHUMB_") })

    /// A warning for each SNAPTHUMB_* variable that no setting reads (a typo is otherwise silently ignored).
    static func unknownEnvironment(_ environment: [String: String]) -> [String] {
        // SNAPTHUMB_TEST_* and SNAPTHUMB_REQUIRE_* belong to the test suite (Scripts/test.sh sets them for every process).
        let unknown = environment.keys.filter {
            $0.hasPrefix("SNAPTHUMB_") && !common.contains($0) && !$0.hasPrefix("SNAPTHUMB_TEST_") && !$0.hasPrefix("SNAPTHUMB_REQUIRE_")
        }.sorted()
        guard !unknown.isEmpty else { return [] }
        let known = environmentNames
        return unknown.filter { !known.contains($0) }.map { name in
            let hint = nearest(name, in: known.sorted()).map { " (did you mean \($0)?)" } ?? ""
            return "warning: \(name) is not a SnapThumb setting and is ignored\(hint)"
        }
    }
}
