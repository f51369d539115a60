import EnrichmentCore
import EnrichmentRuntime
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
