/// One of the AWS tools' shared files (`~/.aws/credentials`, `~/.aws/config`): INI sections of
/// `name = value` lines, `#` and `;` comments, and indented lines under a `name =` with no value
/// (a nested block such as `s3 =`), read as `name.inner`.
package struct SharedConfigFile: Sendable, Equatable {
    /// Settings by section (`default`, `profile dev`, `dev`), names in lower case.
    package private(set) var sections: [String: [String: String]] = [:]

    package init(text: String) {
        var section: String?
        var block: String?
        for rawLine in text.split(omittingEmptySubsequences: false, whereSeparator: { $0 == "\n" || $0 == "\r" }) {
            let indented = rawLine.first == " " || rawLine.first == "\t"
            let line = rawLine.trimmingWhitespace()
            if line.isEmpty || line.hasPrefix("#") || line.hasPrefix(";") { continue }
            if line.hasPrefix("[") {
                guard let close = line.lastIndex(of: "]") else { continue }
                let name = line[line.index(after: line.startIndex)..<close].trimmingWhitespace()
                section = String(name).collapsingSpaces()
                block = nil
                if let section, sections[section] == nil { sections[section] = [:] }
                continue
            }
            guard let section, let equals = line.firstIndex(of: "=") else { continue }
            let name = line[..<equals].trimmingWhitespace().lowercased()
            var value = String(line[line.index(after: equals)...].trimmingWhitespace())
            if let comment = value.firstRange(of: " #") ?? value.firstRange(of: " ;") {
                value = String(value[..<comment.lowerBound].trimmingWhitespace())
            }
            if indented, let block {
                sections[section]?["\(block).\(name)"] = value
            } else if value.isEmpty {
                block = name
            } else {
                block = nil
                sections[section]?[name] = value
            }
        }
    }

    /// The value of `name` in `section`, if set.
    package func value(_ name: String, in section: String) -> String? {
        sections[section]?[name]
    }
}

extension StringProtocol {
    fileprivate func trimmingWhitespace() -> Substring {
        let isSpace: (Character) -> Bool = { $0 == " " || $0 == "\t" }
        guard let first = firstIndex(where: { !isSpace($0) }) else { return "" }
        let last = lastIndex(where: { !isSpace($0) })!
        return Substring(self[first...last])
    }

    fileprivate func collapsingSpaces() -> String {
        split(separator: " ", omittingEmptySubsequences: true).joined(separator: " ")
    }
}
