import Testing
@testable import Swoop
@testable import SwoopCurl

/// The downloader's host table: one entry per host (and pinned address), shared by every
/// download; watchers hear when a host they wait for may take requests again.
@Suite("Host table")
struct HostTableTests {
    private final class Watcher: HostWatcher {
        var wakes = 0
        func hostMayTakeRequests() { wakes += 1 }
    }

    private final class Deferred {
        var work: [() -> Void] = []
        func run() {
            let now = work
            work.removeAll()
            now.forEach { $0() }
        }
    }

    private func url(_ text: String) throws -> RemoteURL { try RemoteURL(text) }

    @Test func oneEntryPerHostPortAndAddress() throws {
        let deferred = Deferred()
        let table = HostTable { deferred.work.append($0) }
        let a = table.entry(for: try url("http://example.com/a.bin"))
        #expect(table.entry(for: try url("http://example.com/other/b.bin?x=1")) === a, "the path does not matter")
        #expect(table.entry(for: try url("http://example.com:8080/a.bin")) !== a, "another port, another server")
        #expect(table.entry(for: try url("https://example.com/a.bin")) !== a)
        #expect(table.entry(for: try url("http://example.com/a.bin").pinned(to: "192.0.2.1")) !== a)
        #expect(table.count == 4)
    }

    @Test func watchersHearWhenTheStateChangesAfterTheCallbacks() throws {
        let deferred = Deferred()
        let table = HostTable { deferred.work.append($0) }
        let entry = table.entry(for: try url("http://example.com/a.bin"))
        let first = Watcher(), second = Watcher()
        entry.watch(first)
        entry.watch(first)
        entry.watch(second)
        let policy = FailurePolicy(
            baseDelay: .milliseconds(250), maxDelay: .seconds(30), maxTries: 8, maxOutage: .seconds(120))
        for owner in 1...2 {
            _ = entry.updateHealth {
                $0.failed(
                    .server, reason: "refused", active: 0, refused: false, retryAfter: nil, sharesWork: false,
                    policy: policy, at: .now, by: owner)
            }
        }
        #expect(deferred.work.isEmpty, "two failures: still up, nothing to hear")
        _ = entry.updateHealth {
            $0.failed(
                .server, reason: "refused", active: 0, refused: false, retryAfter: nil, sharesWork: false,
                policy: policy, at: .now, by: 3)
        }
        #expect(entry.health.isDown)
        #expect(first.wakes == 0, "not inside the callback that changed it")
        deferred.run()
        #expect(first.wakes == 1 && second.wakes == 1, "each watcher once")
        entry.unwatch(second)
        entry.updateHealth { $0.answered() }
        deferred.run()
        #expect(first.wakes == 2 && second.wakes == 1)
    }
}
