#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif
import Swoop

/// What a real download meets besides the network, and which part of the whole path limits it
/// (`swoop bench`): the durable write rate of the file system `get` would write to, the machine's
/// processors (the whole machine's busy share, as /proc/stat counts it: a server on the same
/// machine, the kernel's write-back and Swoop alike), and the network's figure from the counts.
enum BenchPath {
    /// The machine's processor time so far, in clock ticks (/proc/stat's first line).
    struct CPUTimes {
        var busy: UInt64
        var total: UInt64

        /// Now; `nil` where /proc/stat cannot be read.
        static func now() -> CPUTimes? {
            guard let line = firstLine(of: "/proc/stat") else { return nil }
            let fields = line.split(separator: " ").dropFirst().compactMap { UInt64($0.trimmed) }
            // user nice system idle iowait irq softirq steal: idle and iowait are not busy.
            guard fields.count >= 5 else { return nil }
            let total = fields.prefix(8).reduce(0, +)
            return CPUTimes(busy: total - fields[3] - fields[4], total: total)
        }

        /// The share of the machine's processor time that was busy between `earlier` and this.
        func busyShare(since earlier: CPUTimes) -> Double? {
            guard total > earlier.total else { return nil }
            return Double(busy - earlier.busy) / Double(total - earlier.total)
        }
    }

    /// The processor time of this process's transfer threads so far (the threads named
    /// `swoop-transfer`, which receive every byte), in seconds, as the kernel's scheduler counts it
    /// (/proc/self/task/ID/schedstat); `nil` where it is not kept. One thread does the transfer
    /// however many processors the machine has: busy all the time, it is the limit, where the
    /// whole machine's share would show only one processor of many.
    static func transferThreadCPU() -> Double? {
        guard let tasks = opendir("/proc/self/task") else { return nil }
        defer { closedir(tasks) }
        var nanoseconds: UInt64 = 0
        var found = false
        while let entry = readdir(tasks) {
            let id = withUnsafeBytes(of: entry.pointee.d_name) {
                String(decoding: $0.prefix { $0 != 0 }, as: UTF8.self)
            }
            guard id.first?.isNumber == true, firstLine(of: "/proc/self/task/\(id)/comm") == "swoop-transfer",
                let times = firstLine(of: "/proc/self/task/\(id)/schedstat"),
                let running = times.split(separator: " ").first.flatMap({ UInt64($0) })
            else { continue }
            nanoseconds += running
            found = true
        }
        return found ? Double(nanoseconds) / 1e9 : nil
    }

    /// The first line of a small file, without its newline; `nil` when it cannot be read.
    static func firstLine(of path: String) -> String? {
        guard let file = fopen(path, "r") else { return nil }
        defer { fclose(file) }
        var line = [CChar](repeating: 0, count: 512)
        guard fgets(&line, Int32(line.count), file) != nil else { return nil }
        return String(decoding: line.prefix { $0 != 0 && $0 != 10 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }

    /// This process's processor time so far (user and system), in seconds.
    static func processCPU() -> Double {
        var usage = rusage()
        getrusage(RUSAGE_SELF.rawValue, &usage)
        func seconds(_ time: timeval) -> Double { Double(time.tv_sec) + Double(time.tv_usec) / 1e6 }
        return seconds(usage.ru_utime) + seconds(usage.ru_stime)
    }

    /// The durable write rate of the file system that holds `directory`, in bytes per second:
    /// `bytes` written into a new temporary file there in 1 MiB pieces, fsync'ed, timed, and the
    /// file removed. `nil` when it cannot be written (the reason in `failure`).
    static func diskRate(in directory: String, bytes: Int) -> (rate: Double?, failure: String?) {
        var template = Array("\(directory)/.swoop-bench-XXXXXX".utf8CString)
        let descriptor = mkstemp(&template)
        guard descriptor >= 0 else { return (nil, String(cString: strerror(errno))) }
        let path = String(decoding: template.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
        defer {
            close(descriptor)
            unlink(path)
        }
        let piece = 1 << 20
        let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: piece, alignment: 4096)
        defer { buffer.deallocate() }
        // Bytes that do not compress, so a file system that compresses measures its real writes.
        var state: UInt64 = 0x9E37_79B9_7F4A_7C15
        for index in 0..<(piece / 8) {
            state = state &* 6_364_136_223_846_793_005 &+ 1_442_695_040_888_963_407
            buffer.storeBytes(of: state, toByteOffset: index * 8, as: UInt64.self)
        }
        let started = ContinuousClock.now
        var offset = 0
        while offset < bytes {
            // Every piece its own bytes, so that no layer below stores one copy for all of them.
            state = state &* 6_364_136_223_846_793_005 &+ 1_442_695_040_888_963_407
            buffer.storeBytes(of: state, toByteOffset: 0, as: UInt64.self)
            let written = pwrite(descriptor, buffer.baseAddress, min(piece, bytes - offset), off_t(offset))
            guard written > 0 else { return (nil, String(cString: strerror(errno))) }
            offset += written
        }
        guard fsync(descriptor) == 0 else { return (nil, String(cString: strerror(errno))) }
        let seconds = Format.seconds(ContinuousClock.now - started)
        return (seconds > 0 ? Double(bytes) / seconds : nil, nil)
    }

    /// Which part of the path limits a download.
    enum Part: String, Encodable {
        case network, server, disk, cpu
    }

    /// The limit of the whole path: the disk, when it takes durable writes more slowly than the
    /// network delivers at its knee (`recommended`); else the network, when every connection is
    /// capped and the rate still grows with the count (`growsWithCount`: more connections add,
    /// however busy the machine); else Swoop's transfer thread, busy at least ``threadLimit`` of
    /// the time at the knee (`transferThread`); else the machine's processors, when they were busy at the knee
    /// (at least ``busyLimit`` of their time: the network's figure is theirs); else the server,
    /// when more connections make it slower; else the network, with why its rate stops growing at
    /// the knee (`reason`). `rates`: every count measured, with its rate.
    static func limit(
        recommended: (connections: Int, rate: Double), knee reason: String, growsWithCount: Bool = false,
        rates: [(connections: Int, rate: Double)], disk: Double?, busy: Double?, cpuPerGiB: Double?,
        transferThread: Double? = nil
    ) -> (part: Part, reason: String) {
        let network = recommended.rate
        let count = Wording.count(recommended.connections, "connection")
        let slowdown = slowsDown(beyond: recommended.connections, rates).map { most in
            "more connections than \(recommended.connections) make it slower (\(Format.rate(most.rate)) at "
                + "\(most.connections)): its work is per request, or its threads share a lock"
        }
        if let disk, disk < network {
            // Said beside it: the disk binds a download first, and the server's slowdown is why
            // more connections would not help once it does not.
            return (
                .disk,
                "the disk takes durable writes at \(Format.rate(disk)), below the network's \(Format.rate(network)) "
                    + "at \(count)" + (slowdown.map { "; the server: \($0)" } ?? "")
            )
        }
        if growsWithCount { return (.network, reason) }
        if let transferThread, transferThread >= threadLimit {
            return (
                .cpu,
                "swoop's transfer thread was busy \(Int((transferThread * 100).rounded()))% of the time at \(count) "
                    + "(\(Format.rate(network))): one processor's work receives every byte, more connections "
                    + "cannot add to it"
            )
        }
        if let busy, busy >= busyLimit {
            let perGiB = cpuPerGiB.map { "; swoop itself spent \(Format.fixed($0, digits: 2)) s of CPU per GiB" } ?? ""
            return (
                .cpu,
                "the machine's processors were \(Int((busy * 100).rounded()))% busy at \(count) "
                    + "(\(Format.rate(network)))\(perGiB)"
            )
        }
        if let slowdown { return (.server, slowdown) }
        return (.network, reason)
    }

    /// The machine's processors this busy at the knee: they are the limit (on loopback, where the
    /// server shares them, a network figure of 2.8 GiB/s came with 87-90% of them busy).
    static let busyLimit = 0.85
    /// The transfer thread this busy at the knee: it is the limit. (On loopback without a cap it
    /// measured 64-94% busy at 1 to 16 connections, its time waiting for a processor 3-21%.)
    static let threadLimit = 0.9
    /// The most connections measured at under this share of the best rate: the server slows down.
    static let slower = 0.8

    /// The most connections measured, when they are more than `recommended` and measured under
    /// ``slower`` times the best rate of all `rates`: the server slows down with more connections.
    static func slowsDown(
        beyond recommended: Int, _ rates: [(connections: Int, rate: Double)]
    ) -> (connections: Int, rate: Double)? {
        guard let most = rates.max(by: { $0.connections < $1.connections }), most.connections > recommended,
            most.rate < slower * (rates.map(\.rate).max() ?? 0)
        else { return nil }
        return most
    }
    /// What the disk probe writes: as much as the object (a download meets the disk for that
    /// many bytes, and a small write measures only the caches below the file system), within
    /// 256 MiB and 1 GiB. `objectSize`: `nil` when not known.
    static func diskProbeBytes(objectSize: Int64?) -> Int {
        Int(min(max(objectSize ?? (1 << 30), 256 << 20), 1 << 30))
    }
}
