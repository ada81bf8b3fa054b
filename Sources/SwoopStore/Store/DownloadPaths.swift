import Crypto
import SwoopCore
import Synchronization
import SystemPackage
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// The paths one download uses: the target, and its working files — the part file and the
/// segment map — in the hidden working directory beside it, `DIR/.swoop/`, named by a hash of
/// the target's name: `DIR/.swoop/<32 hex>.part` and `.map`.
///
/// No name a caller chooses can land on another target's working file: the working files are
/// not named after their target (`big.part` is an object's name like any other), and a target
/// inside a working directory is refused (``isInsideWorkingDirectory``). Earlier releases kept
/// `TARGET.part` and `TARGET.swoop` beside the target; those are neither read nor deleted (they
/// may be another object's files).
package struct DownloadPaths: Sendable, Equatable {
    /// The names, in one heap object: every stage of a download and its publication keeps its
    /// paths, and copying four names retained one by one was a measurable share of a small file's
    /// work. They never change, so a final class of constants holds them (a ``CopyOnWrite`` box,
    /// generic, had its class's metadata looked up at run time for each download).
    private final class Names: Sendable {
        let target: String
        let directory: String
        /// `DIR/.swoop`.
        let workingDirectory: String
        let share: ObjectShare?
        /// The target's last component, whose hash names the working files.
        private let name: String
        /// The part file's and the segment map's names, made on first use: a fresh small file
        /// that arrives whole uses neither (its bytes go into an unnamed file), and hashing the
        /// name and writing both was 6k instructions of each file of a list.
        private let working = Mutex<(part: String, map: String)?>(nil)

        init(target: String, share: ObjectShare?) {
            self.target = target
            self.share = share
            let (parent, name) = DownloadPaths.split(target)
            self.name = name
            directory = parent.isEmpty ? "." : parent
            workingDirectory = (directory == "/" ? "" : directory) + "/" + DownloadPaths.workingDirectoryName
        }

        var files: (part: String, map: String) {
            working.withLock { files in
                if let files { return files }
                let hash = DownloadPaths.workingHash(of: name)
                let part = DownloadPaths.workingFile(in: workingDirectory, hash, ".part")
                let map =
                    if let share {
                        DownloadPaths.shareMap(DownloadPaths.stem(of: part), index: share.index, count: share.count)
                    } else {
                        DownloadPaths.workingFile(in: workingDirectory, hash, ".map")
                    }
                files = (part, map)
                return (part, map)
            }
        }
    }

    private let names: Names

    package var target: String { names.target }
    /// The directory the target goes into.
    package var directory: String { names.directory }
    package var part: String { names.files.part }
    /// This download's segment map: the object's (`H.map`), or for one share of it that share's
    /// (`H.share-K-of-N.map`, beside the part file all shares write).
    package var map: String { names.files.map }
    /// The share of the object this download fetches (``ObjectShare``), if it fetches one.
    package var share: ObjectShare? { names.share }
    /// `DIR/.swoop/H`: every working file's name less its extension.
    package var stem: String { Self.stem(of: part) }

    private static func stem(of part: String) -> String {
        String(decoding: part.utf8.dropLast(".part".utf8.count), as: UTF8.self)
    }

    /// The name of the working directory in each directory that receives downloads.
    package static let workingDirectoryName = WorkingDirectory.name

    package init(target: String, share: ObjectShare? = nil) {
        names = Names(target: target, share: share)
    }

    /// The same target and share (the rest follows from them).
    package static func == (lhs: DownloadPaths, rhs: DownloadPaths) -> Bool {
        lhs.names === rhs.names || (lhs.target == rhs.target && lhs.share == rhs.share)
    }

    /// Share `index`'s segment map, when the object is fetched in this download's shares.
    package func shareMap(_ index: Int) -> String? {
        share.map { Self.shareMap(stem, index: index, count: $0.count) }
    }

    /// What every share of the object agrees on before its first byte (`H.shares-N.pin`): the
    /// version, size and chunk size, written once by the first task (``SharedObject``).
    package var pin: String? {
        share.map { stem + ".shares-\($0.count).pin" }
    }

    private static func shareMap(_ stem: String, index: Int, count: Int) -> String {
        stem + ".share-\(index)-of-\(count).map"
    }

    /// `DIR/.swoop`, where the working files of every target in `DIR` live: the part file's name
    /// less `/H.part`.
    package var workingDirectory: String { names.workingDirectory }

    /// The SHA-256 of a target's name `name`, whose first 16 bytes in hex are its working files'
    /// common name (two names in one directory share it only by a collision of 128 bits).
    private static func workingHash(of name: String) -> SHA256Digest {
        var name = name
        return name.withUTF8 { SHA256.hash(data: UnsafeRawBufferPointer($0)) }
    }

    /// `working/H` and `suffix` (`working` is `DIR/.swoop`), where `H` is the first 16 bytes of
    /// `hash` in hex, written into one new string: a list named two working files for every target,
    /// and building each of its parts (six appends) cost 3k instructions a file.
    private static func workingFile(in working: String, _ hash: SHA256Digest, _ suffix: StaticString) -> String {
        var working = working
        return working.withUTF8 { head in
            hash.withUnsafeBytes { hash in
                let count = head.count + 1 + 32 + suffix.utf8CodeUnitCount
                return String(unsafeUninitializedCapacity: count) { out in
                    var at = 0
                    func put(_ byte: UInt8) {
                        out[at] = byte
                        at += 1
                    }
                    for byte in head { put(byte) }
                    put(UInt8(ascii: "/"))
                    for index in 0..<16 {
                        put(hexDigit(hash[index] >> 4))
                        put(hexDigit(hash[index] & 0xF))
                    }
                    suffix.withUTF8Buffer { for byte in $0 { put(byte) } }
                    return at
                }
            }
        }
    }

    private static func hexDigit(_ value: UInt8) -> UInt8 {
        value < 10 ? UInt8(ascii: "0") + value : UInt8(ascii: "a") + value - 10
    }

    /// `path`'s directory (`""`: none) and last component, as `FilePath` reads them. A path
    /// without `//` or a trailing `/` (every list's target) is split at its last `/` without
    /// `FilePath`'s parse, which cost a list of small files 5k instructions a file; its bytes are
    /// read in place (a pairwise walk of its `UTF8View` cost 3k more).
    private static func split(_ path: String) -> (directory: String, name: String) {
        let utf8 = path.utf8
        let slash = UInt8(ascii: "/")
        func isPlain(_ bytes: UnsafeBufferPointer<UInt8>) -> Bool {
            guard let last = bytes.last, last != slash else { return false }
            var previous: UInt8 = 0
            for byte in bytes {
                if byte == slash && previous == slash { return false }
                previous = byte
            }
            return true
        }
        // A string without contiguous bytes (a bridged one) takes the parse.
        guard utf8.withContiguousStorageIfAvailable(isPlain) ?? false else {
            let parsed = FilePath(path)
            return (parsed.removingLastComponent().string, parsed.lastComponent?.string ?? path)
        }
        guard let last = utf8.lastIndex(of: slash) else { return ("", path) }
        let directory = last == utf8.startIndex ? "/" : String(path[..<last])
        return (directory, String(path[utf8.index(after: last)...]))
    }

    /// Whether `path` names a working directory or something inside one (a component `.swoop`):
    /// such a target could collide with another target's working files, so it is refused.
    package static func isInsideWorkingDirectory(_ path: String) -> Bool {
        path.utf8.withContiguousStorageIfAvailable { isInsideWorkingDirectory(bytes: $0) }
            ?? isInsideWorkingDirectory(bytes: Array(path.utf8))
    }

    private static func isInsideWorkingDirectory(bytes path: some Collection<UInt8>) -> Bool {
        var component = workingDirectoryName.utf8.makeIterator()
        var matching = true
        for byte in path {
            if byte == UInt8(ascii: "/") {
                if matching && component.next() == nil { return true }
                component = workingDirectoryName.utf8.makeIterator()
                matching = true
            } else if matching {
                matching = component.next() == byte
            }
        }
        return matching && component.next() == nil
    }

    /// Removes the working directory if it is empty (the last download in it has ended); another
    /// download that starts meanwhile creates it again.
    package func removeWorkingDirectoryIfEmpty() {
        _ = rmdir(workingDirectory)
    }

    /// Checks, before any network traffic, that the target's directory exists (creating it and
    /// its missing parents when `creatingMissing`): the file could not be written otherwise. A
    /// directory seen in the last second is not checked again (a list of thousands of files into
    /// one directory asks once); if it vanished since, creating the part file fails.
    package func prepareDirectory(creatingMissing: Bool) throws(DownloadError) {
        let now = Moment.now
        if DownloadPaths.recentDirectory.withLock({
            $0.map { $0.path.hasSameBytes(as: directory) && now - $0.at < .seconds(1) } ?? false
        }) {
            return
        }
        do {
            let info = try fileInfo(directory)
            guard info.st_mode & S_IFMT == S_IFDIR else {
                throw DownloadError(
                    .localIO, "cannot write into \(directory): it is not a directory", remedy: .chooseWritableLocation,
                    errno: ENOTDIR)
            }
        } catch let error as Errno where error == .noSuchFileOrDirectory || error == .notDirectory {
            // Missing, or a file where a directory should be (which creating names).
            if creatingMissing {
                try createDirectories(directory)
            } else {
                throw DownloadError(
                    .localIO, "cannot write into \(directory): the directory does not exist", remedy: .createDirectory,
                    errno: error.rawValue)
            }
        } catch let error as Errno {
            throw .localIO("cannot write into", path: directory, errno: error.rawValue)
        } catch let error as DownloadError {
            throw error
        } catch {
            throw DownloadError(.localIO, "cannot write into \(directory): \(error)")
        }
        DownloadPaths.recentDirectory.withLock { $0 = (directory, now) }
    }

    private static let recentDirectory = Mutex<(path: String, at: Moment)?>(nil)

    /// Deletes the part file and the segment map (and the working directory, if that empties it).
    /// A share's part file holds the other shares' bytes too: only its map goes.
    package func discardPartialState() {
        if share == nil { removeFile(part) }
        SegmentMapFile.remove(at: map)
        removeWorkingDirectoryIfEmpty()
    }
}
