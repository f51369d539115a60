import Foundation
import Testing

@testable import EnrichmentService

/// The request bound's sweeper: one sweep every `resolution` cancels what is past its deadline.
@Suite("Request deadlines without a timer per request")
struct RequestDeadlinesTests {
    struct Boom: Error {}

    @Test("a body past its bound is cancelled and answers nil near the bound; the caller's task is not cancelled")
    func pastTheBound() async throws {
        let deadlines = RequestDeadlines(resolution: .milliseconds(20))
        let started = ContinuousClock.now
        let value = try await deadlines.run(within: .milliseconds(100)) {
            try await Task.sleep(for: .seconds(30))
            return 1
        }
        let elapsed = ContinuousClock.now - started
        #expect(value == nil)
        #expect(elapsed >= .milliseconds(100) && elapsed < .seconds(5), "\(elapsed)")
        #expect(!Task.isCancelled)
    }

    @Test("a body within its bound gives its value or its own error, and many at once each get their own answer")
    func withinTheBound() async throws {
        let deadlines = RequestDeadlines(resolution: .milliseconds(20))
        #expect(try await deadlines.run(within: .seconds(10)) { 7 } == 7)
        await #expect(throws: Boom.self) { try await deadlines.run(within: .seconds(10)) { throw Boom() } }
        // Half of them sleep past a short bound, half answer at once.
        let answers = try await withThrowingTaskGroup(of: (Int, Int?).self) { group in
            for index in 0..<200 {
                group.addTask {
                    let value = try await deadlines.run(within: .milliseconds(index.isMultiple(of: 2) ? 50 : 10_000)) {
                        if index.isMultiple(of: 2) { try await Task.sleep(for: .seconds(30)) }
                        return index
                    }
                    return (index, value)
                }
            }
            return try await group.reduce(into: [Int: Int?]()) { $0[$1.0] = $1.1 }
        }
        #expect(answers.count == 200)
        for (index, value) in answers { #expect(value == (index.isMultiple(of: 2) ? nil : index)) }
    }
}
