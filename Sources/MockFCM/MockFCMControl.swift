import Essentials
import FCMCore

/// The mock FCM's control endpoints (not part of FCM): `GET`/`DELETE /control/received`, `GET`/`POST`/`DELETE
/// /control/scripts` (POST takes `{"<token>": {"error": "UNREGISTERED", "times"?, "retry_after"?, "delay_ms"?}}`),
/// `POST /control/token-endpoint` (`{"refuse": true, "delay_ms": 0}`), `POST /control/revoke` (every access token
/// issued stops working) and `GET /control/stats`.
struct MockFCMControl {
    let state: MockFCMState

    func respond(method: String, path: String, body: [UInt8]) -> MockFCMReply {
        switch (method, path) {
        case ("GET", "/control/received"):
            let items: [JSONValue] = state.received.map { received in
                var members: [String: JSONValue] = [
                    "project": .string(received.project), "message": received.message,
                    "status": .int(Int64(received.status)), "validate_only": .bool(received.validateOnly),
                ]
                if let code = received.errorCode { members["error"] = .string(code.rawValue) }
                return .object(members)
            }
            return .json(200, JSONWriter.bytes(.object(["received": .array(items)])))
        case ("DELETE", "/control/received"):
            state.clearReceived()
            return .json(200, Array("{}".utf8))
        case ("GET", "/control/scripts"):
            return .json(200, JSONWriter.bytes(.object(state.scripts.mapValues(\.json))))
        case ("DELETE", "/control/scripts"):
            state.clearScripts()
            return .json(200, Array("{}".utf8))
        case ("POST", "/control/scripts"):
            guard let document = try? JSONParser.parse(body), case .object(let members) = document else {
                return problem("expected {\"<token>\": {\"error\": \"UNREGISTERED\", \"times\": 1}}")
            }
            var scripts: [(String, MockFCMScript)] = []
            for (token, value) in members {
                do { scripts.append((token, try MockFCMScript(json: value))) } catch {
                    return problem("script for \(token): \(error.message)")
                }
            }
            for (token, script) in scripts { state.script(token, script) }
            return .json(200, JSONWriter.bytes(.object(["scripted": .int(Int64(scripts.count))])))
        case ("POST", "/control/token-endpoint"):
            guard let document = try? JSONParser.parse(body), case .object = document else {
                return problem("expected {\"refuse\": true, \"delay_ms\": 0}")
            }
            if case .bool(let refuse)? = document["refuse"] { state.setRefuseTokens(refuse) }
            if case .int(let delay)? = document["delay_ms"] { state.setTokenDelay(milliseconds: Int(delay)) }
            return .json(200, Array("{}".utf8))
        case ("POST", "/control/revoke"):
            state.revokeAccessTokens()
            return .json(200, Array("{}".utf8))
        case ("GET", "/control/stats"):
            let counts = state.counts
            return .json(
                200,
                JSONWriter.bytes(
                    .object([
                        "messages": .int(Int64(counts.messages)), "accepted": .int(Int64(counts.accepted)),
                        "token_requests": .int(Int64(counts.tokenRequests)),
                        "tokens_issued": .int(Int64(counts.tokensIssued)),
                        "connections": .int(Int64(counts.connections)),
                    ])))
        default:
            return .json(404, JSONWriter.bytes(.object(["error": .string("no control endpoint \(method) \(path)")])))
        }
    }

    private func problem(_ message: String) -> MockFCMReply {
        .json(400, JSONWriter.bytes(.object(["error": .string(message)])))
    }
}
