import CCurl
import SwoopCore

/// Holds everything one ``TransferLoop`` receives under a byte rate
/// (``Downloader/Configuration/ConnectionPool/maximumBytesPerSecond``): every connection of every download of
/// its ``Downloader`` draws from one ``TokenBucket``.
///
/// It works through libcurl's own flow control rather than by sleeping or by buffering: when the
/// bucket is empty, the body write callback returns `CURL_WRITEFUNC_PAUSE`; libcurl keeps that
/// write (it is delivered again on unpause) and stops reading the socket, so TCP holds the
/// server back. One timer, set for when the bucket has refilled, unpauses every paused exchange
/// in the order they paused, so the connections take turns and none starves.
///
/// Paused time is not a stall to libcurl (its `CURLOPT_LOW_SPEED_*` check skips paused
/// transfers), but a connection's *average* is its share of the cap: ``TransferOptions`` lowers
/// the low-speed limit under a cap for that reason, and ``TransferRun`` asks
/// ``isHoldingBack(at:)`` before reading slow connections as bad paths.
///
/// Transfer thread only.
package final class RateLimiter {
    /// Bytes per second.
    package let rate: Int64
    private var bucket: TokenBucket
    /// Exchanges paused by ``admit(_:for:)``, oldest first.
    private var paused: [HTTPExchange] = []
    private var resumeTimer: LoopTimer?
    /// When a write was last refused.
    private var heldBackAt: Moment?
    /// The loop owns this limiter and outlives it.
    private unowned let loop: TransferLoop

    package init(bytesPerSecond: Int64, loop: TransferLoop) {
        rate = bytesPerSecond
        bucket = TokenBucket(bytesPerSecond: bytesPerSecond, now: .now)
        self.loop = loop
    }

    /// Whether the cap has refused a write within the last half second: the rates measured now
    /// are shares of the cap, and say nothing about the paths or the server.
    package func isHoldingBack(at now: Moment) -> Bool {
        guard let heldBackAt else { return false }
        return now - heldBackAt < .milliseconds(500)
    }

    /// Called by `exchange`'s body write callback with the size of the write: `true` to take it;
    /// `false` when the bucket is empty, and then `exchange` is paused (the callback returns
    /// `CURL_WRITEFUNC_PAUSE`) until the bucket has refilled.
    package func admit(_ bytes: Int, for exchange: HTTPExchange) -> Bool {
        let now = Moment.now
        if bucket.take(bytes, now: now) { return true }
        heldBackAt = now
        exchange.isHeldBack = true
        paused.append(exchange)
        if resumeTimer == nil {
            resumeTimer = loop.schedule(after: bucket.timeUntilResume(now: now)) { [unowned self] in resumeAll() }
        }
        return false
    }

    /// Drops `exchange` from the paused ones: it ended (cancelled, or its download stopped) while
    /// paused, and its easy handle goes back to the pool.
    package func forget(_ exchange: HTTPExchange) {
        exchange.isHeldBack = false
        paused.removeAll { $0 === exchange }
        if paused.isEmpty {
            resumeTimer?.cancel()
            resumeTimer = nil
        }
    }

    /// Unpauses every paused exchange, oldest first.
    ///
    /// libcurl 7.88 delivers a paused write again from inside `curl_easy_pause`, so this
    /// re-enters ``admit(_:for:)``: an exchange the bucket refuses again is paused again and goes
    /// to the back of a fresh list (with a new timer), which is why the list is swapped out
    /// before the loop. If that delivery fails (the connection's store wanted no more, or could
    /// not write), libcurl before 8.8 reports it only here and would carry on reading the
    /// response, skipping the refused bytes: the exchange is ended instead.
    private func resumeAll() {
        resumeTimer = nil
        let waking = paused
        paused.removeAll(keepingCapacity: true)
        for exchange in waking where exchange.isHeldBack {
            exchange.isHeldBack = false
            guard !exchange.isCancelled, let easy = exchange.easy else { continue }
            let code = easy.unpause()
            if code != CURLE_OK { loop.end(exchange, code: code) }
        }
    }
}
