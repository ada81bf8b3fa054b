/// Lets heavy and timing-sensitive tests run one at a time.
///
/// Swift Testing runs suites in parallel; on a 2-core CI machine a soak test or a loop of process
/// kills can starve a test that measures time or waits for a download to be half done. Tests that
/// generate load or depend on timing run their body inside ``exclusively(_:)``; light tests stay
/// parallel.
actor TimingGate {
    static let shared = TimingGate()

    private var busy = false
    private var waiters: [CheckedContinuation<Void, Never>] = []

    func acquire() async {
        if busy {
            await withCheckedContinuation { waiters.append($0) }
        } else {
            busy = true
        }
    }

    func release() {
        if waiters.isEmpty {
            busy = false
        } else {
            waiters.removeFirst().resume()
        }
    }
}

/// Runs `body` while no other heavy or timing-sensitive test runs.
func exclusively<T>(_ body: () async throws -> T) async throws -> T {
    await TimingGate.shared.acquire()
    do {
        let result = try await body()
        await TimingGate.shared.release()
        return result
    } catch {
        await TimingGate.shared.release()
        throw error
    }
}
