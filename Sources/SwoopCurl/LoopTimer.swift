import SwoopCore

/// A one-shot timer on the transfer thread.
package final class LoopTimer {
    package let deadline: Moment
    private var action: (() -> Void)?

    package init(deadline: Moment, action: @escaping () -> Void) {
        self.deadline = deadline
        self.action = action
    }

    package var isCancelled: Bool { action == nil }

    package func cancel() { action = nil }

    package func fire() {
        let action = self.action
        self.action = nil
        action?()
    }
}

/// The loop's timers, earliest first: a binary min-heap, so scheduling one costs O(log n) however
/// many downloads have timers (every download has a progress timer; a ranged one also ticks its
/// housekeeping every 100 ms). Cancelled timers are dropped when they reach the top, and swept
/// out whenever the heap has doubled since the last sweep: a list of small files cancels its
/// files' progress timers long before they are due (thousands a second, each due half a second
/// later), which would otherwise stay in the heap, and in memory, until then.
package struct TimerHeap {
    private var heap: [LoopTimer] = []
    /// The size at which the next insert sweeps the cancelled timers out first.
    private var sweepAt = TimerHeap.smallestSweep
    private static let smallestSweep = 64

    package var isEmpty: Bool { heap.isEmpty }

    /// Timers held, cancelled ones not yet swept out included.
    package var count: Int { heap.count }

    /// The earliest timer that is still armed.
    package var earliest: LoopTimer? {
        mutating get {
            while let top = heap.first, top.isCancelled { removeEarliest() }
            return heap.first
        }
    }

    package mutating func insert(_ timer: LoopTimer) {
        if heap.count >= sweepAt { sweep() }
        heap.append(timer)
        var child = heap.count - 1
        while child > 0 {
            let parent = (child - 1) / 2
            guard heap[child].deadline < heap[parent].deadline else { break }
            heap.swapAt(child, parent)
            child = parent
        }
    }

    package mutating func removeEarliest() {
        guard !heap.isEmpty else { return }
        heap.swapAt(0, heap.count - 1)
        heap.removeLast()
        siftDown(from: 0)
    }

    /// Drops every cancelled timer and restores the heap (O(n), once per doubling: O(1) an insert).
    private mutating func sweep() {
        heap.removeAll { $0.isCancelled }
        for index in stride(from: heap.count / 2 - 1, through: 0, by: -1) { siftDown(from: index) }
        sweepAt = max(Self.smallestSweep, heap.count * 2)
    }

    private mutating func siftDown(from start: Int) {
        var parent = start
        while true {
            let left = 2 * parent + 1
            let right = left + 1
            var smallest = parent
            if left < heap.count, heap[left].deadline < heap[smallest].deadline { smallest = left }
            if right < heap.count, heap[right].deadline < heap[smallest].deadline { smallest = right }
            guard smallest != parent else { return }
            heap.swapAt(parent, smallest)
            parent = smallest
        }
    }

    package mutating func removeAll() {
        heap.removeAll()
        sweepAt = Self.smallestSweep
    }
}
