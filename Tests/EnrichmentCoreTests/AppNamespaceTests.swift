import EnrichmentCore
import Testing

@Suite("Stored keys of several apps")
struct AppNamespaceTests {
    @Test("a stored key belongs to exactly the app it was made for", arguments: ["default", "courier", "c", "co"])
    func belongs(app: String) {
        let keys = [
            "d1", "courier/d1", "c/d1", "co/d1", "courier/custom_x", "cour", "courier", "courierx/d1", "x:y.z_w-1",
        ]
        for key in keys {
            #expect(
                AppNamespace.belongs(key, to: app) == (AppNamespace.app(of: key) == app),
                "\(key) in \(app): app(of:) says \(AppNamespace.app(of: key))")
        }
        #expect(AppNamespace.belongs(AppNamespace.key(app: app, id: "d9"), to: app))
        #expect(
            !AppNamespace.belongs(AppNamespace.key(app: app == "default" ? "courier" : "default", id: "d9"), to: app))
    }

    @Test("a key splits into its app and its id")
    func split() {
        #expect(AppNamespace.app(of: "courier/d1") == "courier")
        #expect(AppNamespace.app(of: "d1") == "default")
        #expect(AppNamespace.split("courier/d1") == ("courier", "d1"))
        #expect(AppNamespace.id(of: "d1") == "d1")
    }
}
