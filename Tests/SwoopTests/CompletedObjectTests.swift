import Testing
@testable import Swoop
@testable import SwoopStore
@testable import SwoopCurl
import SwoopTestSupport

@Suite("CompletedObject")
struct CompletedObjectTests {
    @Test func keepsTheValidatorThePreconditionUses() {
        let strong = CompletedObject(
            size: 4096, etag: "\"9b2cf535f27731c974343645a3985328\"", lastModified: "Tue, 15 Nov 1994 12:45:26 GMT")
        #expect(strong.encoded == "s2\n4096\n\"9b2cf535f27731c974343645a3985328\"")
        #expect(
            CompletedObject(encoded: strong.encoded)
                == CompletedObject(size: 4096, etag: "\"9b2cf535f27731c974343645a3985328\"", lastModified: nil))
        let dated = CompletedObject(size: 7, etag: "W/\"w\"", lastModified: "Tue, 15 Nov 1994 12:45:26 GMT")
        #expect(
            CompletedObject(encoded: dated.encoded)
                == CompletedObject(size: 7, etag: nil, lastModified: "Tue, 15 Nov 1994 12:45:26 GMT"))
        let weak = CompletedObject(size: 7, etag: "W/\"w\"", lastModified: nil)
        #expect(CompletedObject(encoded: weak.encoded) == weak)
        let bare = CompletedObject(size: 0, etag: nil, lastModified: nil)
        #expect(CompletedObject(encoded: bare.encoded) == bare)
    }

    @Test func fitsInAnInode() {
        // ext4 keeps about 60 bytes of attribute value in a 256-byte inode; S3's ETags are 34.
        let s3 = CompletedObject(size: 1 << 40, etag: "\"9b2cf535f27731c974343645a3985328-1024\"", lastModified: nil)
        #expect(s3.encoded.utf8.count <= 60)
        let dated = CompletedObject(size: 1 << 40, etag: nil, lastModified: "Wed, 16 Nov 1994 08:00:00 GMT")
        #expect(dated.encoded.utf8.count <= 60)
    }

    @Test func readsTheFirstFormat() {
        let old = CompletedObject(
            encoded: "swoop1\n10\n\"e\"\nTue, 15 Nov 1994 12:45:26 GMT\nhttps://example.com/a.bin")
        #expect(
            old
                == CompletedObject(
                    size: 10, etag: "\"e\"", lastModified: "Tue, 15 Nov 1994 12:45:26 GMT",
                    url: "https://example.com/a.bin"))
        #expect(CompletedObject(encoded: "s3\n1\nx") == nil)
        #expect(CompletedObject(encoded: "s2\nten\n") == nil)
    }
}

@Suite("TimerHeap")
struct TimerHeapTests {
    @Test func firesInDeadlineOrderAndSkipsCancelled() {
        var heap = TimerHeap()
        let start = Moment.now
        var fired: [Int] = []
        var timers: [LoopTimer] = []
        for (index, offset) in [5, 1, 9, 3, 7, 2, 8].enumerated() {
            let timer = LoopTimer(deadline: start + .milliseconds(offset)) { fired.append(offset) }
            _ = index
            timers.append(timer)
            heap.insert(timer)
        }
        timers[4].cancel()  // the 7 ms one
        while let next = heap.earliest {
            heap.removeEarliest()
            next.fire()
        }
        #expect(fired == [1, 2, 3, 5, 8, 9])
        #expect(heap.isEmpty)
    }

    @Test("timers cancelled long before they are due are swept out, and the rest still fire in order")
    func sweepsCancelled() {
        var heap = TimerHeap()
        var random = SplitMix64(seed: 57)
        let start = Moment.now
        var live: [(deadline: Int, timer: LoopTimer)] = []
        var fired: [Int] = []
        var largest = 0
        // A list's files: each schedules a timer due later, and most are cancelled soon after.
        for step in 0..<20_000 {
            let due = step + Int(random.next() % 5_000)
            let timer = LoopTimer(deadline: start + .microseconds(due)) { fired.append(due) }
            heap.insert(timer)
            live.append((due, timer))
            if live.count > 64 {
                let index = Int(random.next() % UInt64(live.count - 1))
                live[index].timer.cancel()
                live.remove(at: index)
            }
            largest = max(largest, heap.count)
        }
        #expect(largest <= 4 * 64 + 1, "the heap held \(largest) timers for at most 65 live ones")
        while let next = heap.earliest {
            heap.removeEarliest()
            next.fire()
        }
        #expect(fired == live.map(\.deadline).sorted())
        #expect(heap.isEmpty)
    }
}
