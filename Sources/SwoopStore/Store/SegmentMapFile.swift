import SwoopCore
import SystemPackage

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// Reading and atomically replacing a segment map (`DIR/.swoop/H.map`).
package enum SegmentMapFile {
    /// Why a map on disk could not be used.
    package enum ReadError: Error {
        case missing
        case untrusted(SegmentMapError)
        case io(DownloadError)
    }

    package static func read(at path: String) -> Result<SegmentMap, ReadError> {
        let bytes: [UInt8]
        switch readAll(path) {
        case .success(let contents): bytes = contents
        case .failure(let error) where error == .noSuchFileOrDirectory: return .failure(.missing)
        case .failure(let error): return .failure(.io(.localIO("cannot read", path: path, errno: error.rawValue)))
        }
        do {
            return .success(try SegmentMap.decode(bytes))
        } catch {
            return .failure(.untrusted(error))
        }
    }

    /// Replaces the map so that a crash at any instant leaves either the old map or the new one:
    /// write a temporary file, fsync it, rename it over the map, fsync the directory.
    package static func write(_ map: SegmentMap, to path: String) throws(DownloadError) {
        let temporary = path + ".tmp"
        let bytes = map.encoded()
        do {
            let descriptor = try FileDescriptor.open(
                FilePath(temporary), .writeOnly, options: [.create, .truncate, .closeOnExec],
                permissions: [.ownerReadWrite, .groupReadWrite, .otherReadWrite])
            do {
                try descriptor.writeAll(toAbsoluteOffset: 0, bytes)
                try descriptor.sync()
            } catch {
                try? descriptor.close()
                throw error
            }
            try descriptor.close()
            try systemCall { rename(temporary, path) }
            try syncDirectory(containing: path)
        } catch let error as Errno {
            removeFile(temporary)
            throw .localIO("cannot write the segment map", path: path, errno: error.rawValue)
        } catch {
            removeFile(temporary)
            throw DownloadError(.localIO, "cannot write the segment map \(path): \(error)")
        }
    }

    /// Deletes the map (and a leftover temporary), ignoring absence.
    package static func remove(at path: String) {
        removeFile(path)
        removeFile(path + ".tmp")
    }

    private static func readAll(_ path: String) -> Result<[UInt8], Errno> {
        readWholeFile(path, limit: 64 << 20)
    }
}
