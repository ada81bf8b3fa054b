import SwoopCore
import Synchronization

/// The bytes of a streamed download between the transfer thread and the reader: a ring of
/// `capacity` bytes (the window). Connections write anywhere in `[consumed, consumed + capacity)`;
/// the contiguous prefix is handed to the reader, in order, and its space is reused once the
/// reader has taken it. Memory is the window, whatever the reader's speed: a slow reader moves
/// `consumed` slowly, the plan's limit follows it, and the connections wait.
///
/// Shared: the transfer thread writes (``StreamSink``), the reader's task reads
/// (``DownloadBytes``). The region `[consumed, delivered)` belongs to the reader until it takes
/// it; everything else to the writer; the mutex orders the hand-over.
package final class StreamBuffer: @unchecked Sendable {
    package let capacity: Int
    private let storage: UnsafeMutableRawBufferPointer

    private struct State {
        /// Bytes the reader has taken.
        package var consumed: Int64 = 0
        /// Bytes handed to the reader (the contiguous prefix written).
        package var delivered: Int64 = 0
        /// The object's size, once every byte is written.
        package var end: Int64?
        /// The download stopped without finishing (its task has the error).
        package var closed = false
        package var waiter: CheckedContinuation<Void, Never>?
    }

    private let state = Mutex(State())
    /// Told (on any thread) how far the reader has taken the bytes.
    package let onConsumed = Mutex<(@Sendable (Int64) -> Void)?>(nil)

    package init(capacity: Int) {
        self.capacity = max(1 << 16, capacity)
        // Reserved, not touched: pages become resident as the window fills.
        storage = UnsafeMutableRawBufferPointer.allocate(byteCount: self.capacity, alignment: 64)
    }

    deinit {
        storage.deallocate()
    }

    // MARK: Writer (transfer thread)

    /// Copies `bytes` to their place in the ring. The caller keeps `offset` within the window.
    package func write(_ bytes: UnsafeRawBufferPointer, at offset: Int64) {
        pieces(from: offset, count: bytes.count) { ring, done in
            UnsafeMutableRawBufferPointer(rebasing: storage[ring])
                .copyMemory(from: UnsafeRawBufferPointer(rebasing: bytes[done..<(done + ring.count)]))
        }
    }

    /// The ring's pieces for `count` bytes of the object from `offset` (two where the ring wraps):
    /// each piece's place in the ring, and how far into the `count` bytes it starts.
    @inline(__always)
    private func pieces(from offset: Int64, count: Int, _ body: (_ ring: Range<Int>, _ done: Int) -> Void) {
        var done = 0
        while done < count {
            let position = Int((offset + Int64(done)) % Int64(capacity))
            let piece = min(count - done, capacity - position)
            body(position..<(position + piece), done)
            done += piece
        }
    }

    /// Hands `body` the ring's bytes at `range` (one or two pieces, where the ring wraps). Only
    /// for bytes written and not yet taken by the reader: the writer is the only one to change them.
    package func withBytes(_ range: ByteRange, _ body: (UnsafeRawBufferPointer) -> Void) {
        pieces(from: range.lowerBound, count: Int(range.count)) { ring, _ in
            body(UnsafeRawBufferPointer(rebasing: storage[ring]))
        }
    }

    /// The prefix up to `offset` is written: the reader may take it.
    package func deliver(upTo offset: Int64) {
        wake { $0.delivered = max($0.delivered, offset) }
    }

    /// Every byte of an object of `size` bytes is written.
    package func finish(size: Int64) {
        wake {
            $0.delivered = max($0.delivered, size)
            $0.end = size
        }
    }

    /// The download stopped without finishing.
    package func close() {
        wake { $0.closed = true }
    }

    private func wake(_ change: (inout State) -> Void) {
        let waiter = state.withLock { state -> CheckedContinuation<Void, Never>? in
            change(&state)
            defer { state.waiter = nil }
            return state.waiter
        }
        waiter?.resume()
    }

    // MARK: Reader

    /// What the reader finds next.
    package enum Next {
        case bytes([UInt8])
        /// Every byte was read.
        case end
        /// The download stopped short; its task says why.
        case stopped
    }

    /// The next bytes in order (at most `maximum`), waiting for them to arrive.
    package func read(maximum: Int) async -> Next {
        while true {
            enum Look { case ready(Int64, Int), end, stopped, wait }
            let look = state.withLock { state -> Look in
                if state.delivered > state.consumed {
                    return .ready(state.consumed, Int(min(Int64(maximum), state.delivered - state.consumed)))
                }
                if let end = state.end, state.consumed >= end { return .end }
                if state.closed { return .stopped }
                return .wait
            }
            switch look {
            case .ready(let from, let count):
                var bytes = [UInt8](repeating: 0, count: count)
                bytes.withUnsafeMutableBytes { target in
                    pieces(from: from, count: count) { ring, done in
                        UnsafeMutableRawBufferPointer(rebasing: target[done..<(done + ring.count)])
                            .copyMemory(from: UnsafeRawBufferPointer(rebasing: storage[ring]))
                    }
                }
                let consumed = state.withLock { state -> Int64 in
                    state.consumed = from + Int64(count)
                    return state.consumed
                }
                onConsumed.withLock { $0 }?(consumed)
                return .bytes(bytes)
            case .end:
                return .end
            case .stopped:
                return .stopped
            case .wait:
                await withCheckedContinuation { continuation in
                    let ready = state.withLock { state -> Bool in
                        if state.delivered > state.consumed || state.end != nil || state.closed { return true }
                        state.waiter = continuation
                        return false
                    }
                    if ready { continuation.resume() }
                }
            }
        }
    }
}

