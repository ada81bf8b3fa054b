import Swoop

/// Human-readable sizes, rates and durations for the CLI.
enum Format {
    static func bytes(_ count: Int64) -> String {
        let units = ["B", "KiB", "MiB", "GiB", "TiB", "PiB"]
        var value = Double(count)
        var unit = 0
        while value >= 1024 && unit < units.count - 1 {
            value /= 1024
            unit += 1
        }
        if unit == 0 { return "\(count) B" }
        return fixed(value, digits: value < 10 ? 2 : 1) + " " + units[unit]
    }

    static func rate(_ bytesPerSecond: Double) -> String {
        bytes(Int64(bytesPerSecond)) + "/s"
    }

    static func duration(_ seconds: Double) -> String {
        guard seconds.isFinite, seconds >= 0 else { return "--:--" }
        let total = Int(seconds.rounded())
        let (hours, minutes, secs) = (total / 3600, (total % 3600) / 60, total % 60)
        let mm = minutes < 10 ? "0\(minutes)" : "\(minutes)"
        let ss = secs < 10 ? "0\(secs)" : "\(secs)"
        return hours > 0 ? "\(hours):\(mm):\(ss)" : "\(minutes):\(ss)"
    }

    static func seconds(_ duration: Duration) -> Double {
        Double(duration.components.seconds) + Double(duration.components.attoseconds) / 1e18
    }

    static func fixed(_ value: Double, digits: Int) -> String {
        guard value.isFinite else { return "\(value)" }
        var scale = 1.0
        for _ in 0..<digits { scale *= 10 }
        let rounded = (value * scale).rounded() / scale
        var text = "\(rounded)"
        if text.contains("e") { return text }
        if let dot = text.firstIndex(of: ".") {
            let decimals = text.distance(from: dot, to: text.endIndex) - 1
            if decimals < digits { text += String(repeating: "0", count: digits - decimals) }
            if digits == 0 { text = String(text[..<dot]) }
        } else if digits > 0 {
            text += "." + String(repeating: "0", count: digits)
        }
        return text
    }
}

extension StringProtocol {
    /// Without leading and trailing spaces and tabs.
    var trimmed: String {
        let isBlank: (Character) -> Bool = { $0 == " " || $0 == "\t" }
        // Most lines have nothing to trim: their two ends' bytes are looked at before any scan (a
        // Character at each end cost a grapheme break, twice for every line of a list). A
        // Character that is a space or a tab is that one byte.
        let blankByte: (UInt8) -> Bool = { $0 == UInt8(ascii: " ") || $0 == UInt8(ascii: "\t") }
        guard let head = utf8.first else { return "" }
        let tail = utf8[utf8.index(utf8.startIndex, offsetBy: utf8.count - 1)]
        if !blankByte(head) && !blankByte(tail) { return String(self) }
        guard let first = firstIndex(where: { !isBlank($0) }), let last = lastIndex(where: { !isBlank($0) }) else {
            return ""
        }
        return String(self[first...last])
    }
}

extension Format {
    /// What `--checksum` and `checksum=` take.
    static let checksumSyntax =
        "expected ALG=HEX, ALG one of "
        + Checksum.Algorithm.allCases.map(\.rawValue).joined(separator: ", ")
        + " and HEX its digest (sha-256: 64 hex digits; a CRC: its value, e.g. crc32c=e3069283)"

    /// Where a verified digest came from, for people: "expected checksum" or the header.
    static func source(of digest: VerifiedDigest) -> String {
        switch digest.source {
        case .expectedChecksum: "expected checksum"
        case .server(let header): header
        }
    }
}
