import Swoop

/// A download list in aria2's input-file format:
///
/// ```
/// # a comment
/// https://example.com/a.iso
///   out=disk-a.iso
///   dir=/data/isos
///   header=Authorization: Bearer ...
///   checksum=sha-256=9f86d0...
/// https://example.com/b.iso
/// ```
///
/// A line that starts with a non-blank character holds a URL (aria2's tab-separated mirror URLs
/// are accepted; the first is used). Indented `key=value` lines apply to the URL above them.
struct Manifest {
    struct Entry: Equatable {
        var url: String
        var line: Int
        var out: String?
        var dir: String?
        var headers: [String] = []
        var checksum: String?
    }

    var entries: [Entry] = []
    /// Options Swoop does not use, as "line N: key" (reported, not fatal).
    var ignored: [String] = []

    struct ParseError: Error, CustomStringConvertible {
        var line: Int
        var message: String
        var description: String { "manifest line \(line): \(message)" }
    }

    static func parse(_ text: String) throws -> Manifest {
        var manifest = Manifest()
        for (offset, raw) in text.split(separator: "\n", omittingEmptySubsequences: false).enumerated() {
            let number = offset + 1
            var line = Substring(raw)
            if line.hasSuffix("\r") { line = line.dropLast() }
            let content = line.trimmed
            if content.isEmpty || content.hasPrefix("#") { continue }
            if line.first == " " || line.first == "\t" {
                guard !manifest.entries.isEmpty else {
                    throw ParseError(line: number, message: "option '\(content)' comes before any URL")
                }
                guard let equals = content.firstIndex(of: "=") else {
                    throw ParseError(line: number, message: "expected key=value, got '\(content)'")
                }
                let key = content[..<equals].trimmed.lowercased()
                let value = String(content[content.index(after: equals)...])
                switch key {
                case "out": manifest.entries[manifest.entries.count - 1].out = value
                case "dir": manifest.entries[manifest.entries.count - 1].dir = value
                case "header": manifest.entries[manifest.entries.count - 1].headers.append(value)
                case "checksum": manifest.entries[manifest.entries.count - 1].checksum = value
                default: manifest.ignored.append("line \(number): \(key)")
                }
            } else {
                let first = content.split(separator: "\t").first.map(String.init) ?? content
                manifest.entries.append(Entry(url: first.trimmed, line: number))
            }
        }
        return manifest
    }
}

/// `--shard K/N`: this node's deterministic share of a manifest.
struct Shard: ExpressibleByArgument, Equatable {
    var index: Int
    var count: Int

    init?(argument: String) {
        let parts = argument.split(separator: "/")
        guard parts.count == 2, let index = Int(parts[0].trimmed), let count = Int(parts[1].trimmed),
              count >= 1, index >= 0, index < count
        else { return nil }
        self.index = index
        self.count = count
    }

    /// Whether `url` belongs to this shard: FNV-1a (64-bit) of the URL's bytes, modulo the count,
    /// so every machine computes the same split without talking to the others.
    func contains(_ url: String) -> Bool {
        var hash: UInt64 = 0xcbf2_9ce4_8422_2325
        for byte in url.utf8 {
            hash ^= UInt64(byte)
            hash &*= 0x0000_0100_0000_01B3
        }
        return Int(hash % UInt64(count)) == index
    }
}

import ArgumentParser
