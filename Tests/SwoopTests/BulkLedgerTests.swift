import Testing

@testable import Swoop

@Suite("BulkLedger")
struct BulkLedgerTests {
    private func item(_ url: String, to destination: String) -> BulkItem {
        BulkItem(DownloadRequest(url: url), to: destination)
    }

    @Test("a repeat of a running download follows it; one of a finished download shares its outcome")
    func repeatsShareTheLeadersDownload() {
        var ledger = BulkLedger(expected: 0)
        let first = item("http://example.com/a", to: "/tmp/a")
        let (keys, admission) = ledger.admit(first, index: 0)
        guard case .leads = admission else { Issue.record("the first item should lead: \(admission)"); return }
        // The same URL (a fragment and surrounding spaces do not count) to the same file.
        guard case .follows = ledger.admit(item(" http://example.com/a#x ", to: "/tmp/a"), index: 1).1 else {
            Issue.record("a repeat of a running download should follow it")
            return
        }
        guard case .leads = ledger.admit(item("http://example.com/a", to: "/tmp/b"), index: 2).1 else {
            Issue.record("another destination is another download")
            return
        }
        let result = DownloadResult(
            path: "/tmp/a", bytes: 1, bytesReceived: 1, bytesResumed: 0, duration: .zero, connectionsUsed: 1,
            requests: 1, retries: 0, etag: nil, alreadyComplete: true)
        let followers = ledger.finish(keys, index: 0, outcome: .success(result), failureIndex: -1)
        #expect(followers.map(\.0) == [1])
        guard case .repeats(.succeeded(alreadyComplete: true)) = ledger.admit(first, index: 3).1 else {
            Issue.record("a repeat of a finished download should share its outcome")
            return
        }
    }

    @Test("a download's key is of its URL, a newline and its target as if joined, and of their bytes")
    func keyOfParts() {
        let url = "http://example.com/caf\u{E9}?q=1"
        #expect(BulkLedger.Key(url[...], "/tmp/a") == BulkLedger.Key(url + "\n" + "/tmp/a"))
        #expect(BulkLedger.Key(url[...], "/tmp/a") != BulkLedger.Key(url[...], "/tmp/b"))
        // The newline keeps the parts apart: `ab` + `c` is not `a` + `bc`.
        #expect(BulkLedger.Key("ab"[...], "c") != BulkLedger.Key("a"[...], "bc"))
        // Bytes, not characters: the composed and decomposed `é` are two URLs.
        #expect(BulkLedger.Key("caf\u{E9}"[...], "/t") != BulkLedger.Key("cafe\u{301}"[...], "/t"))
        // A long URL and target (no small string) hash alike both ways too.
        let long = "http://example.com/" + String(repeating: "x", count: 300)
        #expect(BulkLedger.Key(long[...], "/tmp/" + long) == BulkLedger.Key(long + "\n/tmp/" + long))
    }

    @Test("the key set holds every key it was given and no other, across growth")
    func keySetHoldsItsKeys() {
        var set = BulkLedger.KeySet(minimumCapacity: 0)
        let keys = (0..<50_000).map { BulkLedger.Key("http://example.com/\($0)\n/tmp/\($0)") }
        for (index, key) in keys.enumerated() {
            let inserted = set.insert(key)
            #expect(inserted)
            if index % 997 == 0 {
                let again = set.insert(key)
                #expect(!again)
            }
        }
        #expect(set.count == keys.count)
        #expect(keys.allSatisfy { set.contains($0) })
        #expect(keys.allSatisfy { !set.contains($0.markedAlreadyComplete) })
        let others = (0..<50_000).map { BulkLedger.Key("http://example.com/\($0)\n/tmp/other") }
        #expect(!others.contains { set.contains($0) })
    }

    @Test("a key set sized up front holds that many keys without growing, in a fifth more slots")
    func keySetSizedUpFront() {
        let large = BulkLedger.KeySet(minimumCapacity: 100_000)
        #expect(large.capacity >= 100_000)
        #expect(large.capacity < 100_100)
        // Full: a key it holds again changes nothing; a new one grows it.
        var set = BulkLedger.KeySet(minimumCapacity: 1_000)
        let capacity = set.capacity
        let keys = (0..<capacity).map { BulkLedger.Key("http://example.com/\($0)\n/tmp/x") }
        for key in keys { set.insert(key) }
        let again = set.insert(keys[0])
        #expect(!again && set.capacity == capacity && set.count == capacity)
        let new = set.insert(BulkLedger.Key("http://example.com/more\n/tmp/x"))
        #expect(new && set.capacity > capacity && set.count == capacity + 1)
        #expect(keys.allSatisfy { set.contains($0) })
    }

    @Test("the key set keeps 96 bits a key: keys that differ there are told apart, the mark among them")
    func keySetKeepsNinetySixBits() {
        var set = BulkLedger.KeySet(minimumCapacity: 16)
        let key = BulkLedger.Key(first: 42, second: 0x1234_5678_9ABC_DEF0)
        set.insert(key)
        #expect(set.contains(key))
        #expect(!set.contains(key.markedAlreadyComplete))
        #expect(!set.contains(BulkLedger.Key(first: 42, second: 0x1234_5678_9ABC_DEF2)))
        #expect(!set.contains(BulkLedger.Key(first: 43, second: 0x1234_5678_9ABC_DEF0)))
        // The high half of the second word is not kept: a key that differs only there is the same.
        #expect(set.contains(BulkLedger.Key(first: 42, second: 0x7777_7777_9ABC_DEF0)))
        // A grown table keeps them as they were.
        for index in 0..<100 { set.insert(BulkLedger.Key("http://example.com/\(index)\n/tmp/x")) }
        #expect(set.contains(key) && !set.contains(key.markedAlreadyComplete))
    }

    @Test("keys whose slots wrap around the end of the table are found")
    func keySetWrapsAround() {
        var set = BulkLedger.KeySet(minimumCapacity: 8)
        // A first word of all ones has its home in the last slot; the next ones wrap to slot 0.
        let keys = (0..<6).map { BulkLedger.Key(first: -1, second: $0 << 1) }
        for key in keys {
            let inserted = set.insert(key)
            #expect(inserted)
        }
        #expect(keys.allSatisfy { set.contains($0) })
        #expect(!set.contains(BulkLedger.Key(first: -1, second: 100)))
        #expect(!set.contains(BulkLedger.Key(first: 0, second: 0)))
    }
}
