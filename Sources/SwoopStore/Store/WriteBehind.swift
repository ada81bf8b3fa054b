import Dispatch
import SwoopCore
import SystemPackage

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// Writes part files on a thread of their own: the transfer thread copies each piece of a
/// response into a bounded ring and goes back to the network, and the write queue `pwrite`s it.
///
/// On a fast link most of the transfer thread's time went to `pwrite` (the kernel's copy into the
/// page cache: about 15 s of a 26 s download of 16 GiB); with the copy here, receiving and
/// writing run on two cores. One per downloader, shared by its part files.
///
/// - Order: pieces are written in the order they were taken, so two writes to the same bytes
///   end as they would have written directly (the later wins).
/// - Reading back (``read(_:from:)``) sees every byte taken, written or still in the ring.
/// - Durability: whoever fsyncs or closes a file, or reads it by another descriptor, first waits
///   for what was taken before (``fence(for:)``, ``WriteFence/wait()``).
/// - Wake-ups: the write queue starts once ``wakeThreshold`` bytes wait, or a fence or a full
///   ring asks for them, and writes until the ring is empty: a handoff per batch, not per piece.
/// - Memory: the ring holds at most ``capacity`` bytes; when it is full the transfer thread
///   waits for room, as it waited for `pwrite` before.
/// - Failure: a write that fails marks its file's ``WriteBehind/File``; its later pieces are
///   dropped, and the next piece taken, and every fence, reports it.
///
/// `@unchecked Sendable`: the ring's free space is written by the transfer thread alone; the
/// rest is guarded by `lock`.
package final class WriteBehind: @unchecked Sendable {
    /// A part file as the write queue sees it: its descriptor, and the first failure.
    package final class File: @unchecked Sendable {
        package let descriptor: FileDescriptor
        package let path: String
        /// Guarded by the write-behind's lock.
        fileprivate var failure: Errno?

        package init(descriptor: FileDescriptor, path: String) {
            self.descriptor = descriptor
            self.path = path
        }

        /// A failed write of this file, as the download reports it.
        package func writeFailure(_ errno: Errno) -> DownloadError {
            .localIO("cannot write to", path: path, errno: errno.rawValue)
        }
    }

    /// One stretch of the ring, bound for `file` at `offset`.
    private struct Piece {
        let file: File
        let offset: Int64
        /// Where it is in the ring.
        let start: Int
        var count: Int
        var sequence: UInt64
    }

    /// The ring's size: 2 MiB, a few milliseconds of the copy. Larger buys nothing (the two
    /// threads run side by side; the ring only evens out their pace) and counts against a
    /// download's memory (4 MiB put the peak at 16 connections over 32 MiB).
    package static let defaultCapacity = 2 << 20
    /// A piece grows while the bytes that follow continue it, up to this size per `pwrite`.
    private static let largestPiece = 1 << 20
    /// The write queue is woken once this many bytes wait, or by a fence: waking it for every
    /// piece (a few KiB on a throttled link) cost two futex calls a piece, and more CPU than the
    /// copy into the ring.
    package static let wakeThreshold = 256 << 10

    package let capacity: Int
    private let ring: UnsafeMutableRawBufferPointer
    private let queue = DispatchQueue(label: "swoop.write")
    private let lock = ConditionLock()

    // Guarded by `lock`.
    /// Pieces taken and not yet written, oldest first (`first` is being written while `writing`).
    private var pieces: [Piece] = []
    private var firstPiece = 0
    private var used = 0
    private var writing = false
    private var draining = false
    private var lastSequence: UInt64 = 0
    private var writtenThrough: UInt64 = 0

    /// Where the next piece goes in the ring (transfer thread).
    private var head = 0
    /// How long the transfer thread has waited for room in all (transfer thread): the disk's
    /// side holding the network's back, which the adaptive count reads as the machine's limit,
    /// not the server's (``ConnectionController/Observation/localWait``).
    package private(set) var waitedForRoom = Duration.zero

    package init(capacity: Int = WriteBehind.defaultCapacity) {
        self.capacity = capacity
        ring = .allocate(byteCount: capacity, alignment: 4096)
    }

    deinit {
        ring.deallocate()
    }

    // MARK: Transfer thread

    /// Takes `bytes` for `file` at `offset`: copied into the ring (waiting for room when it is
    /// full), written by the queue. Throws the file's failure if an earlier write of it failed.
    package func write(_ bytes: UnsafeRawBufferPointer, at offset: Int64, to file: File) throws(Errno) {
        var done = 0
        while done < bytes.count {
            let count = try room(for: bytes.count - done, file: file)
            let target = UnsafeMutableRawBufferPointer(rebasing: ring[head..<(head + count)])
            target.copyMemory(from: UnsafeRawBufferPointer(rebasing: bytes[done..<(done + count)]))
            take(count, at: offset + Int64(done), for: file)
            done += count
        }
    }

    /// How many of `wanted` bytes fit at `head` now, waiting until some do.
    private func room(for wanted: Int, file: File) throws(Errno) -> Int {
        var waitedSince: Moment?
        let outcome: Result<Int, Errno> = lock.withLock {
            while true {
                if let failure = file.failure { return .failure(failure) }
                if used == 0 { head = 0 }
                let count = min(wanted, capacity - head, Self.largestPiece)
                if used + count <= capacity { return .success(count) }
                startDraining()
                if waitedSince == nil { waitedSince = .now }
                lock.wait()
            }
        }
        if let waitedSince { waitedForRoom += .now - waitedSince }
        return try outcome.get()
    }

    /// Hands the `count` bytes just copied at `head` to the queue: they continue the last piece
    /// when they can.
    private func take(_ count: Int, at offset: Int64, for file: File) {
        let start = head
        head += count
        if head == capacity { head = 0 }
        lock.withLock {
            used += count
            lastSequence += 1
            if let last = pieces.indices.last, last >= firstPiece, !(writing && last == firstPiece),
                pieces[last].file === file, pieces[last].offset + Int64(pieces[last].count) == offset,
                pieces[last].start + pieces[last].count == start, pieces[last].count + count <= Self.largestPiece
            {
                pieces[last].count += count
                pieces[last].sequence = lastSequence
            } else {
                pieces.append(Piece(file: file, offset: offset, start: start, count: count, sequence: lastSequence))
            }
            if used >= Self.wakeThreshold { startDraining() }
        }
    }

    /// Wakes the write queue unless it is writing already (holding the lock).
    private func startDraining() {
        guard !draining, firstPiece < pieces.count else { return }
        draining = true
        queue.async { [self] in drain() }
    }

    /// A mark after every piece taken so far: ``WriteFence/wait()`` returns once they are written.
    package func fence(for file: File) -> WriteFence {
        WriteFence(behind: self, file: file, sequence: lock.withLock { lastSequence })
    }

    /// Reads `range` of `file` as the file will hold it once every piece taken is written: from the
    /// file, then the pieces still in the ring over it. `nil` when some byte of it was never written.
    package func read(_ range: ByteRange, from file: File) -> [UInt8]? {
        // Pieces not written before the read starts: every other one is in the file by then. The
        // ring's bytes stay as they are meanwhile, since only this thread fills it.
        let pending: [Piece] = lock.withLock {
            pieces[firstPiece...].filter { piece in
                piece.file === file && piece.offset < range.upperBound
                    && piece.offset + Int64(piece.count) > range.lowerBound
            }
        }
        var bytes = [UInt8](repeating: 0, count: Int(range.count))
        var covered = bytes.withUnsafeMutableBytes { buffer in
            file.descriptor.readAvailable(into: buffer, at: range.lowerBound)
        }
        var overlays: [ByteRange] = []
        bytes.withUnsafeMutableBytes { buffer in
            for piece in pending {
                let lower = max(piece.offset, range.lowerBound)
                let upper = min(piece.offset + Int64(piece.count), range.upperBound)
                let from = piece.start + Int(lower - piece.offset)
                UnsafeMutableRawBufferPointer(rebasing: buffer[Int(lower - range.lowerBound)...])
                    .copyMemory(from: UnsafeRawBufferPointer(rebasing: ring[from..<(from + Int(upper - lower))]))
                overlays.append(ByteRange(lower, upper))
            }
        }
        // Whatever the file did not have must come from the ring.
        var end = range.lowerBound + Int64(covered)
        for overlay in overlays.sorted(by: { $0.lowerBound < $1.lowerBound }) where overlay.lowerBound <= end {
            end = max(end, overlay.upperBound)
        }
        covered = Int(end - range.lowerBound)
        return covered >= bytes.count ? bytes : nil
    }

    // MARK: The write queue

    /// Writes pieces, oldest first, until none is left.
    private func drain() {
        while let (piece, fileFailed) = next() {
            var failure: Errno?
            if !fileFailed {
                let bytes = UnsafeRawBufferPointer(rebasing: ring[piece.start..<(piece.start + piece.count)])
                do {
                    try piece.file.descriptor.writeFully(bytes, at: piece.offset)
                } catch {
                    failure = error
                }
            }
            lock.withLock {
                if let failure, piece.file.failure == nil { piece.file.failure = failure }
                writing = false
                firstPiece += 1
                used -= piece.count
                writtenThrough = piece.sequence
                if firstPiece == pieces.count || firstPiece >= 1024 {
                    pieces.removeFirst(firstPiece)
                    firstPiece = 0
                }
                lock.broadcast()
            }
        }
    }

    /// The oldest piece, marked as being written, and whether a write of its file failed already;
    /// `nil` (and the queue idle) when there is none.
    private func next() -> (Piece, fileFailed: Bool)? {
        lock.withLock {
            guard firstPiece < pieces.count else {
                draining = false
                return nil
            }
            writing = true
            let piece = pieces[firstPiece]
            return (piece, piece.file.failure != nil)
        }
    }

    /// Blocks until every piece up to `sequence` is written; the file's failure, if any.
    fileprivate func wait(for sequence: UInt64, file: File) -> Errno? {
        lock.withLock {
            while writtenThrough < sequence {
                startDraining()
                lock.wait()
            }
            return file.failure
        }
    }
}

/// A point in a ``WriteBehind``'s pieces: ``wait()`` returns once every piece taken before it is
/// in its file. Taken on the transfer thread, waited for on a queue that is about to fsync,
/// close, or read the file by another descriptor.
package struct WriteFence: Sendable {
    fileprivate let behind: WriteBehind
    fileprivate let file: WriteBehind.File
    fileprivate let sequence: UInt64

    /// Blocks until the pieces before the fence are written; the file's write failure, if any.
    /// Never on the transfer thread or Swift's cooperative pool.
    @discardableResult
    package func wait() -> Errno? {
        behind.wait(for: sequence, file: file)
    }

    /// ``wait()``, with the failure as the download reports it (``WriteBehind/File/writeFailure(_:)``).
    package func waitForWrites() -> DownloadError? {
        wait().map(file.writeFailure)
    }
}
