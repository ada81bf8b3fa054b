import Foundation

/// The kernel's TCP socket tables (`/proc/self/net/tcp` and `tcp6`) of this process's network
/// namespace, read to the end: the kernel hands a long table out a page per read, and
/// `String(contentsOfFile:)` stops after the first (27 rows).
enum SocketTable {
    /// One socket: its local and remote ports, its state ("0A": listening) and its inode, which a
    /// process's descriptor links to as "socket:[INODE]".
    struct Row {
        let localPort: Int
        let remotePort: Int
        let state: Substring
        let inode: Substring
    }

    static func rows() -> [Row] {
        var rows: [Row] = []
        for table in ["/proc/self/net/tcp", "/proc/self/net/tcp6"] {
            guard let handle = FileHandle(forReadingAtPath: table), let data = try? handle.readToEnd() else { continue }
            try? handle.close()
            let text = String(decoding: data, as: UTF8.self)
            for line in text.split(separator: "\n").dropFirst() {
                // sl local_address rem_address st queues tr retrnsmt uid timeout inode
                let fields = line.split(separator: " ")
                guard fields.count > 9, let local = port(fields[1]), let remote = port(fields[2]) else { continue }
                rows.append(Row(localPort: local, remotePort: remote, state: fields[3], inode: fields[9]))
            }
        }
        return rows
    }

    /// The port of "ADDRESS:PORT" in hex.
    private static func port(_ field: Substring) -> Int? {
        field.split(separator: ":").last.flatMap { Int($0, radix: 16) }
    }

    /// The inode a descriptor's link names, if it is a socket ("socket:[INODE]").
    static func socketInode(_ link: String) -> Substring? {
        guard link.hasPrefix("socket:["), link.hasSuffix("]") else { return nil }
        return link.dropFirst("socket:[".count).dropLast()
    }
}
