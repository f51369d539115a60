import Essentials
import Testing

/// URLs the service will call: what HTTP clients would trap on is refused with a reason, the rest passes.
@Suite("Outbound URLs")
struct OutboundURLTests {
    @Test(
        "accepted: http(s), a host, ports 1 and 65535, IPv6 literals, an empty port, percent-encoded text",
        arguments: [
            "http://127.0.0.1/cb", "https://hooks.example.com/push-final?x=1#f", "http://127.0.0.1:1/cb",
            "http://127.0.0.1:65535/cb", "http://[::1]:8080/cb", "http://[::1]/cb", "HTTPS://Hooks.Example.com/a%20b",
            "http://127.0.0.1:/cb",
        ])
    func accepted(url: String) {
        #expect(OutboundURL.problem(url) == nil, "\(url)")
    }

    @Test(
        "refused, with the reason: ports 0, 65536, 99999 and longer, controls, spaces, other schemes, credentials",
        arguments: [
            ("http://127.0.0.1:99999/cb", "port 99999"), ("http://127.0.0.1:65536/cb", "port 65536"),
            ("http://127.0.0.1:0/cb", "port 0"), ("http://[::1]:70000/cb", "port 70000"),
            ("http://127.0.0.1:123456789012345678901234/cb", "port"), ("http://127.0.0.1:8x/cb", "port"),
            ("http://127.0.0.1/c b", "space"), ("http://127.0.0.1/c\tb", "U+9"), ("http://127.0.0.1/c\u{7F}", "U+7F"),
            ("http://127.0.0.1/\r\nX: y", "U+D"), ("http://hooks.exämple.com/", "U+E4"),
            ("ftp://127.0.0.1/x", "scheme"),
            ("http:///path", "host"), ("https://u:p@hooks.example.com/x", "user"), ("/relative/path", "absolute"),
            ("", "empty"), ("http://h/" + String(repeating: "a", count: 2_048), "2048"),
        ])
    func refused(url: String, said: String) {
        let problem = OutboundURL.problem(url)
        #expect(problem?.contains(said) == true, "\(url.prefix(60)): \(String(describing: problem))")
    }
}
