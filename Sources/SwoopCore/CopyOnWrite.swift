/// A value kept in one heap object, copied only when it is changed while another value shares
/// it: the form of the large structs a download hands to each of its stages (its object, its
/// configuration, its exchange options, its result). Copying such a struct retained each of its
/// strings and lists one by one; a list of small files made a thousand retains per file, a
/// measurable share of its work. With the box a copy is one retain.
///
/// Written here rather than taken from a package: it is the standard library's own idiom
/// (`isKnownUniquelyReferenced`), a dozen lines.
package struct CopyOnWrite<Value: Sendable>: Sendable {
    /// Changed only while uniquely referenced (``update(_:)``), hence `@unchecked`.
    @usableFromInline
    final class Box: @unchecked Sendable {
        /// Without the runtime's exclusivity check: a change happens only inside ``update(_:)``,
        /// while this box has no other owner, so no other access of it can overlap the change
        /// (the owner's own variable is still checked, by the compiler or at run time). Every read
        /// of a URL's, object's or result's field paid the check: 36 a small file, 2.5k instructions.
        @exclusivity(unchecked) @usableFromInline var value: Value

        @inlinable
        init(_ value: Value) {
            self.value = value
        }
    }

    @usableFromInline var box: Box

    @inlinable
    package init(_ value: Value) {
        box = Box(value)
    }

    /// Read in place: no copy of the whole value to read one field of it.
    @inlinable
    package var value: Value {
        _read { yield box.value }
    }

    /// Changes the value in place when unshared, else in a copy of its own first. A function
    /// rather than a `_modify` accessor: a coroutine the optimizer does not inline allocates its
    /// frame, which made every change of a result a `malloc`.
    @inlinable
    package mutating func update<Result>(_ change: (inout Value) throws -> Result) rethrows -> Result {
        if !isKnownUniquelyReferenced(&box) { box = Box(box.value) }
        return try change(&box.value)
    }
}

extension CopyOnWrite: Equatable where Value: Equatable {
    @inlinable
    package static func == (lhs: Self, rhs: Self) -> Bool {
        lhs.box === rhs.box || lhs.box.value == rhs.box.value
    }
}
