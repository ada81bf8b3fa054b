import SwoopCore

/// Turning untrusted names (from URLs) into file names that stay inside the chosen directory.
package enum FileName {
    /// `path` made absolute against the working directory, `.` and `..` resolved lexically:
    /// two spellings of one target compare equal.
    package static func absolute(_ path: String) -> String {
        if isNormal(path, absolute: true) { return path }
        // `./name`, as a list's entries in the working directory are spelled: `name` (splitting
        // and joining cost a list of 2,000 small files 6% of its instructions).
        var relative = Substring(path)
        while relative.utf8.count > 2, relative.utf8.starts(with: "./".utf8) { relative = relative.dropFirst(2) }
        if isNormal(relative, absolute: false) {
            // The working directory as getcwd gives it is normal already (a list of thousands of
            // relative targets made this a few per cent of a run, splitting and joining).
            let base = FileName.workingDirectory
            return base.hasSuffix("/") ? base + relative : base + "/" + relative
        }
        var base = path.hasPrefix("/") ? "" : FileName.workingDirectory
        base += "/" + path
        var parts: [Substring] = []
        for part in base.split(separator: "/") {
            if part == "." || part.isEmpty { continue }
            if part == ".." { _ = parts.popLast(); continue }
            parts.append(part)
        }
        return "/" + parts.joined(separator: "/")
    }

    /// Whether `path` is absolute (or relative) with nothing to normalise: no empty, `.` or `..`
    /// component and no trailing `/` (the common case, which then costs one pass over the bytes).
    /// Read over the contiguous bytes of a native string (a walk of its `UTF8View` index by index
    /// cost about 30 instructions a byte, twice for every target of a list).
    private static func isNormal(_ path: some StringProtocol, absolute: Bool) -> Bool {
        path.utf8.withContiguousStorageIfAvailable { isNormal(bytes: $0, absolute: absolute) }
            ?? isNormal(bytes: Array(path.utf8), absolute: absolute)
    }

    private static func isNormal(bytes path: some Collection<UInt8>, absolute: Bool) -> Bool {
        var bytes = path.makeIterator()
        if absolute {
            guard bytes.next() == UInt8(ascii: "/") else { return false }
        } else if path.first == UInt8(ascii: "/") {
            return false
        }
        // Bytes of the current component so far, and whether they are all dots.
        var length = 0
        var dots = true
        while let byte = bytes.next() {
            if byte == UInt8(ascii: "/") {
                if length == 0 || (dots && length <= 2) { return false }
                length = 0
                dots = true
            } else {
                length += 1
                dots = dots && byte == UInt8(ascii: ".")
            }
        }
        return length > 0 && !(dots && length <= 2)
    }

    /// The working directory; `""` when it cannot be read. Asked first with a buffer the
    /// standard library places on the stack (up to 1 KiB): with a PATH_MAX one it was a
    /// `posix_memalign` for each target of a list (1% of the processor time of 20,000 small files).
    private static var workingDirectory: String {
        func read(into capacity: Int) -> String? {
            withUnsafeTemporaryAllocation(of: CChar.self, capacity: capacity) { buffer in
                guard let start = buffer.baseAddress, getcwd(start, buffer.count) != nil else { return nil }
                return String(cString: start)
            }
        }
        return read(into: 1024) ?? read(into: Int(PATH_MAX) + 1) ?? ""
    }

    /// `name` as a single safe path component: separators and control characters replaced by
    /// `_`, at most 255 bytes of UTF-8; `nil` when nothing usable is left (`""`, `.`, `..`).
    package static func sanitized(_ name: String) -> String? {
        // Most names are printable ASCII with nothing to replace: no scalar-by-scalar copy.
        let plain = name.utf8.allSatisfy {
            $0 >= 0x20 && $0 < 0x7F && $0 != UInt8(ascii: "/") && $0 != UInt8(ascii: "\\")
        }
        var cleaned = plain ? name : ""
        for scalar in name.unicodeScalars where !plain {
            switch scalar.value {
            case 0..<0x20, 0x7F, 0x80..<0xA0:
                cleaned.unicodeScalars.append("_")
            case UInt32(UInt8(ascii: "/")), UInt32(UInt8(ascii: "\\")):
                cleaned.unicodeScalars.append("_")
            default:
                cleaned.unicodeScalars.append(scalar)
            }
        }
        cleaned = cleaned.trimmingWhitespace
        guard !cleaned.isEmpty, cleaned != ".", cleaned != ".." else { return nil }
        if cleaned.utf8.count > 255 {
            // Keep the extension, trim the stem, never split a character.
            let dot = cleaned.lastIndex(of: ".")
            let suffix = dot.map { String(cleaned[$0...]) }.flatMap { $0.utf8.count <= 16 ? $0 : nil } ?? ""
            var stem = String(cleaned[..<(suffix.isEmpty ? cleaned.endIndex : dot!)]).unicodeScalars
            // Scalar by scalar: a grapheme cluster can be arbitrarily long.
            while stem.count > 0 && String(stem).utf8.count + suffix.utf8.count > 255 { stem.removeLast() }
            cleaned = (String(stem) + suffix).trimmingWhitespace
        }
        // Shortening can leave nothing usable: check again.
        guard !cleaned.isEmpty, cleaned != ".", cleaned != "..", cleaned.utf8.count <= 255 else { return nil }
        return cleaned
    }
}

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif
