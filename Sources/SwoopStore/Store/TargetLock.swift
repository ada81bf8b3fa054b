import CSwoopSystem
import SwoopCore
import SystemPackage

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// One writer per target, across processes: whoever writes a target's partial state holds an
/// exclusive `flock` on its part file (``DownloadPaths/part``) for as long as the file is open.
///
/// `flock` rather than a POSIX record lock: a record lock belongs to the process and is dropped
/// when *any* descriptor of the file closes in it, which a library cannot promise; a `flock`
/// belongs to the open file, and the kernel drops it when the holder exits, however it exits
/// (`kill -9` included), so a stale lock never blocks. Rather than a separate lock file, the part
/// file itself carries the lock: nothing extra to create or clean up, and a small file that never
/// gets a part file (it is held in memory and linked into place without replacing anything)
/// costs no lock at all.
///
/// The holder never unlinks the part file while someone could take over its name: it discards
/// by truncating, and deletes the name only just before closing.
package enum TargetLock {
    /// Opens `path` (creating it, not truncating it) and locks it for this download.
    ///
    /// Throws ``DownloadError/Kind/targetInUse`` at once, naming the holder, when another
    /// download holds it. Between `open` and `flock` the previous holder may have renamed or
    /// deleted the file (it finished or gave up): the lock is then on a file that is no longer at
    /// `path`, so it is dropped and taken again on what is there now.
    ///
    /// With `share`, the lock is that share's (``shareLock(_:)``): each share of one object has
    /// its own writer, and all of them write the same part file.
    package static func claim(
        _ path: String, target: String, share: ObjectShare? = nil
    ) throws(DownloadError) -> FileDescriptor {
        for _ in 0..<16 {
            let descriptor: FileDescriptor
            do {
                descriptor = try FileDescriptor.open(
                    FilePath(path), .readWrite, options: [.create, .closeOnExec],
                    permissions: [.ownerReadWrite, .groupReadWrite, .otherReadWrite])
            } catch let error as Errno where error == .noSuchFileOrDirectory {
                // The working directory is made with its first file (and goes with its last).
                try createWorkingDirectory(containing: path)
                continue
            } catch let error as Errno {
                throw DownloadError.localIO("cannot create", path: path, errno: error.rawValue)
            } catch {
                throw DownloadError(.localIO, "cannot create \(path): \(error)")
            }
            do {
                if let share {
                    try retryingOnInterrupt { swoop_lock_byte(descriptor.rawValue, shareLock(share.index), 0) }
                } else {
                    try retryingOnInterrupt { flock(descriptor.rawValue, LOCK_EX | LOCK_NB) }
                }
            } catch  where error == .wouldBlock || error == .permissionDenied {
                let holder = share == nil ? holder(of: descriptor) : nil
                try? descriptor.close()
                throw inUse(share.map { "share \($0) of \(target)" } ?? target, by: holder)
            } catch {
                try? descriptor.close()
                throw DownloadError.localIO("cannot lock", path: path, errno: error.rawValue)
            }
            if isStill(descriptor, at: path) { return descriptor }
            try? descriptor.close()
        }
        throw DownloadError(.localIO, "cannot lock \(path): it keeps being replaced by another program")
    }

    /// The byte of the part file whose lock (an open file description's, `F_OFD_SETLK`, which
    /// like a `flock` belongs to the open file and goes when the holder exits) is share `index`'s:
    /// far past any object's end, one byte a share.
    package static func shareLock(_ index: Int) -> Int64 { (1 << 62) + Int64(index) }

    /// The byte whose lock the task finishing a shared object holds (``shareLock(_:)``'s kind).
    package static let finishingLock: Int64 = (1 << 62) - 1

    /// Creates the directory that holds `path` (a target's working directory), durably: its
    /// entry in the target's directory is flushed, so a partial download survives a crash.
    /// One created by another download meanwhile is fine.
    package static func createWorkingDirectory(containing path: String) throws(DownloadError) {
        let directory = FilePath(path).removingLastComponent().string
        guard mkdir(directory, 0o755) == 0 else {
            if errno == EEXIST { return }
            throw DownloadError.localIO("cannot create", path: directory, errno: errno)
        }
        do { try syncDirectory(containing: directory) } catch {
            throw DownloadError.localIO("cannot flush the directory of", path: directory, errno: error.rawValue)
        }
    }

    /// Whether `descriptor` is the file at `path` (same device and inode).
    private static func isStill(_ descriptor: FileDescriptor, at path: String) -> Bool {
        var opened = CStat()
        guard fstat(descriptor.rawValue, &opened) == 0, let named = try? fileInfo(path) else { return false }
        return opened.st_dev == named.st_dev && opened.st_ino == named.st_ino
    }

    /// Deletes the partial state at `paths` unless another download holds it.
    package static func discardUnlessInUse(_ paths: DownloadPaths) {
        let raw = open(paths.part, O_RDWR | O_CLOEXEC)
        guard raw >= 0 else {
            SegmentMapFile.remove(at: paths.map)
            return
        }
        defer { _ = close(raw) }
        guard flock(raw, LOCK_EX | LOCK_NB) == 0 else { return }
        paths.discardPartialState()
    }

    /// Whether another download holds the lock on `path` right now. Takes nothing: a lock
    /// obtained for the test is released at once.
    package static func isHeld(_ path: String) -> Bool {
        let raw = open(path, O_RDONLY | O_CLOEXEC)
        guard raw >= 0 else { return false }
        defer { _ = close(raw) }
        return flock(raw, LOCK_SH | LOCK_NB) != 0 && errno == EWOULDBLOCK
    }

    /// The process holding a lock on the file open at `descriptor`, from `/proc/locks`.
    package static func holder(of descriptor: FileDescriptor) -> (pid: Int32, name: String?)? {
        var info = CStat()
        guard fstat(descriptor.rawValue, &info) == 0, let table = readSmallFile("/proc/locks") else { return nil }
        let device = UInt64(info.st_dev)
        let major = ((device >> 8) & 0xfff) | ((device >> 32) & ~0xfff)
        let minor = (device & 0xff) | ((device >> 12) & ~0xff)
        let wanted = String(major, radix: 16) + ":" + String(minor, radix: 16) + ":" + String(info.st_ino)
        for line in table.split(separator: "\n") {
            // "1: FLOCK  ADVISORY  WRITE 4242 fd:01:1234567 0 EOF"; a waiter's line has "->".
            let fields = line.split(separator: " ", omittingEmptySubsequences: true)
            guard fields.count >= 6, fields[1] == "FLOCK", let pid = Int32(fields[4]) else { continue }
            let file = fields[5].split(separator: ":")
            guard file.count == 3 else { continue }
            // The kernel prints the device as %02x: compare numerically.
            let key =
                file.prefix(2).map { String(UInt64($0, radix: 16) ?? .max, radix: 16) }.joined(separator: ":") + ":"
                + file[2]
            guard key == wanted else { continue }
            let name = readSmallFile("/proc/\(pid)/comm").map { $0.trimmingTrailingNewline }
            return (pid, name)
        }
        return nil
    }

    /// The error for a target another download is writing.
    package static func inUse(_ target: String, by holder: (pid: Int32, name: String?)?) -> DownloadError {
        let who: String
        if let holder, holder.pid == getpid() {
            who = "another download in this process"
        } else if let holder {
            who = "another process (pid \(holder.pid)\(holder.name.map { ", \($0)" } ?? ""))"
        } else {
            who = "another process"
        }
        return DownloadError(.targetInUse, "\(target) is being downloaded by \(who)", remedy: .waitForOtherDownload)
    }

    private static func readSmallFile(_ path: String) -> String? {
        (try? readWholeFile(path, limit: 16 << 20).get()).map { String(decoding: $0, as: UTF8.self) }
    }
}

extension String {
    fileprivate var trimmingTrailingNewline: String {
        hasSuffix("\n") ? String(dropLast()) : self
    }
}
