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
///   size=4781506560
/// https://example.com/b.iso
/// ```
///
/// A line that starts with a non-blank character holds a URL, or several separated by tabs:
/// sources of the same file (aria2's convention; the first names the file). Indented `key=value`
/// lines apply to the URL above them.
/// `size=` is Swoop's own (aria2 has none): the file's size in bytes, which balances shards by
/// bytes and must match the server's.
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
        /// `size=`: the expected size in bytes.
        var size: Int64?
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
        for (offset, raw) in lines(of: text).enumerated() {
            if let entry = try parser.feed(raw, number: offset + 1) { manifest.entries.append(entry) }
        }
        if let entry = parser.finish() { manifest.entries.append(entry) }
        manifest.ignored = parser.ignored
        return manifest
    }

    /// `text`'s lines, split at each LF byte: a CRLF is one Character, so splitting at the
    /// Character "\n" left a list saved on Windows one line long.
    static func lines(of text: String) -> [Substring] {
        text.utf8.split(separator: UInt8(ascii: "\n"), omittingEmptySubsequences: false).map { Substring($0) }
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
            if line.utf8.last == UInt8(ascii: "\r") { line = Substring(line.utf8.dropLast()) }
            let content = line.trimmed
            if content.isEmpty || content.hasPrefix("#") { return nil }
            // An indented line: its first byte is looked at before its first Character (a
            // grapheme break for every line).
            let lead = line.utf8.first
            if lead == UInt8(ascii: " ") || lead == UInt8(ascii: "\t"), line.first == " " || line.first == "\t" {
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
                case "size":
                    guard let size = Int64(value.trimmed), size >= 0 else {
                        throw ParseError(
                            line: number,
                            message:
                                "size=\(value) is not a number of bytes: write the file's size in bytes, digits only "
                                + "(size=1048576)"
                        )
                    }
                    pending?.size = size
                default: ignored.append("line \(number): \(key)")
                }
                return nil
            }
            // A line without a tab byte is one URL (already trimmed): split only lines with mirrors.
            // Its bytes are scanned in place: a walk of the substring's `UTF8View` cost ~1k
            // instructions a line, and a list's lines are read twice.
            let tab = UInt8(ascii: "\t")
            let hasTab =
                content.utf8.withContiguousStorageIfAvailable { $0.contains(tab) } ?? content.utf8.contains(tab)
            // The entry before it, taken rather than copied.
            let previous = pending.take()
            if hasTab {
                let urls = content.split(separator: "\t").map(\.trimmed).filter { !$0.isEmpty }
                pending = Entry(url: urls.first ?? content, line: number, mirrors: Array(urls.dropFirst()))
            } else {
                pending = Entry(url: content, line: number)
            }
            return previous
        }

        /// The last entry, at the end of the list.
        mutating func finish() -> Entry? {
            pending.take()
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
                throw CommandFailure(
                    status: .usage, message: "cannot read the list \(path): \(String(cString: strerror(errno)))")
            }
            fclose(file)
            origin = .file(path)
        }
    }

    /// Reads the whole list once without keeping it, showing each entry to `visit`: the number of
    /// entries and the options it ignores, or the first syntax error.
    func check(_ visit: (Manifest.Entry) -> Void = { _ in }) throws -> (entries: Int, ignored: [String]) {
        let iterator = makeIterator()
        var entries = 0
        while let entry = try iterator.nextEntry() {
            entries += 1
            visit(entry)
        }
        return (entries, iterator.ignored)
    }

    func makeIterator() -> Iterator {
        switch origin {
        case .file(let path): Iterator(file: fopen(path, "r"))
        case .text(let text): Iterator(lines: Manifest.lines(of: text))
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

        /// The next entry; throws on a syntax error (``ManifestSource/check(_:)`` finds
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
            // The line's LF goes, on bytes (the parser drops a CR before it): as Characters it cost
            // a list of small files 4k instructions a line, and a CRLF was one Character, which
            // left a CR in every URL and option of a list saved on Windows.
            let length = count > 0 && buffer[count - 1] == 0x0A ? count - 1 : count
            return Substring(String(decoding: UnsafeRawBufferPointer(start: buffer, count: length), as: UTF8.self))
        }
    }
}
