import Swoop

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

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
/// A line that starts with a non-blank character holds a URL, or several separated by tabs:
/// sources of the same file (aria2's convention; the first names the file). Indented `key=value` lines apply to the URL above them.
struct Manifest {
    struct Entry: Equatable, Sendable {
        var url: String
        var line: Int
        /// More sources of the same file (the line's other tab-separated URLs).
        var mirrors: [String] = []
        var out: String?
        var dir: String?
        var headers: [String] = []
        var checksum: String?
    }

    var entries: [Entry] = []
    /// Options Swoop does not use, as "line N: key" (reported, not fatal).
    var ignored: [String] = []

    struct ParseError: Error, CustomStringConvertible, Sendable {
        var line: Int
        var message: String
        var description: String { "manifest line \(line): \(message)" }
    }

    static func parse(_ text: String) throws -> Manifest {
        var manifest = Manifest()
        var parser = Parser()
        for (offset, raw) in text.split(separator: "\n", omittingEmptySubsequences: false).enumerated() {
            if let entry = try parser.feed(raw, number: offset + 1) { manifest.entries.append(entry) }
        }
        if let entry = parser.finish() { manifest.entries.append(entry) }
        manifest.ignored = parser.ignored
        return manifest
    }

    /// Parses a list one line at a time, so a long list is never held in memory: an entry is
    /// complete when the next URL line (or the end) arrives.
    struct Parser {
        private var pending: Entry?
        /// Options Swoop does not use, as "line N: key".
        private(set) var ignored: [String] = []

        /// Feeds line `number`; returns the entry it completes, if any.
        mutating func feed(_ raw: Substring, number: Int) throws(ParseError) -> Entry? {
            var line = raw
            if line.hasSuffix("\r") { line = line.dropLast() }
            let content = line.trimmed
            if content.isEmpty || content.hasPrefix("#") { return nil }
            if line.first == " " || line.first == "\t" {
                guard pending != nil else {
                    throw ParseError(line: number, message: "option '\(content)' comes before any URL")
                }
                guard let equals = content.firstIndex(of: "=") else {
                    throw ParseError(line: number, message: "expected key=value, got '\(content)'")
                }
                let key = content[..<equals].trimmed.lowercased()
                let value = String(content[content.index(after: equals)...])
                switch key {
                case "out": pending?.out = value
                case "dir": pending?.dir = value
                case "header": pending?.headers.append(value)
                case "checksum": pending?.checksum = value
                default: ignored.append("line \(number): \(key)")
                }
                return nil
            }
            let urls = content.split(separator: "\t").map(\.trimmed).filter { !$0.isEmpty }
            defer { pending = Entry(url: urls.first ?? content.trimmed, line: number, mirrors: Array(urls.dropFirst())) }
            return pending
        }

        /// The last entry, at the end of the list.
        mutating func finish() -> Entry? {
            defer { pending = nil }
            return pending
        }
    }
}

/// A download list read from a file (or standard input) as a sequence of entries, one line at a
/// time: a list of 100,000 URLs costs a line buffer, not 100,000 entries. Standard input, which
/// cannot be read twice, is kept as text.
struct ManifestSource: Sequence, Sendable {
    private enum Origin: Sendable {
        case file(String)
        case text(String)
    }

    private let origin: Origin

    /// `path`, or `-` for standard input (read now).
    init(path: String) throws {
        if path == "-" {
            var text = ""
            while let line = readLine(strippingNewline: false) { text += line }
            origin = .text(text)
        } else {
            guard let file = fopen(path, "r") else {
                throw CommandFailure(status: .usage, message: "cannot read the list \(path): \(String(cString: strerror(errno)))")
            }
            fclose(file)
            origin = .file(path)
        }
    }

    /// Reads the whole list once without keeping it: the number of entries, the options it
    /// ignores, or the first syntax error.
    func check(counting include: (Manifest.Entry) -> Bool) throws -> (entries: Int, included: Int, ignored: [String]) {
        let iterator = makeIterator()
        var entries = 0
        var included = 0
        while let entry = try iterator.nextEntry() {
            entries += 1
            if include(entry) { included += 1 }
        }
        return (entries, included, iterator.ignored)
    }

    func makeIterator() -> Iterator {
        switch origin {
        case .file(let path): Iterator(file: fopen(path, "r"))
        case .text(let text): Iterator(lines: text.split(separator: "\n", omittingEmptySubsequences: false))
        }
    }

    final class Iterator: IteratorProtocol {
        private var file: UnsafeMutablePointer<FILE>?
        private var lines: [Substring]
        private var position = 0
        private var number = 0
        private var parser = Manifest.Parser()
        private var ended = false
        private var buffer: UnsafeMutablePointer<CChar>?
        private var capacity = 0

        fileprivate init(file: UnsafeMutablePointer<FILE>?) {
            self.file = file
            self.lines = []
        }

        fileprivate init(lines: [Substring]) {
            self.file = nil
            self.lines = lines
        }

        deinit {
            if let file { fclose(file) }
            free(buffer)
        }

        var ignored: [String] { parser.ignored }

        /// The next entry; throws on a syntax error (``ManifestSource/check(counting:)`` finds
        /// those before a run, so iteration during a run stops at one instead).
        func nextEntry() throws -> Manifest.Entry? {
            while !ended {
                guard let line = readLine() else {
                    ended = true
                    return parser.finish()
                }
                number += 1
                if let entry = try parser.feed(line, number: number) { return entry }
            }
            return nil
        }

        func next() -> Manifest.Entry? {
            (try? nextEntry()) ?? nil
        }

        private func readLine() -> Substring? {
            if file == nil {
                guard position < lines.count else { return nil }
                defer { position += 1 }
                return lines[position]
            }
            let count = getline(&buffer, &capacity, file)
            guard count >= 0, let buffer else { return nil }
            var line = Substring(String(decoding: UnsafeRawBufferPointer(start: buffer, count: count), as: UTF8.self))
            if line.hasSuffix("\n") { line = line.dropLast() }
            return line
        }
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
