/// Lets one task at a time through; the others wait in arrival order. Used to run imports one by one, so
/// several large uploads at once cost the memory of one.
actor AsyncGate {
    private var busy = false
    private var waiting: [CheckedContinuation<Void, Never>] = []

    /// Runs `body` when no other caller is inside.
    func run<T: Sendable>(_ body: @Sendable () async throws -> T) async throws -> T {
        await enter()
        defer { leave() }
        return try await body()
    }

    private func enter() async {
        guard busy else {
            busy = true
            return
        }
        await withCheckedContinuation { waiting.append($0) }
    }

    private func leave() {
        if waiting.isEmpty {
            busy = false
        } else {
            waiting.removeFirst().resume()
        }
    }
}
