import FoundationEssentials

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// `swoop --experimental-dump-help | swoop-manual DIR [YYYY-MM-DD]`: writes swoop's manual pages
/// (swoop.1 and one per subcommand) into DIR, dated as given (default: today, UTC).
///
/// swift-argument-parser's generate-manual plugin would write them too, but it builds every
/// product of the package first (the test origin with SwiftNIO included) and links
/// .build/release/swoop again without --static-swift-stdlib, over the binary being installed;
/// this reads the same definitions from the binary that is installed.
@main
enum SwoopManualMain {
    static func main() {
        let arguments = CommandLine.arguments.dropFirst()
        guard (1...2).contains(arguments.count), let directory = arguments.first else {
            fail("usage: swoop --experimental-dump-help | swoop-manual DIR [YYYY-MM-DD]")
        }
        do {
            let date = try arguments.count == 2 ? dated(arguments.last!) : today()
            let manual = try ManualPages(dumpHelp: readStandardInput(), date: date)
            for (name, text) in manual.pages {
                try Data(text.utf8).write(to: URL(filePath: directory).appending(path: name))
            }
        } catch {
            fail("swoop-manual: \(error)")
        }
    }

    static let months = [
        "January", "February", "March", "April", "May", "June", "July", "August", "September", "October",
        "November", "December",
    ]

    /// "2026-11-27" → "November 27, 2026".
    static func dated(_ text: String) throws -> String {
        let parts = text.split(separator: "-").compactMap { Int($0) }
        guard parts.count == 3, (1...12).contains(parts[1]), (1...31).contains(parts[2]) else {
            throw ManualError("not a date (YYYY-MM-DD): \(text)")
        }
        return "\(months[parts[1] - 1]) \(parts[2]), \(parts[0])"
    }

    static func today() throws -> String {
        var now = time(nil)
        var parts = tm()
        gmtime_r(&now, &parts)
        return "\(months[Int(parts.tm_mon)]) \(parts.tm_mday), \(Int(parts.tm_year) + 1900)"
    }

    static func readStandardInput() -> [UInt8] {
        var bytes: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 1 << 16)
        while true {
            let count = buffer.withUnsafeMutableBytes { read(STDIN_FILENO, $0.baseAddress, $0.count) }
            if count < 0 && errno == EINTR { continue }
            guard count > 0 else { break }
            bytes += buffer[0..<count]
        }
        return bytes
    }

    static func fail(_ message: String) -> Never {
        let line = Array((message + "\n").utf8)
        _ = line.withUnsafeBytes { write(STDERR_FILENO, $0.baseAddress, $0.count) }
        exit(1)
    }
}
