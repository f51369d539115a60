import Crypto
import EnrichmentCore
import EnrichmentRuntime
import Essentials
import Foundation
import NIOHTTP1
import TestSupport
import Testing

/// Runs a program by path.
func run(_ executable: String, _ arguments: [String]) throws -> (status: Int32, out: String, err: String) {
    try runProgram(URL(fileURLWithPath: executable), arguments)
}

@Suite("The preview page in headless Chromium", .serialized)
struct PreviewTests {
    static let chromium = ["/usr/bin/chromium", "/usr/bin/chromium-browser"].first {
        FileManager.default.isExecutableFile(atPath: $0)
    }

    @Test("the page loads without console errors, shows the body, and its screenshot has the map panel under the text")
    func chromiumRendersThePreview() async throws {
        let chromium = try #require(
            Self.chromium, "Chromium is needed: run scripts/install-test-tools.sh (apt-get install chromium)")
        try await withService({ $0.loadSamplePOIs = false }) { client in
            _ = try await client.post("/v1/pois", json: onePOI("eiffel", "Tour Eiffel", lat: 48.8584, lng: 2.2945))
            _ = try await client.post("/v1/pois", json: onePOI("trocadero", "Trocadéro", lat: 48.8616, lng: 2.2893))
            try await reportFix(client, "p-1", lat: 48.8570, lng: 2.2950)
            let url = client.base + "/preview?device_id=p-1"
            // The page as served: HTML, the body text, the SVG panel, the static map link.
            let page = try await client.get("/preview?device_id=p-1")
            #expect(page.status == 200)
            #expect(page.headers["content-type"]?.hasPrefix("text/html") == true)
            #expect(page.text.contains("<svg"))
            let flags = ["--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars", "--enable-logging=stderr"]
            let dom = try run(chromium, flags + ["--dump-dom", url])
            #expect(dom.status == 0, "\(dom.err.suffix(2000))")
            #expect(dom.out.contains("Tour Eiffel is 160 m away"), "\(dom.out.prefix(3000))")
            #expect(dom.out.contains("id=\"map\""))
            #expect(!dom.err.contains(":CONSOLE("), "console messages: \(dom.err.suffix(2000))")
            let shot = FileManager.default.temporaryDirectory.appendingPathComponent("preview-\(UUID().uuidString).png")
            defer { try? FileManager.default.removeItem(at: shot) }
            let screenshot = try run(chromium, flags + ["--screenshot=\(shot.path)", "--window-size=600,900", url])
            #expect(FileManager.default.fileExists(atPath: shot.path), "\(screenshot.err.suffix(2000))")
            let check = try run(
                "/usr/bin/env",
                ["python3", repositoryRoot.appendingPathComponent("scripts/check-screenshot.py").path, shot.path])
            #expect(check.status == 0, "layout: \(check.out) \(check.err)")
        }
    }

    @Test("the audience page counts an audience and draws each member's last fix over its areas, in Chromium")
    func audienceMap() async throws {
        let chromium = try #require(
            Self.chromium, "Chromium is needed: run scripts/install-test-tools.sh (apt-get install chromium)")
        try await withService({ $0.loadSamplePOIs = false }) { client in
            // Five devices within 1 km of the point, two farther away, one inside the excluded circle.
            let inside = [
                (48.8570, 2.2950), (48.8600, 2.2990), (48.8540, 2.2900), (48.8620, 2.2940), (48.8555, 2.3010),
            ]
            for (index, (lat, lng)) in inside.enumerated() {
                try await reportFix(client, "in-\(index)", lat: lat, lng: lng)
            }
            try await reportFix(client, "far-1", lat: 48.90, lng: 2.35)
            try await reportFix(client, "far-2", lat: 48.80, lng: 2.20)
            let audience =
                #"{"all":[{"near":{"latitude":48.8584,"longitude":2.2945,"radius_m":1000}},{"not":{"near":{"latitude":48.8555,"longitude":2.3010,"radius_m":50}}}]}"#
            let query = audience.addingPercentEncoding(withAllowedCharacters: .alphanumerics) ?? ""
            let page = try await client.get("/preview/audience?audience=\(query)")
            #expect(page.status == 200, "\(page.text)")
            #expect(page.text.contains("<b id=\"count\">4</b>"), "\(page.text)")
            #expect(page.text.components(separatedBy: "class=\"member\"").count - 1 == 4)
            #expect(page.text.components(separatedBy: "class=\"area\"").count - 1 == 2)
            #expect(page.text.contains("stroke-dasharray"), "the excluded circle is drawn dashed")
            // A broken audience is shown with the API's message, not a bare error.
            let broken = try await client.get(
                "/preview/audience?audience="
                    + (#"{"near":{"latitude":48}}"#.addingPercentEncoding(withAllowedCharacters: .alphanumerics) ?? ""))
            #expect(broken.status == 400)
            #expect(broken.text.contains("audience.near"), "\(broken.text)")
            // In a browser: no console message (the page runs no script and breaks no policy), and the map is there.
            let flags = ["--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars", "--enable-logging=stderr"]
            let dom = try run(chromium, flags + ["--dump-dom", client.base + "/preview/audience?audience=\(query)"])
            #expect(dom.status == 0, "\(dom.err.suffix(2000))")
            #expect(dom.out.contains("id=\"audience-map\""), "\(dom.out.prefix(3000))")
            #expect(dom.out.components(separatedBy: "class=\"member\"").count - 1 == 4)
            #expect(!dom.err.contains(":CONSOLE("), "console messages: \(dom.err.suffix(2000))")
        }
    }

    @Test(
        "with an API key, a person signs in with the form, the key stays out of URLs and scripts, and no policy is broken"
    )
    func chromiumSignsIn() async throws {
        let chromium = try #require(
            Self.chromium, "Chromium is needed: run scripts/install-test-tools.sh (apt-get install chromium)")
        let key = "preview-key-Z9y8"
        try await withService({
            $0.loadSamplePOIs = false
            $0.apiKey = Secret(key)
        }) { client in
            let auth = ["Authorization": "Bearer \(key)"]
            _ = try await client.post(
                "/v1/pois", json: onePOI("eiffel", "Tour Eiffel", lat: 48.8584, lng: 2.2945), headers: auth)
            let now = Int(Date().timeIntervalSince1970)
            let fix = try await client.post(
                "/v1/devices/p-2/locations",
                json: #"{"locations":[{"latitude":48.857,"longitude":2.295,"utc_timestamp":\#(now)}]}"#, headers: auth)
            #expect(fix.status == 200)
            let run = try run(
                "/usr/bin/env",
                [
                    "python3", repositoryRoot.appendingPathComponent("scripts/preview-browser.py").path, chromium,
                    client.base, "p-2", key,
                ])
            #expect(run.status == 0, "\(run.err.suffix(2000))")
            let report = try JSONValue.decode(Data(run.out.utf8))
            #expect(report["sign_in_form"] == .bool(true), "\(run.out)")
            #expect(report["body"]?.stringValue?.contains("Tour Eiffel is") == true, "\(run.out)")
            #expect(report["has_map"] == .bool(true))
            // A script on the page cannot read the session, and the browser keeps it HttpOnly and SameSite=Strict.
            #expect(report["document_cookie"] == .string(""))
            let cookie = report["cookies"]?[0]
            #expect(cookie?["name"] == .string("enrich_preview"), "\(run.out)")
            #expect(cookie?["httpOnly"] == .bool(true))
            #expect(cookie?["sameSite"] == .string("Strict"))
            #expect(cookie?["value_contains_key"] == .bool(false))
            // The key never appeared in a URL, and the page broke no Content-Security-Policy (no console entry).
            guard case .array(let visited)? = report["visited"] else {
                Issue.record("no visited URLs: \(run.out)")
                return
            }
            #expect(visited.count == 3)
            #expect(!visited.contains { $0.stringValue?.contains(key) ?? true })
            #expect(report["console"] == .array([]), "\(run.out)")
        }
    }

    @Test("preview answers carry the security headers; without the key a browser gets the sign-in form, not JSON")
    func securityHeadersAndSignIn() async throws {
        let key = "preview-key-Q7w6"
        try await withService({
            $0.loadSamplePOIs = false
            $0.apiKey = Secret(key)
        }) { client in
            let signIn = try await client.get("/preview")
            #expect(signIn.status == 401)
            #expect(signIn.text.contains("form method=\"post\" action=\"/preview/login\""))
            for page in [signIn, try await client.get("/preview", headers: ["Authorization": "Bearer \(key)"])] {
                let policy = page.headers["content-security-policy"] ?? ""
                #expect(policy.contains("default-src 'none'"), "\(page.headers)")
                #expect(policy.contains("frame-ancestors 'none'"))
                #expect(!policy.contains("unsafe-inline"))
                #expect(!policy.contains("script-src"))
                #expect(page.headers["x-content-type-options"] == "nosniff")
                #expect(page.headers["x-frame-options"] == "DENY")
            }
            // The style element's hash in the policy is the hash of the style the page carries.
            let page = try await client.get("/preview", headers: ["Authorization": "Bearer \(key)"])
            let start = try #require(page.text.range(of: "<style>"))
            let end = try #require(page.text.range(of: "</style>"))
            let style = String(page.text[start.upperBound..<end.lowerBound])
            let hash = Data(SHA256.hash(data: Data(style.utf8))).base64EncodedString()
            #expect(page.headers["content-security-policy"]?.contains("'sha256-\(hash)'") == true)
            // A wrong key is refused with the form again; the right one signs in with a cookie that is not the key.
            let wrong = try await client.postForm("/preview/login", "key=nope")
            #expect(wrong.status == 401)
            #expect(wrong.headers["set-cookie"] == nil)
            let right = try await client.postForm("/preview/login", "key=\(key)")
            #expect(right.status == 303)
            #expect(right.headers["location"] == "/preview")
            let setCookie = try #require(right.headers["set-cookie"])
            #expect(setCookie.contains("HttpOnly"))
            #expect(setCookie.contains("SameSite=Strict"))
            #expect(setCookie.contains("Path=/preview"))
            #expect(!setCookie.contains(key))
            let cookie = String(setCookie.split(separator: ";")[0])
            #expect(try await client.get("/preview", headers: ["Cookie": cookie]).status == 200)
            // Behind a TLS proxy the cookie is Secure too.
            let proxied = try await client.postForm(
                "/preview/login", "key=\(key)", headers: ["X-Forwarded-Proto": "https"])
            #expect(proxied.headers["set-cookie"]?.contains("; Secure") == true)
            #expect(setCookie.contains("Secure") == false)
            // The cookie opens the preview only, not the API.
            #expect(try await client.get("/v1/devices/x/location", headers: ["Cookie": cookie]).status == 401)
            #expect(try await client.get("/preview", headers: ["Cookie": "enrich_preview=forged"]).status == 401)
        }
    }

    @Test("a preview session ends 12 hours after sign-in on the server, whatever the browser keeps")
    func sessionExpires() async throws {
        let key = "preview-key-E5r4"
        let clock = ManualClock()
        try await withService(
            {
                $0.loadSamplePOIs = false
                $0.apiKey = Secret(key)
            }, clock: clock
        ) { client in
            let signIn = try await client.postForm("/preview/login", "key=\(key)")
            let cookie = String(try #require(signIn.headers["set-cookie"]).split(separator: ";")[0])
            #expect(try await client.get("/preview", headers: ["Cookie": cookie]).status == 200)
            clock.advance(43_190)
            #expect(try await client.get("/preview", headers: ["Cookie": cookie]).status == 200)
            clock.advance(20)
            #expect(try await client.get("/preview", headers: ["Cookie": cookie]).status == 401)
            // A cookie with its time changed does not verify.
            let value = cookie.dropFirst("enrich_preview=".count)
            let forged = "enrich_preview=\(Int64(clock.now().timeIntervalSince1970))" + value.drop { $0 != "." }
            #expect(try await client.get("/preview", headers: ["Cookie": forged]).status == 401)
        }
    }

    @Test("the form posts a payload; a bad one is shown as an error, escaped")
    func form() async throws {
        try await withService({ $0.loadSamplePOIs = false }) { client in
            let empty = try await client.get("/preview")
            #expect(empty.status == 200)
            #expect(empty.text.contains("<form"))
            let bad = try await client.request(
                .POST, "/preview", body: Data("device_id=x&payload=%3Cscript%3E".utf8),
                contentType: "application/x-www-form-urlencoded")
            #expect(bad.status == 400)
            #expect(bad.text.contains("&lt;script&gt;"))
            #expect(!bad.text.contains("<script>"))
        }
    }
}
