import SwoopCore

/// A one-shot timer on the transfer thread.
package final class LoopTimer {
    package let deadline: ContinuousClock.Instant
    private var action: (() -> Void)?

    package init(deadline: ContinuousClock.Instant, action: @escaping () -> Void) {
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
/// housekeeping every 100 ms). Cancelled timers are dropped when they reach the top.
package struct TimerHeap {
    private var heap: [LoopTimer] = []

    package var isEmpty: Bool { heap.isEmpty }

    /// The earliest timer that is still armed.
    package var earliest: LoopTimer? {
        mutating get {
            while let top = heap.first, top.isCancelled { removeEarliest() }
            return heap.first
        }
    }

    package mutating func insert(_ timer: LoopTimer) {
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
        var parent = 0
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
    }
}