/// The in-order sink: bytes go into a ``StreamBuffer`` for a reader (a pipe, an async sequence),
/// strictly in order, within a window ahead of what the reader has taken. Nothing is kept on disk
/// and nothing resumes.
///
/// `@unchecked Sendable`: the reader's progress reaches it only through `loop.execute`; it is
/// touched on the transfer thread only.
package final class StreamSink: BodySink, @unchecked Sendable {
    package let buffer: StreamBuffer
    private let loop: any LoopExecutor
    /// Written ranges beyond the delivered prefix, sorted and merged.
    private var pending: [ByteRange] = []
    private var delivered: Int64 = 0
    /// How far the reader has taken the bytes, as last heard on this thread.
    package private(set) var consumed: Int64 = 0
    /// The reader made room: the transfer may fetch further.
    private var onRoom: ((Int64) -> Void)?
    /// Digests the stream is checked against, and their hashers over the bytes delivered so far.
    private var checks: [DigestCheck] = []
    private var hashers: [DigestHasher] = []

    package func observeRoom(_ handler: @escaping (Int64) -> Void) {
        onRoom = handler
    }

    package init(buffer: StreamBuffer, loop: any LoopExecutor) {
        self.buffer = buffer
        self.loop = loop
        buffer.onConsumed.withLock {
            $0 = { [weak self, loop] consumed in
                loop.execute { [weak self] in
                    guard let self, consumed > self.consumed else { return }
                    self.consumed = consumed
                    self.onRoom?(consumed)
                }
            }
        }
    }

    package var keepsPartialState: Bool { false }
    /// The ring less its lookback: bytes the reader took stay readable for this long behind it,
    /// so a response's overlap with them can still be compared (``read(_:)``).
    package var window: Int64? { Int64(buffer.capacity) - Self.lookback }
    /// Bytes kept behind the reader: the overlap a request has with the bytes before it.
    package static let lookback = AgreementLedger.defaultWindow

    package func claim() {}
    package func discardPartialState() {}
    package func releaseClaim() {}
    package func open(size: Int64?, resuming: Bool) {}

    /// Whether `count` bytes at `offset` fit in the window now.
    package func hasRoom(for count: Int, at offset: Int64) -> Bool {
        offset + Int64(count) <= consumed + Int64(buffer.capacity) - Self.lookback
    }

    package func write(_ bytes: UnsafeRawBufferPointer, at offset: Int64) throws(DownloadError) {
        guard offset >= delivered, hasRoom(for: bytes.count, at: offset) else {
            throw DownloadError(.invalidResponse, "internal: bytes at \(offset) fall outside the stream's window")
        }
        buffer.write(bytes, at: offset)
        let range = ByteRange(offset, offset + Int64(bytes.count))
        if offset == delivered {
            let before = delivered
            delivered = range.upperBound
            while let first = pending.first, first.lowerBound <= delivered {
                delivered = max(delivered, first.upperBound)
                pending.removeFirst()
            }
            // Hashed before the reader may take them (afterwards the ring may be reused).
            if !hashers.isEmpty {
                buffer.withBytes(ByteRange(before, delivered)) { bytes in
                    for index in hashers.indices { hashers[index].update(bytes) }
                }
            }
            buffer.deliver(upTo: delivered)
        } else {
            insert(range)
        }
    }

    private func insert(_ range: ByteRange) {
        var index = pending.firstIndex { $0.lowerBound > range.lowerBound } ?? pending.endIndex
        pending.insert(range, at: index)
        // Merge with the neighbours (writes of one request are adjacent).
        if index > 0, pending[index - 1].upperBound >= pending[index].lowerBound {
            pending[index - 1] = ByteRange(
                pending[index - 1].lowerBound, max(pending[index - 1].upperBound, pending[index].upperBound))
            pending.remove(at: index)
            index -= 1
        }
        while index + 1 < pending.count, pending[index].upperBound >= pending[index + 1].lowerBound {
            pending[index] = ByteRange(
                pending[index].lowerBound, max(pending[index].upperBound, pending[index + 1].upperBound))
            pending.remove(at: index + 1)
        }
    }

    /// Written bytes still in the ring: those not yet taken, and the ``lookback`` behind the
    /// reader (the writer never reaches them: its window ends a lookback short of the ring). The
    /// caller asks only for bytes it knows are written (``AgreementLedger``).
    package func read(_ range: ByteRange) -> [UInt8]? {
        let ring = Int64(buffer.capacity)
        guard range.lowerBound >= consumed - Self.lookback, range.upperBound <= consumed + ring - Self.lookback else {
            return nil
        }
        var bytes: [UInt8] = []
        bytes.reserveCapacity(Int(range.count))
        buffer.withBytes(range) { bytes.append(contentsOf: $0) }
        return bytes
    }

    package var canReadBack: Bool { true }

    package func checkpoint(_ map: SegmentMap, then: @escaping (DownloadError?) -> Void) { then(nil) }

    package func verifyInOrder(_ checks: [DigestCheck]) {
        self.checks = checks
        hashers = checks.map { DigestHasher($0.expected.algorithm) }
    }

    /// The last bytes are out: a digest that does not match fails the download (the reader has
    /// every byte, and they are wrong); otherwise the reader sees the end.
    package func finish(size: Int64, record: CompletedObject, then: @escaping (DownloadError?) -> Void) {
        for (check, hasher) in zip(checks, hashers) where hasher.finalize() != check.expected {
            then(
                check.mismatch(
                    hasher.finalize(), target: "standard output",
                    consequence: "every byte was written out, and they are wrong: discard them"))
            return
        }
        buffer.finish(size: size)
        then(nil)
    }

    package func close(discarding: Bool, then: @escaping () -> Void) {
        buffer.close()
        loop.afterCallbacks(then)
    }
}
