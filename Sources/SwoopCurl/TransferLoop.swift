import CCurl
import CSwoopSystem
import Synchronization
import SwoopCore

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// The transfer thread: one `curl_multi` handle driving every exchange, plus timers and work
/// submitted from other threads.
///
/// Everything that touches curl handles, and every download's mutable state, lives on this one
/// thread, so the data path needs no locks. Other threads talk to it only through ``execute(_:)``,
/// which queues a closure under a mutex and wakes the loop with `curl_multi_wakeup`.
///
/// `@unchecked Sendable`: the only state touched from other threads is `inbox` (a `Mutex`) and
/// `multi` through `curl_multi_wakeup`, which libcurl documents as thread-safe; everything else is
/// confined to the loop thread, which ``assertOnLoopThread()`` checks in debug builds.
package final class TransferLoop: LoopExecutor, @unchecked Sendable {
    private struct Inbox {
        package var commands: [@Sendable () -> Void] = []
        package var stopRequested = false
        package var exited = false
        package var exitWaiters: [CheckedContinuation<Void, Never>] = []
    }

    private let inbox = Mutex(Inbox())
    private let multi: UnsafeMutableRawPointer
    /// The connection caps shared by every download on this loop (transfer thread only).
    package let budget: ConnectionBudget
    /// Every host's health, shared by every download on this loop (transfer thread only).
    package private(set) lazy var hosts = HostTable { [unowned self] work in self.afterCallbacks(work) }
    /// The byte-rate cap on everything this loop receives, if there is one (transfer thread only).
    package private(set) var rateLimiter: RateLimiter?
    /// The cookie store every exchange uses, when cookies are configured (transfer thread only).
    package private(set) var cookies: CookieEngine?
    private var thread = pthread_t()

    // Loop-thread state.
    private var running: [ObjectIdentifier: HTTPExchange] = [:]
    private var pendingAdds: [HTTPExchange] = []
    private var pendingRemoves: [(exchange: HTTPExchange, code: CURLcode)] = []
    private var afterCallbackWork: [() -> Void] = []
    /// In `curl_multi_perform`: a libcurl callback is the caller. What must not run there
    /// (``afterCallbacks(_:)``) can assert it.
    package private(set) var isInsideCallbacks = false
    private var timers = TimerHeap()
    private var idleHandles: [CurlEasy] = []

    /// Starts the thread. `maximumBytesPerSecond` caps the sum of every exchange's body bytes.
    /// `cookieFile` and `cookieJar`: where cookies are read from and saved to (see ``CookieEngine``).
    package init?(
        name: String = "swoop-transfer", budget: ConnectionBudget, maximumBytesPerSecond: Int64? = nil,
        cookieFile: String? = nil, cookieJar: String? = nil
    ) {
        guard CurlRuntime.ensureInitialized(), let multi = curl_multi_init() else { return nil }
        self.multi = multi
        self.budget = budget
        self.cookies = CookieEngine(file: cookieFile, jar: cookieJar)
        if let rate = maximumBytesPerSecond, rate > 0 {
            rateLimiter = RateLimiter(bytesPerSecond: rate, loop: self)
        }
        // No HTTP/2 multiplexing: each transfer gets its own TCP connection, which is the point.
        _ = swoop_multi_setopt_long(multi, CURLMOPT_PIPELINING, Int(CURLPIPE_NOTHING))
        // Idle connections kept for reuse: enough for every permit the budget can hand out.
        _ = swoop_multi_setopt_long(multi, CURLMOPT_MAXCONNECTS, max(64, budget.total * 2))
        let retained = Unmanaged.passRetained(self).toOpaque()
        var thread = pthread_t()
        let result = pthread_create(
            &thread, nil,
            { argument in
                let loop = Unmanaged<TransferLoop>.fromOpaque(argument!).takeRetainedValue()
                loop.run()
                return nil
            }, retained)
        guard result == 0 else {
            Unmanaged<TransferLoop>.fromOpaque(retained).release()
            curl_multi_cleanup(multi)
            return nil
        }
        pthread_detach(thread)
        _ = name.withCString { swoop_set_thread_name(thread, $0) }
    }

    deinit {
        curl_multi_cleanup(multi)
    }

    // MARK: Any thread

    /// Runs `work` on the loop thread. Returns `false` (and drops `work`) once the loop is stopping.
    @discardableResult
    package func execute(_ work: @escaping @Sendable () -> Void) -> Bool {
        let (accepted, wake) = inbox.withLock { inbox -> (Bool, Bool) in
            guard !inbox.stopRequested else { return (false, false) }
            inbox.commands.append(work)
            // The loop takes every queued command when it wakes: one wake-up per batch.
            return (true, inbox.commands.count == 1)
        }
        if wake { curl_multi_wakeup(multi) }
        return accepted
    }

    /// Stops the loop: running exchanges are cancelled (their delegates hear about it), then the
    /// thread exits. Returns once it has.
    package func shutdown() async {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let alreadyExited = inbox.withLock { inbox -> Bool in
                inbox.stopRequested = true
                if inbox.exited { return true }
                inbox.exitWaiters.append(continuation)
                return false
            }
            if alreadyExited {
                continuation.resume()
            } else {
                curl_multi_wakeup(multi)
            }
        }
    }

    /// Asks the loop to stop without waiting.
    package func requestStop() {
        inbox.withLock { $0.stopRequested = true }
        curl_multi_wakeup(multi)
    }

    // MARK: Loop thread

    package func assertOnLoopThread(file: StaticString = #fileID, line: UInt = #line) {
        assert(pthread_equal(pthread_self(), thread) != 0, "not on the transfer thread", file: file, line: line)
    }

    /// Runs `work` on this thread at the next safe point, outside any curl callback.
    package func afterCallbacks(_ work: @escaping () -> Void) {
        assertOnLoopThread()
        afterCallbackWork.append(work)
    }

    /// Runs `action` on this thread after `delay`, unless the returned timer is cancelled first.
    @discardableResult
    package func schedule(after delay: Duration, _ action: @escaping () -> Void) -> LoopTimer {
        assertOnLoopThread()
        let timer = LoopTimer(deadline: .now + delay, action: action)
        timers.insert(timer)
        return timer
    }

    package func enqueueAdd(_ exchange: HTTPExchange) {
        pendingAdds.append(exchange)
    }

    /// Removes `exchange` from curl at the next safe point and finishes it with `code`.
    package func enqueueRemove(_ exchange: HTTPExchange, code: CURLcode = CURLE_OK) {
        if let index = pendingAdds.firstIndex(where: { $0 === exchange }) {
            pendingAdds.remove(at: index)
            afterCallbacks { self.finish(exchange, code: code) }
        } else {
            pendingRemoves.append((exchange, code))
        }
    }

    package func dequeueEasyHandle() -> CurlEasy {
        if let easy = idleHandles.popLast() { return easy }
        guard let easy = CurlEasy() else { fatalError("curl_easy_init failed: out of memory") }
        return easy
    }

    package func recycle(_ easy: CurlEasy) {
        easy.reset()
        if idleHandles.count < 128 { idleHandles.append(easy) }
    }

    private func run() {
        thread = pthread_self()
        while true {
            applyPendingChanges()
            var stillRunning: Int32 = 0
            isInsideCallbacks = true
            curl_multi_perform(multi, &stillRunning)
            isInsideCallbacks = false
            readCompletions()
            runAfterCallbackWork()
            fireDueTimers()
            // Work from other threads (a download of a list starting) runs once the sockets are
            // read, as an event loop runs its tasks after its I/O: it acts on what the network
            // said meanwhile. Before, a list's new downloads could send their requests to a host
            // whose resets waited unread in the same wake-up (23 refused at once under load).
            let (commands, stopping) = inbox.withLock { inbox -> ([@Sendable () -> Void], Bool) in
                defer { inbox.commands.removeAll(keepingCapacity: true) }
                return (inbox.commands, inbox.stopRequested)
            }
            for command in commands { command() }
            if stopping {
                stopAll()
                break
            }
            runAfterCallbackWork()

            var timeout = 1000
            if !pendingAdds.isEmpty || !pendingRemoves.isEmpty || !afterCallbackWork.isEmpty {
                timeout = 0
            } else if let next = timers.earliest {
                let remaining = next.deadline - .now
                timeout = max(0, min(timeout, Int(remaining.milliseconds.rounded(.up))))
            }
            curl_multi_poll(multi, nil, 0, Int32(timeout), nil)
        }
        let waiters = inbox.withLock { inbox -> [CheckedContinuation<Void, Never>] in
            inbox.exited = true
            defer { inbox.exitWaiters.removeAll() }
            return inbox.exitWaiters
        }
        for waiter in waiters { waiter.resume() }
    }

    private func applyPendingChanges() {
        while !pendingRemoves.isEmpty {
            let removes = pendingRemoves
            pendingRemoves.removeAll()
            for (exchange, code) in removes {
                guard let easy = exchange.easy, running.removeValue(forKey: ObjectIdentifier(exchange)) != nil else {
                    continue  // already finished
                }
                curl_multi_remove_handle(multi, easy.handle)
                finish(exchange, code: code)
            }
        }
        let adds = pendingAdds
        pendingAdds.removeAll()
        for exchange in adds {
            guard let easy = exchange.easy else { continue }
            running[ObjectIdentifier(exchange)] = exchange
            let code = curl_multi_add_handle(multi, easy.handle)
            if code != CURLM_OK {
                running.removeValue(forKey: ObjectIdentifier(exchange))
                finish(exchange, code: CURLE_FAILED_INIT)
            }
        }
    }

    private func readCompletions() {
        var queued: Int32 = 0
        while let message = curl_multi_info_read(multi, &queued) {
            guard message.pointee.msg == CURLMSG_DONE, let handle = message.pointee.easy_handle else { continue }
            let code = message.pointee.data.result
            var pointer: UnsafeMutableRawPointer?
            _ = swoop_easy_getinfo_pointer(handle, CURLINFO_PRIVATE, &pointer)
            curl_multi_remove_handle(multi, handle)
            guard let pointer else { continue }
            let exchange = Unmanaged<HTTPExchange>.fromOpaque(pointer).takeUnretainedValue()
            running.removeValue(forKey: ObjectIdentifier(exchange))
            finish(exchange, code: code)
        }
    }

    private func runAfterCallbackWork() {
        while !afterCallbackWork.isEmpty {
            let work = afterCallbackWork
            afterCallbackWork.removeAll()
            for item in work { item() }
        }
    }

    private func fireDueTimers() {
        let now = Moment.now
        while let first = timers.earliest, first.deadline <= now {
            timers.removeEarliest()
            first.fire()
        }
    }

    private func stopAll() {
        // Let delegates hear "cancelled" so every waiting caller is answered.
        for exchange in pendingAdds { afterCallbacks { self.finish(exchange, code: CURLE_OK) } }
        pendingAdds.removeAll()
        for exchange in running.values {
            exchange.markCancelled()
            pendingRemoves.append((exchange, CURLE_OK))
        }
        applyPendingChanges()
        runAfterCallbackWork()
        timers.removeAll()
        idleHandles.removeAll()
        cookies?.save()
        cookies = nil  // after every handle that used its share
    }
}
