import ArgumentParser
import FoundationEssentials

/// A byte count or rate on the command line: `1500`, `64k`, `10m`, `2g` (powers of 1024).
struct ByteCount: ExpressibleByArgument, Equatable {
    var bytes: Int64

    init(bytes: Int64) {
        self.bytes = bytes
    }

    init?(argument: String) {
        let text = argument.trimmed.lowercased()
        guard let last = text.last else { return nil }
        var multiplier: Int64 = 1
        var digits = Substring(text)
        switch last {
        case "k": multiplier = 1 << 10
        case "m": multiplier = 1 << 20
        case "g": multiplier = 1 << 30
        default: break
        }
        if multiplier > 1 { digits = digits.dropLast() }
        if digits.hasSuffix("i") || digits.hasSuffix("b") { return nil }
        guard let value = Double(digits), value >= 0, value.isFinite, value * Double(multiplier) < 9e18 else {
            return nil
        }
        bytes = Int64(value * Double(multiplier))
    }

    var defaultValueDescription: String { "\(bytes)" }
}
